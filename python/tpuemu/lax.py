# SPDX-License-Identifier: MIT
"""The jax.lax functions a kernel body uses (tpuemu.lax as lax; jax.lax)."""
import builtins

from . import numpy as jnp
from . import _trace
from ._trace import Value, call, recorder, trace_error, dt_of, is_float_dt, local

# ((lhs contracting, rhs contracting), (lhs batch, rhs batch)) -> which
# operand the MXU reads transposed: the statement syntax's x.T on a dot operand.
_DOT_DIMS = {
    ((1,), (0,)): (False, False),
    ((1,), (1,)): (False, True),
    ((0,), (0,)): (True, False),
    ((0,), (1,)): (True, True),
}


def _batched(lhs, rhs, lc, rc, preferred_element_type):
    """dot_general with one leading batch dimension of 3-D values whose
    shapes tracing knows (whole ref reads): each batch's 2-D product (rows
    of the 2-D views: batch b is rows b*M to (b+1)*M), stacked."""
    ls, rs = getattr(lhs, "shape", None), getattr(rhs, "shape", None)
    lr, rr = getattr(lhs, "whole_of", None), getattr(rhs, "whole_of", None)
    if ls is None or rs is None or lr is None or rr is None or len(ls) != 3 or \
            len(rs) not in (2, 3):
        raise trace_error("lax.dot_general: batch dimensions ((0,), (0,)) take whole reads "
                          "of a 3-D ref and a 2-D or 3-D one (x_ref[...]), got shapes %s and "
                          "%s" % (ls, rs))
    if ls[0] != rs[0]:
        raise trace_error("lax.dot_general: batch sizes %d and %d differ" % (ls[0], rs[0]))
    outs = []
    for b in range(ls[0]):
        x = lr[b]
        if len(rs) == 2:	# (B, K) rhs: a vector per batch
            y = rr[b:b + 1]
            outs.append(dot_general(x, y, (((lc[0] - 1,), (1,)), ((), ())),
                                    preferred_element_type=preferred_element_type))
            continue
        y = rr[b]
        outs.append(dot_general(x, y, (((lc[0] - 1,), (rc[0] - 1,)), ((), ())),
                                preferred_element_type=preferred_element_type))
    if len(rs) == 2:	# (B, M) results: each batch's (M, 1) column as a row
        return jnp.concatenate([jnp.reshape(o, (1, -1)) for o in outs], axis=0)
    return jnp.concatenate(outs, axis=0)


def dot_general(lhs, rhs, dimension_numbers, precision=None, preferred_element_type=None):
    """lax.dot_general of two 2-D blocks: the contraction dimensions pick
    a plain, transposed-lhs or transposed-rhs dot; a 1-D rhs (a whole ref
    read) is a matrix-vector product; batch dimensions ((0,), (0,)) of 3-D
    operands whose shapes tracing knows loop over the batch."""
    try:
        (lc, rc), (lb, rb) = dimension_numbers
        key = (tuple(lc), tuple(rc))
    except (TypeError, ValueError):
        raise trace_error("lax.dot_general: dimension_numbers must be "
                          "((lhs_contract, rhs_contract), (lhs_batch, rhs_batch)), got %r"
                          % (dimension_numbers,)) from None
    if tuple(lb) == (0,) and tuple(rb) == (0,) and len(lc) == 1 and len(rc) == 1:
        return _batched(lhs, rhs, tuple(lc), tuple(rc), preferred_element_type)
    if tuple(lb) or tuple(rb):
        raise trace_error("lax.dot_general: batch dimensions %r are not supported (only "
                          "((0,), (0,)), a leading batch of 3-D operands)" % ((lb, rb),))
    ls, rs = getattr(lhs, "shape", None), getattr(rhs, "shape", None)
    if ls is not None and len(ls) > 2 and key[0] == (len(ls) - 1,) and \
            rs is not None and len(rs) == 2:
        key = ((1,), key[1])	# leading dimensions of lhs merge into its 2-D view's rows
    if rs is not None and len(rs) == 1 and key in (((1,), (0,)), ((0,), (0,))):
        a = lhs.T if key[0] == (0,) else lhs
        return jnp.dot(a, rhs, preferred_element_type)
    if key not in _DOT_DIMS:
        raise trace_error("lax.dot_general: contraction dimensions %r: a 2-D block "
                          "contracts one dimension of each, 0 or 1" % (key,))
    lt, rt = _DOT_DIMS[key]
    a = lhs.T if lt else lhs
    b = rhs.T if rt else rhs
    if preferred_element_type is None:
        return call("jnp.dot", a, b)
    return call("jnp.dot", a, b, preferred_element_type=preferred_element_type)


