# SPDX-License-Identifier: MIT AND Apache-2.0
# Transcribes code from JAX (https://github.com/jax-ml/jax), Copyright
# The JAX Authors, under the Apache License 2.0 (LICENSES/Apache-2.0);
# changed as the docstring or the comments below say.
"""jax/experimental/pallas/ops/tpu/megablox/ops.py without its
jax.custom_vjp (tpuemu has none): gmm is gmm.py's forward, and gmm_vjp
is _gmm_bwd written out, the gradients of gmm's lhs and rhs under a
cotangent, which a caller runs as JAX's VJP would."""
from .gmm import gmm, tgmm


def gmm_vjp(lhs, rhs, group_sizes, cotangent, preferred_element_type, transpose_rhs):
    """ops.py's _gmm_bwd: the gradients of gmm's lhs and rhs."""
    grad_lhs = gmm(cotangent, rhs, group_sizes, lhs[0].dtype, transpose_rhs=not transpose_rhs)
    grad_rhs = tgmm(lhs.swapaxes(0, 1), cotangent, group_sizes, rhs.dtype,
                    num_actual_groups=rhs.shape[0])
    return grad_lhs, grad_rhs.swapaxes(1, 2) if transpose_rhs else grad_rhs
