# SPDX-License-Identifier: MIT AND Apache-2.0
# Transcribes code from JAX (https://github.com/jax-ml/jax), Copyright
# The JAX Authors, under the Apache License 2.0 (LICENSES/Apache-2.0);
# changed as the docstring or the comments below say.
"""jax/experimental/pallas/ops/tpu/paged_attention, as its __init__.py
exports it: paged_attention (paged_attention_kernel.py) and
attention.py's grouped_query_attention; util.py's
grouped_query_attention_reference and quantization_utils.py are here as
modules."""
from . import attention  # noqa: F401
from . import paged_attention_kernel
from . import quantization_utils  # noqa: F401
from . import util  # noqa: F401

paged_attention = paged_attention_kernel.paged_attention
grouped_query_attention = attention.grouped_query_attention
