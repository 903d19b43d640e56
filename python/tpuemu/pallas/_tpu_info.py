# SPDX-License-Identifier: MIT AND Apache-2.0
# Transcribes code from JAX (https://github.com/jax-ml/jax), Copyright
# The JAX Authors, under the Apache License 2.0 (LICENSES/Apache-2.0);
# changed as the docstring or the comments below say.
"""pltpu.get_tpu_info() and its types, as jax/_src/pallas/mosaic/tpu_info.py
has them: ChipVersion, TpuInfo, SparseCoreInfo, get_tpu_info_for_chip,
is_tpu_device. The per-chip table is JAX's (its figures, for the chips
tpuemu does not model); the open device's TpuInfo is the v5e row with
every field the device has a parameter for (cores, VMEM, SMEM, HBM, MXU
size and count, rates) read from the device instead. Changed from JAX's:
no jax_util.cache (the device is asked each time; it is cheap), no
abstract-mesh device kinds, no registry of other kinds, no Tiling /
infer_tiling, dtypes compared by name (tpuemu has no int4 or float8
arrays, only their names)."""
import dataclasses
import enum

import numpy as _np


class ChipVersionBase:
    pass


class ChipVersion(ChipVersionBase, enum.Enum):
    """A TPU chip version, as JAX names them."""
    TPU_V2 = "v2"
    TPU_V3 = "v3"
    TPU_V4I = "v4i"
    TPU_V4 = "v4"
    TPU_V5E = "v5e"
    TPU_V5P = "v5p"
    TPU_V6E = "v6e"
    TPU_7 = "7"
    TPU_7X = "7x"
    TPU_8I = "8i"
    TPU_8T = "8t"

    def __str__(self):
        return self.value

    @property
    def num_physical_tensor_cores_per_chip(self):
        return 1 if self in _SINGLE_CORE else 2

    @property
    def supports_megacore(self):
        return self in (ChipVersion.TPU_V4, ChipVersion.TPU_V5P)

    @property
    def is_lite(self):
        return self in (ChipVersion.TPU_V4I, ChipVersion.TPU_V5E, ChipVersion.TPU_V6E)


_SINGLE_CORE = (ChipVersion.TPU_V4I, ChipVersion.TPU_V5E, ChipVersion.TPU_V6E,
                ChipVersion.TPU_8T)

# a real device's device_kind -> its chip (JAX's chip_version_from_device_kind)
_KINDS = {
    "TPU v2": ChipVersion.TPU_V2, "TPU v3": ChipVersion.TPU_V3,
    "TPU v4": ChipVersion.TPU_V4, "TPU v4 lite": ChipVersion.TPU_V4I,
    "TPU v5e": ChipVersion.TPU_V5E, "TPU v5 lite": ChipVersion.TPU_V5E,
    "TPU v5": ChipVersion.TPU_V5P, "TPU v5p": ChipVersion.TPU_V5P,
    "TPU v6e": ChipVersion.TPU_V6E, "TPU v6 lite": ChipVersion.TPU_V6E,
    "TPU7": ChipVersion.TPU_7, "TPU7x": ChipVersion.TPU_7X,
    "TPU8i": ChipVersion.TPU_8I, "TPU8t": ChipVersion.TPU_8T,
}


def chip_version_from_device_kind(device_kind):
    return _KINDS.get(device_kind)


@dataclasses.dataclass(frozen=True, kw_only=True)
class SparseCoreInfo:
    """SparseCore-specific information."""
    num_cores: int
    num_subcores: int
    num_lanes: int
    vmem_capacity_bytes: int
    dma_granule_size_bytes: int


def _dtype_name(d):
    """JAX's dtypes.dtype(d), by name: a str, a NumPy or tpuemu dtype, a
    scalar type, or one of the names tpuemu has no arrays of (jnp.int4)."""
    from .._trace import as_dtype
    if isinstance(d, str):
        name = d
    else:
        try:
            name = as_dtype(d).name
        except TypeError:
            name = getattr(d, "name", None)
    if name in _KNOWN_DTYPES:
        return name
    try:
        return _np.dtype(name if name is not None else d).name
    except TypeError:
        raise TypeError("Cannot interpret %r as a data type" % (d,)) from None


_KNOWN_DTYPES = {"bfloat16", "int4", "uint4", "int2", "uint2", "float8_e4m3fn",
                 "float8_e5m2", "float8_e4m3b11fnuz"}


