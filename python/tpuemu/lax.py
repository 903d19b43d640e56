# SPDX-License-Identifier: MIT
"""The jax.lax functions a kernel body uses (tpuemu.lax as lax; jax.lax)."""
import builtins

from . import numpy as jnp
from ._trace import Value, call, recorder, trace_error

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


def _static_bound(x, what, fn="lax.fori_loop"):
    """A loop bound as a Python int; a traced one cannot be unrolled."""
    if isinstance(x, Value):
        raise trace_error("%s: the %s bound (%s) is a traced value; the loop is "
                          "unrolled while tracing, so its bounds must be Python ints "
                          "(a grid dimension can loop on the device)" % (fn, what, x.render()))
    try:
        import operator
        return operator.index(x)
    except TypeError:
        raise trace_error("%s: the %s bound must be an int, not %r"
                          % (fn, what, x)) from None


def fori_loop(lower, upper, body_fun, init_val, *, unroll=None):
    """lax.fori_loop with static bounds: body_fun(i, val) traced once per
    i, i a Python int (so pl.ds(i * 8, 8) and ref.at[i] are constants)."""
    lo = _static_bound(lower, "lower")
    hi = _static_bound(upper, "upper")
    val = init_val
    for i in range(lo, hi):
        val = body_fun(i, val)
    return val


# lax's element-wise functions that mean what jnp's do on the device, under
# lax's names (lax.div and lax.rem truncate integers, lax.round rounds half
# away from zero: those differ, so they are not here)
exp, exp2, log, log1p, sqrt, rsqrt, tanh, abs, floor, ceil, sign, square, sin, cos = (  # noqa: A001
    jnp.exp, jnp.exp2, jnp.log, jnp.log1p, jnp.sqrt, jnp.rsqrt, jnp.tanh, jnp.abs, jnp.floor,
    jnp.ceil, jnp.sign, jnp.square, jnp.sin, jnp.cos)
neg, add, sub, mul, max, min, pow = (  # noqa: A001
    jnp.negative, jnp.add, jnp.subtract, jnp.multiply, jnp.maximum, jnp.minimum, jnp.power)
eq, ne, lt, le, gt, ge = (jnp.equal, jnp.not_equal, jnp.less, jnp.less_equal, jnp.greater,
                          jnp.greater_equal)
shift_left, shift_right_arithmetic = jnp.left_shift, jnp.right_shift
select = jnp.where


def erf(x):
    return call("lax.erf", x)


def logistic(x):
    return call("lax.logistic", x)


def shift_right_logical(x, y):
    return call("lax.shift_right_logical", x, y)


def clamp(lo, x, hi):
    return call("lax.clamp", lo, x, hi)


def _select_tree(conds, outs, what):
    """The branches' results (same structure) chosen by @conds, the first
    that holds, else the last branch's: jnp.where on each leaf."""
    last = outs[-1]
    if isinstance(last, (tuple, list)):
        if any(not isinstance(o, (tuple, list)) or len(o) != len(last) for o in outs):
            raise trace_error("%s: the branches return different structures" % what)
        return type(last)(_select_tree(conds, [o[k] for o in outs], what)
                          for k in range(len(last)))
    if any(o is None for o in outs):
        if all(o is None for o in outs):
            return None
        raise trace_error("%s: some branches return a value and some None" % what)
    acc = last
    for c, o in zip(conds[-2::-1], outs[-2::-1]):
        acc = jnp.where(c, o, acc)
    return acc


def _run_branches(conds, fns, operands, what):
    """Each branch traced once under pl.when(its condition): its stores and
    copies happen where it is chosen; the values it returns are computed
    at every step and chosen with jnp.where (they cannot fault)."""
    rec = recorder()
    outs = []
    for c, fn in zip(conds, fns):
        rec.conds.append(c.render())
        try:
            outs.append(fn(*operands))
        finally:
            rec.conds.pop()
    return _select_tree(conds, outs, what)


def cond(pred, true_fun, false_fun, *operands):
    """lax.cond. A Python predicate picks its branch while tracing; a traced
    one runs each branch under pl.when(pred) and pl.when(~pred), and the
    values they return are chosen with jnp.where(pred, ...)."""
    if not isinstance(pred, Value):
        return true_fun(*operands) if pred else false_fun(*operands)
    return _run_branches((pred, ~pred), (true_fun, false_fun), operands,
                         "lax.cond on %s" % pred.render())


def switch(index, branches, *operands):
    """lax.switch: branches[index], the index clamped into range as lax's
    is; a traced index runs branch k under pl.when(index == k)."""
    branches = list(branches)
    if not branches:
        raise trace_error("lax.switch: no branches")
    n = len(branches)
    if not isinstance(index, Value):
        return branches[builtins.min(builtins.max(int(index), 0), n - 1)](*operands)
    if n == 1:
        return branches[0](*operands)
    conds = [index <= 0] + [index == k for k in range(1, n - 1)] + [index >= n - 1]
    return _run_branches(conds, branches, operands, "lax.switch on %s" % index.render())


def stop_gradient(x):
    return x	# kernels are not differentiated here


def convert_element_type(x, new_dtype):
    return x.astype(new_dtype)


def integer_pow(x, y):
    """x ** y for a Python int y, by repeated squaring as XLA does."""
    y = int(y)
    if y == 0:
        return jnp.full_like(x, 1)
    if y < 0:
        return 1 / integer_pow(x, -y)
    acc, base = None, x
    while y:
        if y & 1:
            acc = base if acc is None else acc * base
        y >>= 1
        if y:
            base = base * base
    return acc


def while_loop(cond_fun, body_fun, init_val):
    """lax.while_loop whose condition is known while tracing (it reads only
    Python values): unrolled like fori_loop."""
    val = init_val
    for _ in range(1 << 16):
        c = cond_fun(val)
        if isinstance(c, Value):
            raise trace_error("lax.while_loop: the condition (%s) is a traced value; the "
                              "loop is unrolled while tracing, so it must depend on Python "
                              "values only (lax.fori_loop with static bounds, or a grid "
                              "dimension)" % c.render())
        if not c:
            return val
        val = body_fun(val)
    raise trace_error("lax.while_loop: still looping after 65536 iterations while tracing")


__all__ = ["dot_general", "broadcasted_iota", "fori_loop", "cond", "switch", "while_loop",
           "select", "stop_gradient", "convert_element_type", "integer_pow",
           "clamp", "exp", "exp2", "log", "log1p", "sqrt", "rsqrt", "tanh", "abs", "floor",
           "sin", "cos", "erf",
           "ceil", "sign", "square", "neg", "logistic", "add", "sub", "mul", "max", "min",
           "pow", "eq", "ne", "lt", "le", "gt", "ge", "shift_left", "shift_right_arithmetic",
           "shift_right_logical"]