class GatherScatterMode:
    """lax.GatherScatterMode's names, for jnp.take_along_axis(mode=)."""

    class _Mode:
        def __init__(self, name):
            self.name = name

        def __repr__(self):
            return "GatherScatterMode." + self.name

    CLIP = _Mode("CLIP")
    FILL_OR_DROP = _Mode("FILL_OR_DROP")
    PROMISE_IN_BOUNDS = _Mode("PROMISE_IN_BOUNDS")
    ONE_HOT = _Mode("ONE_HOT")


def broadcasted_iota(dtype, shape, dimension):
    shape = tuple(int(d) for d in shape)
    if len(shape) == 1:	# a 1-D array is viewed as a row: its index is the column
        row = call("lax.broadcasted_iota", dtype, (1, shape[0]), 1)
        return jnp.reshape(row, shape)
    return call("lax.broadcasted_iota", dtype, shape, int(dimension))


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


# The most trips a lax.fori_loop with a traced bound unrolls to (each
# trip predicated); a loop that would run more fails its job.
TRACED_LOOP_MAX_TRIPS = 16


def _loop_guard(trips, limit, what):
    """Fail the job, by a wait nothing can satisfy on a semaphore named for
    the reason, where the loop would run more than @limit trips."""
    from .pallas import run_scoped, when, tpu as pltpu

    def guard(fori_loop_over_unroll_limit):
        @when(trips > limit)
        def _():
            pltpu.semaphore_wait(fori_loop_over_unroll_limit, 1)
    run_scoped(guard, pltpu.SemaphoreType.REGULAR)


def fori_loop(lower, upper, body_fun, init_val, *, unroll=None):
    """lax.fori_loop. Static bounds: body_fun(i, val) traced once per i, i
    a Python int (so pl.ds(i * 8, 8) and ref.at[i] are constants). A traced
    bound (an SMEM element, pl.program_id): the body has no loop on the
    device, so it is unrolled to TRACED_LOOP_MAX_TRIPS trips, trip k under
    pl.when(lower + k < upper) and its carry chosen by jnp.where; i is
    lower + k (a Python int when lower is one). A job whose loop would
    take more trips fails, naming the limit, instead of stopping early."""
    if not isinstance(lower, Value) and not isinstance(upper, Value):
        lo = _static_bound(lower, "lower")
        hi = _static_bound(upper, "upper")
        val = init_val
        for i in range(lo, hi):
            val = body_fun(i, val)
        return val
    for b, what in ((lower, "lower"), (upper, "upper")):
        if not isinstance(b, Value):
            _static_bound(b, what)
        elif not b.scalar:
            raise trace_error("lax.fori_loop: the %s bound (%s) is an array; a "
                              "traced bound is a scalar (an SMEM element, "
                              "pl.program_id)" % (what, b.render()))
    limit = TRACED_LOOP_MAX_TRIPS
    _loop_guard(upper - lower, limit, "lax.fori_loop")
    rec = recorder()
    val = init_val
    for k in range(limit):
        i = lower + k
        live = i < upper
        rec.conds.append(live.render())
        try:
            new = body_fun(i, val)
        finally:
            rec.conds.pop()
        val = _select_tree((live, ~live), (new, val), "lax.fori_loop's carry")
        _bind_leaves(rec, val)	# one trip's carry a local, not a growing tree
    return val


