# SPDX-License-Identifier: MIT
"""pl.CostEstimate as pallas_call's cost_estimate=, and pl.estimate_cost
beyond JAX's own test (test_jax_ports15.py): the jnp functions JAX builds
of several primitives, what a shape-only array refuses, and what has no
rule here. Expected counts are JAX's rules applied by hand to the
primitives JAX's jnp binds (named in each test)."""
import numpy as np
import pytest

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import lax
from tpuemu import pallas as pl
from tpuemu.pallas import tpu as pltpu


def _copy(cost_estimate):
    def k(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2.0
    x = np.arange(8 * 128, dtype=np.float32).reshape(8, 128)
    out = pl.pallas_call(k, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                         cost_estimate=cost_estimate)(x)
    np.testing.assert_array_equal(out, x * 2.0)


def test_pallas_call_takes_a_cost_estimate():
    _copy(pl.CostEstimate(flops=8 * 128, transcendentals=0, bytes_accessed=2 * 4 * 8 * 128))


def test_pallas_call_takes_estimate_costs_result():
    def body(x):
        return x * 2.0
    ce = pl.estimate_cost(body, jax.ShapeDtypeStruct((8, 128), jnp.float32))
    assert ce == pl.CostEstimate(flops=1024, transcendentals=0, bytes_accessed=8192)
    _copy(ce)


def test_pallas_call_refuses_other_cost_estimates():
    with pytest.raises(TypeError, match="cost_estimate must be a pl.CostEstimate"):
        _copy({"flops": 1, "transcendentals": 0, "bytes_accessed": 0})


def test_kernel_and_core_map_check_cost_estimate():
    mesh = pltpu.create_tensorcore_mesh("core")
    with pytest.raises(TypeError, match="pl.kernel: cost_estimate"):
        pl.kernel(lambda x_ref, o_ref: None, out_type=jax.ShapeDtypeStruct((8, 128), jnp.float32),
                  mesh=mesh, cost_estimate=(1, 0, 0))
    with pytest.raises(TypeError, match="pl.core_map: cost_estimate"):
        pl.core_map(mesh, cost_estimate=(1, 0, 0))


def test_cost_estimate_fields_are_ints():
    ce = pl.CostEstimate(flops=1, transcendentals=2, bytes_accessed=3)
    assert (ce.flops, ce.transcendentals, ce.bytes_accessed, ce.remote_bytes_transferred) == \
        (1, 2, 3, 0)
    for bad in ({"flops": 1.0}, {"transcendentals": "2"}, {"bytes_accessed": None},
                {"remote_bytes_transferred": np.float32(4)}):
        kw = dict(flops=1, transcendentals=2, bytes_accessed=3)
        kw.update(bad)
        with pytest.raises(ValueError, match="must be ints"):
            pl.CostEstimate(**kw)
    with pytest.raises(Exception):	# frozen, as JAX's dataclass
        ce.flops = 5


def test_results_are_python_ints():
    ce = pl.estimate_cost(lambda x: jnp.tanh(x) * 3, jax.ShapeDtypeStruct((4, 8), jnp.bfloat16))
    assert all(type(v) is int for v in (ce.flops, ce.transcendentals, ce.bytes_accessed))
    assert (ce.flops, ce.transcendentals, ce.bytes_accessed) == (32, 32, 2 * 64)


def test_composites_count_each_primitive():
    s = jax.ShapeDtypeStruct((4, 8), jnp.float32)
    # jnp.mean: reduce_sum (no rule), then div of the 8 results
    assert pl.estimate_cost(lambda x: jnp.mean(x, axis=0), s).flops == 8
    # jnp.clip: max with the low bound, min with the high: 2 per element
    assert pl.estimate_cost(lambda x: jnp.clip(x, 0.0, 1.0), s).flops == 64
    # jnp.max(initial=): reduce_max, then max of the 4 results with it
    assert pl.estimate_cost(lambda x: jnp.max(x, axis=1, initial=0.0), s).flops == 4
    # comparisons, selects, abs, reshapes, transposes, casts: no rule
    ce = pl.estimate_cost(lambda x: jnp.where(x > 0, jnp.abs(x), x.T.reshape(4, 8))
                          .astype(jnp.int32), s)
    assert (ce.flops, ce.transcendentals) == (0, 0)
    # x ** 3 is integer_pow: floor(log2 3) + popcount(3) = 3 per element
    assert pl.estimate_cost(lambda x: x ** 3, s).flops == 3 * 32


def test_dot_general_batch_dims():
    # JAX's rule: 2*K, times lhs's other dimensions, times rhs's free ones
    ce = pl.estimate_cost(
        lambda a, b: lax.dot_general(a, b, (((2,), (1,)), ((0,), (0,)))),
        jax.ShapeDtypeStruct((3, 4, 5), jnp.bfloat16),
        jax.ShapeDtypeStruct((3, 5, 6), jnp.bfloat16))
    assert ce.flops == 2 * 5 * 3 * 4 * 6
    assert ce.bytes_accessed == 2 * (60 + 90 + 72)


def test_pytrees_and_kwargs():
    def f(xs, scale):
        a, b = xs["a"], xs["b"]
        return {"sum": a + b * scale, "exp": jnp.exp(a)}
    s = jax.ShapeDtypeStruct((16,), jnp.float32)
    ce = pl.estimate_cost(f, {"a": s, "b": s}, scale=2.0)
    assert (ce.flops, ce.transcendentals, ce.bytes_accessed) == (32, 16, 4 * 64)


def test_jit_inside_counts_its_body():
    ce = pl.estimate_cost(jax.jit(lambda x: jnp.exp(x) + 1.0),
                          jax.ShapeDtypeStruct((8,), jnp.float32))
    assert (ce.flops, ce.transcendentals) == (8, 8)


def test_values_are_refused():
    def needs_value(x):
        if x[0] > 0:
            return x
        return -x
    with pytest.raises(TypeError, match="has no values"):
        pl.estimate_cost(needs_value, jax.ShapeDtypeStruct((8,), jnp.float32))
    with pytest.raises(TypeError, match="has no values"):
        pl.estimate_cost(lambda x: np.asarray(x), jax.ShapeDtypeStruct((8,), jnp.float32))


def test_kernel_statements_on_the_host():
    # jax.nn.sigmoid and lax.logistic are JAX's logistic, jnp.rsqrt rsqrt (no rule)
    s = jax.ShapeDtypeStruct((8,), jnp.float32)
    assert pl.estimate_cost(jax.nn.sigmoid, s).transcendentals == 8
    assert pl.estimate_cost(lax.logistic, s).transcendentals == 8
    assert (pl.estimate_cost(jnp.rsqrt, s).flops, pl.estimate_cost(jnp.rsqrt, s).transcendentals) \
        == (0, 0)


def test_no_rule_here_is_named():
    with pytest.raises(NotImplementedError, match="einsum"):
        pl.estimate_cost(lambda a: jnp.einsum("ij,jk->ik", a, a),
                         jax.ShapeDtypeStruct((8, 8), jnp.float32))
    with pytest.raises(NotImplementedError, match="jax.nn.relu"):
        pl.estimate_cost(jax.nn.relu, jax.ShapeDtypeStruct((8,), jnp.float32))


def test_a_leaked_array_is_refused():
    kept = []
    pl.estimate_cost(lambda x: kept.append(x) or x, jax.ShapeDtypeStruct((8,), jnp.float32))
    with pytest.raises(RuntimeError, match="after the call"):
        kept[0] + 1.0


def test_host_softmax_unchanged():
    x = np.random.default_rng(0).standard_normal((4, 16)).astype(np.float32)
    e = np.exp(x - x.max(-1, keepdims=True))
    np.testing.assert_allclose(jax.nn.softmax(x, axis=-1), e / e.sum(-1, keepdims=True),
                               rtol=1e-6)
