# SPDX-License-Identifier: MIT AND Apache-2.0
# Transcribes code from JAX (https://github.com/jax-ml/jax), Copyright
# The JAX Authors, under the Apache License 2.0 (LICENSES/Apache-2.0);
# changed as the docstring or the comments below say.
"""jax/experimental/pallas/ops/tpu/quantized_matmul, as its __init__.py
exports it: its kernel and util modules (tuned_block_sizes.py, a table
of TPU timings, is not ported)."""
from . import kernel  # noqa: F401
from . import util  # noqa: F401
