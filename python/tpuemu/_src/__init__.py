# SPDX-License-Identifier: MIT
"""jax._src as JAX's own tests import from it: only the modules a ported
test needs, each one re-exporting tpuemu's public names (tpuemu has no
jaxpr internals to mirror). Code written for tpuemu imports from
tpuemu.pallas (pl.estimate_cost, pl.run_state) instead."""
