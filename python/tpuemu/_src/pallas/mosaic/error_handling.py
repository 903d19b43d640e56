# SPDX-License-Identifier: MIT
"""jax._src.pallas.mosaic.error_handling: tpuemu.pallas.mosaic.error_handling
(it says what MosaicError and VerificationError are here)."""
from ....pallas.mosaic.error_handling import (  # noqa: F401
    MosaicError, RawFrame, VerificationError, parse_location_string,
    traceback_from_raw_frames)

__all__ = ["MosaicError", "VerificationError", "RawFrame", "parse_location_string",
           "traceback_from_raw_frames"]
