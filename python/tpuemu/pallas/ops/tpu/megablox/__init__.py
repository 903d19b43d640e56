# SPDX-License-Identifier: MIT AND Apache-2.0
# Transcribes code from JAX (https://github.com/jax-ml/jax), Copyright
# The JAX Authors, under the Apache License 2.0 (LICENSES/Apache-2.0);
# changed as the docstring or the comments below say.
"""jax/experimental/pallas/ops/tpu/megablox: gmm as its __init__.py
exports it (from ops.py: gmm.py's forward under its jax.custom_vjp), and
tgmm (gmm.py's) beside it."""
from . import common  # noqa: F401
from . import gmm as backend  # noqa: F401
from . import ops  # noqa: F401
from .ops import gmm, tgmm  # noqa: F401