def _bind_leaves(rec, val):
    if isinstance(val, (tuple, list)):
        for v in val:
            _bind_leaves(rec, v)
    elif isinstance(val, Value) and val.kind not in ("local", "text"):
        rec.bind(val)


# lax's element-wise functions that mean what jnp's do on the device, under
# lax's names (lax.round rounds half away from zero: it differs, so it is
# not here; lax.div and lax.rem, which truncate, are below)
exp, exp2, log, log1p, sqrt, rsqrt, tanh, abs, floor, ceil, sign, square, sin, cos = (  # noqa: A001
    jnp.exp, jnp.exp2, jnp.log, jnp.log1p, jnp.sqrt, jnp.rsqrt, jnp.tanh, jnp.abs, jnp.floor,
    jnp.ceil, jnp.sign, jnp.square, jnp.sin, jnp.cos)
neg, add, sub, mul, max, min, pow = (  # noqa: A001
    jnp.negative, jnp.add, jnp.subtract, jnp.multiply, jnp.maximum, jnp.minimum, jnp.power)
eq, ne, lt, le, gt, ge = (jnp.equal, jnp.not_equal, jnp.less, jnp.less_equal, jnp.greater,
                          jnp.greater_equal)
shift_left = jnp.left_shift
bitwise_and, bitwise_or, bitwise_xor, bitwise_not = (
    jnp.bitwise_and, jnp.bitwise_or, jnp.bitwise_xor, jnp.invert)
select = jnp.where


def select_n(which, *cases):
    """lax.select_n: cases[which] element-wise; a bool `which` picks
    cases[1] where it holds (two cases), an int32 one the case it names.
    A Python `which` picks the case while tracing."""
    if not cases:
        raise trace_error("lax.select_n needs at least one case")
    if not isinstance(which, Value):
        import numpy as _np
        w = _np.asarray(which)
        if w.shape:
            raise trace_error("lax.select_n of a host array predicate: pass it to the "
                              "kernel as an operand")
        return cases[int(w)]
    if len(cases) == 1:
        return cases[0]
    if len(cases) == 2 and (dt_of(which) is None or dt_of(which) == _trace.bool_):
        return jnp.where(which, cases[1], cases[0])
    which = local(which)
    out = cases[-1]
    for k in range(len(cases) - 2, -1, -1):
        out = jnp.where(which == k, cases[k], out)
    return out


def is_finite(x):
    """lax.is_finite: x - x is 0 but for infinities and NaN."""
    x = local(x)
    return (x - x) == 0.0


def erf(x):
    return call("lax.erf", x)


def population_count(x):
    """The one bits of each integer, in its own width (int8 -1 has 8)."""
    return call("lax.population_count", x)


def clz(x):
    """The leading zero bits of each integer, in its own width."""
    return call("lax.clz", x)


def _int_or_float(fn, x, y):
    """Whether lax.div/rem's operands are floats: from the traced dtypes
    (ref reads, casts and arithmetic on them carry theirs)."""
    from ._trace import _promote
    d = _promote(dt_of(x), dt_of(y))
    if d is None:
        raise trace_error("lax.%s: the operands' dtype is not known while tracing "
                          "(%s, %s); give it with .astype(...)" % (fn, x, y))
    return is_float_dt(d)


