# SPDX-License-Identifier: MIT
"""The jax.lax functions a kernel body uses (tpuemu.lax as lax; jax.lax)."""
from ._trace import Value, call, trace_error

# ((lhs contracting, rhs contracting), (lhs batch, rhs batch)) -> which
# operand the MXU reads transposed: the statement syntax's x.T on a dot operand.
_DOT_DIMS = {
    ((1,), (0,)): (False, False),
    ((1,), (1,)): (False, True),
    ((0,), (0,)): (True, False),
    ((0,), (1,)): (True, True),
}


def dot_general(lhs, rhs, dimension_numbers, precision=None, preferred_element_type=None):
    """lax.dot_general of two 2-D blocks: the contraction dimensions pick
    a plain, transposed-lhs or transposed-rhs dot; no batch dimensions."""
    try:
        (lc, rc), (lb, rb) = dimension_numbers
        key = (tuple(lc), tuple(rc))
    except (TypeError, ValueError):
        raise trace_error("lax.dot_general: dimension_numbers must be "
                          "((lhs_contract, rhs_contract), (lhs_batch, rhs_batch)), got %r"
                          % (dimension_numbers,)) from None
    if tuple(lb) or tuple(rb):
        raise trace_error("lax.dot_general: batch dimensions %r are not supported "
                          "(a block is 2-D: loop over the batch in the grid)" % ((lb, rb),))
    if key not in _DOT_DIMS:
        raise trace_error("lax.dot_general: contraction dimensions %r: a 2-D block "
                          "contracts one dimension of each, 0 or 1" % (key,))
    lt, rt = _DOT_DIMS[key]
    a = lhs.T if lt else lhs
    b = rhs.T if rt else rhs
    if preferred_element_type is None:
        return call("jnp.dot", a, b)
    return call("jnp.dot", a, b, preferred_element_type=preferred_element_type)


def broadcasted_iota(dtype, shape, dimension):
    return call("lax.broadcasted_iota", dtype, tuple(int(d) for d in shape), int(dimension))


def _static_bound(x, what):
    """A fori_loop bound as a Python int; a traced one cannot be unrolled."""
    if isinstance(x, Value):
        raise trace_error("lax.fori_loop: the %s bound (%s) is a traced value; the loop is "
                          "unrolled while tracing, so its bounds must be Python ints "
                          "(a grid dimension can loop on the device)" % (what, x.render()))
    try:
        import operator
        return operator.index(x)
    except TypeError:
        raise trace_error("lax.fori_loop: the %s bound must be an int, not %r"
                          % (what, x)) from None


def fori_loop(lower, upper, body_fun, init_val, *, unroll=None):
    """lax.fori_loop with static bounds: body_fun(i, val) traced once per
    i, i a Python int (so pl.ds(i * 8, 8) and ref.at[i] are constants)."""
    lo = _static_bound(lower, "lower")
    hi = _static_bound(upper, "upper")
    val = init_val
    for i in range(lo, hi):
        val = body_fun(i, val)
    return val


__all__ = ["dot_general", "broadcasted_iota", "fori_loop"]
