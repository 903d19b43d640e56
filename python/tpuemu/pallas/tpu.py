# SPDX-License-Identifier: MIT
"""jax.experimental.pallas.tpu over libtpurt (tpuemu.pallas.tpu as pltpu)."""
from . import GridSpec


class PrefetchScalarGridSpec(GridSpec):
    def __init__(self, num_scalar_prefetch=0, grid=(), in_specs=None, out_specs=None,
                 scratch_shapes=()):
        super().__init__(grid, in_specs, out_specs, scratch_shapes, num_scalar_prefetch)


class _MemorySpace:
    def __init__(self, name, code):
        self._space = name
        self._code = code

    def __call__(self, shape, dtype):
        return _Scratch(shape, dtype, self._code)

    def __repr__(self):
        return self._space.upper()


class _Scratch:
    def __init__(self, shape, dtype, code):
        self.shape = tuple(shape)
        self.dtype = dtype
        self._space_code = code


VMEM = _MemorySpace("vmem", 0)
SMEM = _MemorySpace("smem", 1)
ANY = HBM = _MemorySpace("any", 2)


class CompilerParams:
    def __init__(self, dimension_semantics=None, vmem_limit_bytes=None, **kwargs):
        self.dimension_semantics = dimension_semantics
        self.vmem_limit_bytes = vmem_limit_bytes


TPUCompilerParams = CompilerParams
