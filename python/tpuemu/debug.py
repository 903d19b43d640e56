# SPDX-License-Identifier: MIT
"""jax.debug.print: in a kernel body pl.debug_print (printed from the
device, once per grid step it runs); on the host, Python's print of the
str.format of the values."""
import builtins


def print(fmt, *args, ordered=False, **kwargs):	# noqa: A001  (jax.debug.print)
    del ordered		# one device, statements in program order
    from . import _trace
    if _trace._rec is not None:
        if kwargs:
            raise _trace.trace_error("jax.debug.print in a kernel body: positional {} "
                                     "arguments only (pl.debug_print's), not %s"
                                     % sorted(kwargs))
        from .pallas import debug_print
        return debug_print(fmt, *args)
    builtins.print(fmt.format(*args, **kwargs))
