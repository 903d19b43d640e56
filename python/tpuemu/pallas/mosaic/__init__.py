# SPDX-License-Identifier: MIT
"""jax._src.pallas.mosaic's error_handling, where tpuemu has one: the
device compiler here is libtpurt, whose refusals of a kernel's statements
pallas_call raises as error_handling.MosaicError."""