def div(x, y):
    """lax.div: x / y, integers rounded toward zero (C's, not Python's
    //): the floor quotient plus one where a remainder and the signs differ."""
    if not isinstance(x, Value) and not isinstance(y, Value):
        return x / y if isinstance(x, float) or isinstance(y, float) else \
            int(x / y) if y else x // y
    if _int_or_float("div", x, y):
        return x / y
    x, y = local(x), local(y)
    q, r = local(x // y), x % y
    return jnp.where((r != 0) & ((x < 0) != (y < 0)), q + 1, q)


def rem(x, y):
    """lax.rem: x - lax.div(x, y) * y, the sign of x (C's fmod, not
    Python's %): exact for floats as |x| % |y| with x's sign."""
    if not isinstance(x, Value) and not isinstance(y, Value):
        import math
        return math.fmod(x, y) if isinstance(x, float) or isinstance(y, float) else \
            int(math.fmod(x, y))
    x, y = local(x), local(y)
    if _int_or_float("rem", x, y):
        m = local(jnp.abs(x) % (jnp.abs(y) if isinstance(y, Value) else abs(y)))
        return jnp.where(x < 0, -m, m)
    r = local(x % y)		# the sign of y: shift it to x's
    return jnp.where((r != 0) & ((r < 0) != (x < 0)), r - y, r)


# XLA's ErfInv32 (Giles, "Approximating the erfinv function"): w < 5 and
# w >= 5 polynomials, evaluated as XLA does (the coefficients selected)
_ERFINV_LT5 = (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06,
               0.00021858087, -0.00125372503, -0.00417768164, 0.246640727, 1.50140941)
_ERFINV_GE5 = (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844,
               0.00573950773, -0.0076224613, 0.00943887047, 1.00167406, 2.83297682)


def erf_inv(x):
    """lax.erf_inv as XLA computes it in float32: w = -log1p(-x^2), a
    degree-8 polynomial in w - 2.5 (w < 5) or sqrt(w) - 3, times x;
    +-inf at +-1, NaN outside [-1, 1]."""
    if not isinstance(x, Value):
        raise trace_error("lax.erf_inv of a Python number: compute it outside the kernel")
    x = local(x.astype(jnp.float32) if x.dt is not None and not is_float_dt(x.dt) else x)
    w = local(-jnp.log1p(-(x * x)))
    lt = local(w < 5.0)
    w = local(jnp.where(lt, w - 2.5, jnp.sqrt(w) - 3.0))
    p = jnp.where(lt, _ERFINV_LT5[0], _ERFINV_GE5[0])
    for a, b in zip(_ERFINV_LT5[1:], _ERFINV_GE5[1:]):
        p = local(jnp.where(lt, a, b) + p * w)
    return jnp.where(jnp.abs(x) == 1.0, x * float("inf"), p * x)


def logistic(x):
    return call("lax.logistic", x)


def shift_right_logical(x, y):
    return call("lax.shift_right_logical", x, y)


def shift_right_arithmetic(x, y):
    """lax.shift_right_arithmetic: the sign bit copied in, of a uint32's top
    bit too (as XLA's; jnp.right_shift and >> of unsigned types are logical)."""
    return call("lax.shift_right_arithmetic", x, y)


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


def bitcast_convert_type(operand, new_dtype):
    """lax.bitcast_convert_type of one width: pltpu.bitcast."""
    return _trace.bitcast_value(operand, new_dtype, "lax.bitcast_convert_type")


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



def axis_index(axis_name):
    """lax.axis_index inside pl.kernel: which TensorCore of the mesh runs."""
    from .pallas.kernel import axis_index as mesh_index
    return mesh_index(axis_name)


def axis_size(axis_name):
    """lax.axis_size inside pl.kernel: the mesh axis's TensorCores."""
    from .pallas.kernel import axis_size as mesh_size
    return mesh_size(axis_name)


__all__ = ["dot_general", "broadcasted_iota", "axis_index", "axis_size", "fori_loop", "cond", "switch", "while_loop",
           "select", "stop_gradient", "convert_element_type", "integer_pow",
           "clamp", "exp", "exp2", "log", "log1p", "sqrt", "rsqrt", "tanh", "abs", "floor",
           "sin", "cos", "erf", "erf_inv", "population_count", "clz", "div", "rem",
           "ceil", "sign", "square", "neg", "logistic", "add", "sub", "mul", "max", "min",
           "pow", "eq", "ne", "lt", "le", "gt", "ge", "shift_left", "shift_right_arithmetic",
           "shift_right_logical", "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not",
           "select_n", "is_finite"]
