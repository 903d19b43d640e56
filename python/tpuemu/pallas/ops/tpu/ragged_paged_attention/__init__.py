# SPDX-License-Identifier: MIT AND Apache-2.0
# Transcribes code from JAX (https://github.com/jax-ml/jax), Copyright
# The JAX Authors, under the Apache License 2.0 (LICENSES/Apache-2.0);
# changed as the docstring or the comments below say.
"""jax/experimental/pallas/ops/tpu/ragged_paged_attention, as its
__init__.py exports it: kernel.py's ragged_paged_attention, its
reference ref_ragged_paged_attention, the input checks and cdiv, and
tuned_block_sizes.py's get_tuned_block_sizes."""
from . import kernel
from . import tuned_block_sizes

cdiv = kernel.cdiv
dynamic_validate_inputs = kernel.dynamic_validate_inputs
ragged_paged_attention = kernel.ragged_paged_attention
ref_ragged_paged_attention = kernel.ref_ragged_paged_attention
static_validate_inputs = kernel.static_validate_inputs
get_tuned_block_sizes = tuned_block_sizes.get_tuned_block_sizes