@dataclasses.dataclass(frozen=True, kw_only=True)
class TpuInfo:
    """TPU hardware information, per TensorCore (multiply by num_cores for
    the chip's)."""
    chip_version: ChipVersionBase
    generation: int
    num_cores: int
    num_lanes: int
    num_sublanes: int
    mxu_column_size: int
    num_mxus: int		# MXUs per core
    num_accumulators: int	# 32-bit (num_sublanes, mxu_column_size) buffers per MXU
    vmem_capacity_bytes: int
    cmem_capacity_bytes: int
    smem_capacity_bytes: int
    hbm_capacity_bytes: int
    mem_bw_bytes_per_second: int
    bf16_ops_per_second: int
    int8_ops_per_second: int
    fp8_ops_per_second: int
    int4_ops_per_second: int
    sparse_core: SparseCoreInfo | None = None

    @property
    def is_lite(self):
        return self.chip_version.is_lite

    @property
    def is_split_chip(self):
        """A multi-core chip used one core per logical device."""
        return self.num_cores == 1 and self.chip_version.num_physical_tensor_cores_per_chip > 1

    @property
    def is_megacore(self):
        """The chip's cores combined into one logical device."""
        return self.num_cores > 1

    def is_matmul_supported(self, lhs_dtype, rhs_dtype):
        """Whether the chip's MXU takes these input dtypes without a cast."""
        lhs, rhs = _dtype_name(lhs_dtype), _dtype_name(rhs_dtype)
        v = self.chip_version
        F32, BF16 = "float32", "bfloat16"
        F8B11, F8E4, F8E5 = "float8_e4m3b11fnuz", "float8_e4m3fn", "float8_e5m2"
        if v in (ChipVersion.TPU_V2, ChipVersion.TPU_V3):
            return lhs == rhs == F32
        if v in (ChipVersion.TPU_V4I, ChipVersion.TPU_V4):
            return lhs in (F32, BF16) and rhs in (F32, BF16, "int8")
        if v in (ChipVersion.TPU_V5E, ChipVersion.TPU_V5P, ChipVersion.TPU_V6E):
            return ((lhs in (F32, BF16, F8E5, F8B11) and rhs in (F32, BF16, F8E5, F8B11))
                    or (lhs in ("uint8", "int8") and rhs in ("uint8", "int8"))
                    or (lhs in ("uint4", "int4") and rhs in ("uint4", "int4")))
        if v in (ChipVersion.TPU_7, ChipVersion.TPU_7X):
            return ((lhs in (F32, BF16) and rhs in (F32, BF16, F8E5, F8E4))
                    or (lhs in (F8E5, F8E4) and rhs in (F8E5, F8E4)))
        if v is ChipVersion.TPU_8I:
            return ((lhs in (F32, BF16) and rhs in (F32, BF16, F8E5, F8E4, "uint4", "int4"))
                    or (lhs in (F8E5, F8E4) and rhs in (F8E5, F8E4, "uint4", "int4")))
        if v is ChipVersion.TPU_8T:
            return ((lhs in (F32, BF16) and rhs in (F32, BF16, "int4"))
                    or (lhs in (F32, BF16, F8E5, F8E4) and rhs in (F8E5, F8E4, "int4")))
        return False

    def get_sublane_tiling(self, dtype):
        """The sublane tiling of @dtype (a heuristic: XLA's flags change it)."""
        from ..dtypes import itemsize_bits
        bits = itemsize_bits(dtype)
        if self.generation < 7:
            # before TPU7x XLA tiles 16- and 32-bit types by (8, 128) by default
            return self.num_sublanes if bits in (16, 32) else self.num_sublanes * (32 // bits)
        if self.generation in (7, 8):
            return self.num_sublanes * (32 // bits)
        raise NotImplementedError("TPU generation is not supported")


_MIB = 1024 * 1024


def _sc(cores, subcores, lanes, vmem_kib, granule):
    return SparseCoreInfo(num_cores=cores, num_subcores=subcores, num_lanes=lanes,
                          vmem_capacity_bytes=vmem_kib * 1024, dma_granule_size_bytes=granule)


def _chip_info(v, num_cores):
    """JAX's _get_tpu_info_impl: the chip's per-core figures. A chip's
    totals (HBM, bandwidth, rates) are divided by its physical cores."""
    per = v.num_physical_tensor_cores_per_chip
    C = ChipVersion
    # (generation, sublanes, mxu column, mxus, accumulators, VMEM MiB, CMEM, SMEM,
    #  HBM, HBM bytes/s, bf16, int8, fp8, int4 (chip totals), sparse core)
    rows = {
        C.TPU_V2: (2, 8, 128, 1, 0, 16, 0, 16 * 1024,
                   16_000_000_000, 7.16e11, 4.6e13, 0, 0, 0, None),
        C.TPU_V3: (3, 8, 128, 2, 0, 16, 0, 16 * 1024,
                   34_400_000_000, 8.25e11, 1.40e14, 0, 0, 0, None),
        C.TPU_V4I: (4, 8, 128, 4, 0, 16, 134_000_000, _MIB,
                    8_590_000_000, 6.14e11, 1.37e14, 0, 0, 0, None),
        C.TPU_V4: (4, 8, 128, 4, 0, 16, 134_000_000, _MIB,
                   34_400_000_000, 1.23e12, 2.75e14, 0, 0, 0, None),
        C.TPU_V5E: (5, 8, 128, 4, 0, 128, 0, _MIB,
                    17_200_000_000, 8.20e11, 1.97e14, 3.94e14, 0, 7.88e14, None),
        C.TPU_V5P: (5, 8, 128, 4, 0, 64, 0, _MIB,
                    103_000_000_000, 2.46e12, 4.59e14, 9.18e14, 0, 1.84e15,
                    _sc(4, 16, 8, 512, 32)),
        C.TPU_V6E: (6, 8, 256, 2, 0, 128, 0, _MIB,
                    34_400_000_000, 1.64e12, 9.20e14, 1.84e15, 9.20e14, 3.68e15,
                    _sc(2, 16, 8, 256, 32)),
        C.TPU_7: (7, 8, 256, 2, 128, 64, 0, _MIB,
                  206_000_000_000, 7.40e12, 2.31e15, 0, 4.60e15, 0,
                  _sc(2, 16, 16, 512, 32)),
        C.TPU_8I: (8, 8, 256, 2, 256, 192, 0, _MIB,
                   309_000_000_000, 8.60e12, 1.101e15, 0, 8.808e15, 0,
                   _sc(1, 4, 16, 512, 64)),
        C.TPU_8T: (8, 16, 256, 2, 256, 128, 0, _MIB,
                   231_000_000_000, 6.4e12, 0.9961e15, 0.9961e15, 5.9769e15, 11.9538e15,
                   _sc(2, 16, 16, 256, 64)),
    }
    rows[C.TPU_7X] = rows[C.TPU_7]
    if v not in rows:
        raise ValueError("Unsupported TPU chip version: %s" % (v,))
    (gen, sublanes, mxu, mxus, accs, vmem_mib, cmem, smem, hbm, bw, bf16, int8, fp8, int4,
     sc) = rows[v]
    # JAX divides only the dual-core chips' totals (its v4i and v5e/v6e rows
    # are written undivided, which is the same: one core); v4's CMEM too
    return TpuInfo(
        chip_version=v, generation=gen, num_cores=num_cores, num_lanes=128,
        num_sublanes=sublanes, mxu_column_size=mxu, num_mxus=mxus, num_accumulators=accs,
        vmem_capacity_bytes=vmem_mib * _MIB,
        cmem_capacity_bytes=cmem // per if v is C.TPU_V4 else cmem,
        smem_capacity_bytes=smem, hbm_capacity_bytes=int(hbm // per),
        mem_bw_bytes_per_second=int(bw // per), bf16_ops_per_second=int(bf16 // per),
        int8_ops_per_second=int(int8 // per), fp8_ops_per_second=int(fp8 // per),
        int4_ops_per_second=int(int4 // per), sparse_core=sc)


def get_tpu_info_for_chip(chip_version, num_tensor_cores_per_logical_device):
    """The TpuInfo of @chip_version with that many cores per logical device:
    1, or 2 on the chips that support megacore (v4, v5p)."""
    chip_version = ChipVersion(chip_version)
    if not chip_version.supports_megacore and num_tensor_cores_per_logical_device != 1:
        raise ValueError(
            "Lite chips, single core chips, and dual-core chips that do not support"
            " Megacore must have num_tensor_cores_per_logical_device=1, but got"
            " %s." % (num_tensor_cores_per_logical_device,))
    return _chip_info(chip_version, num_tensor_cores_per_logical_device)
