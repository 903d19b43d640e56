# SPDX-License-Identifier: MIT AND Apache-2.0
# Transcribes code from JAX (https://github.com/jax-ml/jax), Copyright
# The JAX Authors, under the Apache License 2.0 (LICENSES/Apache-2.0);
# changed as the docstring or the comments below say.
"""jax/experimental/pallas/ops/tpu/megablox/ops.py: gmm, gmm.py's forward
under jax.custom_vjp, its backward (_gmm_bwd) a gmm and a tgmm, as JAX's."""
import tpuemu as jax
import tpuemu.numpy as jnp

from . import gmm as backend
from .gmm import tgmm  # noqa: F401  (megablox exports it from here)

gmm = jax.custom_vjp(backend.gmm, nondiff_argnums=(3, 4, 7, 8))


def _gmm_fwd(lhs, rhs, group_sizes, preferred_element_type=jnp.float32, tiling=(128, 128, 128),
             group_offset=None, existing_out=None, transpose_rhs=False, interpret=False):
    out = backend.gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
                      existing_out, transpose_rhs=transpose_rhs, interpret=interpret)
    return out, (lhs, rhs, group_sizes, group_offset, rhs.shape[0])


def _gmm_bwd(preferred_element_type, tiling, transpose_rhs, interpret, residual, grad):
    """The backward pass associated with gmm."""
    del preferred_element_type
    lhs, rhs, group_sizes, group_offset, num_actual_groups = residual
    grad_lhs = backend.gmm(grad, rhs, group_sizes, lhs[0].dtype, tiling, group_offset,
                           transpose_rhs=not transpose_rhs, interpret=interpret)
    grad_rhs = backend.tgmm(lhs.swapaxes(0, 1), grad, group_sizes, rhs.dtype, tiling,
                            group_offset, num_actual_groups, interpret=interpret)
    grad_rhs = grad_rhs.swapaxes(1, 2) if transpose_rhs else grad_rhs
    return grad_lhs, grad_rhs, None, None, grad


gmm.defvjp(_gmm_fwd, _gmm_bwd)
