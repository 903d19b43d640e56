# SPDX-License-Identifier: MIT AND Apache-2.0
# Transcribes code from JAX (https://github.com/jax-ml/jax), Copyright
# The JAX Authors, under the Apache License 2.0 (LICENSES/Apache-2.0);
# changed as the docstring or the comments below say.
"""jax/experimental/pallas/ops/tpu/splash_attention, as its __init__.py
exports it, but for make_masked_mha_reference and
make_masked_mqa_reference (the jnp references are not ported)."""
from .splash_attention_kernel import BlockSizes  # noqa: F401
from .splash_attention_kernel import make_splash_mha  # noqa: F401
from .splash_attention_kernel import make_splash_mha_single_device  # noqa: F401
from .splash_attention_kernel import make_splash_mqa  # noqa: F401
from .splash_attention_kernel import make_splash_mqa_single_device  # noqa: F401
from .splash_attention_kernel import QKVLayout  # noqa: F401
from .splash_attention_kernel import SegmentIds  # noqa: F401
from .splash_attention_mask import CausalMask  # noqa: F401
from .splash_attention_mask import FullMask  # noqa: F401
from .splash_attention_mask import LocalMask  # noqa: F401
from .splash_attention_mask import make_causal_mask  # noqa: F401
from .splash_attention_mask import make_local_attention_mask  # noqa: F401
from .splash_attention_mask import make_random_mask  # noqa: F401
from .splash_attention_mask import Mask  # noqa: F401
from .splash_attention_mask import MultiHeadMask  # noqa: F401
from .splash_attention_mask import NumpyMask  # noqa: F401
