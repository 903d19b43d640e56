# SPDX-License-Identifier: MIT
"""jax._src.pallas.cost_estimate: pl.estimate_cost and pl.CostEstimate
(tpuemu.pallas._cost_estimate says how they count without a jaxpr)."""
from ...pallas._cost_estimate import CostEstimate, estimate_cost

__all__ = ["CostEstimate", "estimate_cost"]
