# SPDX-License-Identifier: MIT
"""Output blocks revisited after other blocks:
pl.Buffered(1, revisit=pl.RevisitMode.ANY) reads each new visit's block
back from HBM, so accumulating into o_ref works across non-consecutive
visits (JAX's TPUPipelineModeRevisitTest, ported in test_jax_ports5.py).
Here: bf16, an aliased output, a 3-D grid, two cores splitting a parallel
dimension, the device's debug mode, the traffic counted, and each misuse
refused with its message."""
import os
import subprocess
import sys

import numpy as np
import pytest

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import pallas as pl
from tpuemu.pallas import tpu as pltpu
from tpuemu._lib import TpurtError

ANY = pl.Buffered(1, revisit=pl.RevisitMode.ANY)


def _ints(shape, seed):
    """Small integers as float32: every sum exact, in any order."""
    return np.random.default_rng(seed).integers(-8, 9, shape).astype(np.float32)


def _accumulate(x_ref, o_ref):
    @pl.when(pl.program_id(0) == 0)
    def _():
        o_ref[...] = jnp.zeros_like(o_ref)

    o_ref[...] += x_ref[...]


def _reduce(x, mode=ANY, debug=False, dtype=jnp.float32, sem=None):
    """o (8, 384) = sum over i of x's (8, 384) row blocks: grid (3, 3), o's
    block (0, j) revisited at every i after the other two."""
    out_specs = pl.BlockSpec((8, 128), lambda i, j: (0, j), pipeline_mode=mode)
    params = pltpu.CompilerParams(dimension_semantics=sem) if sem else None
    return pl.pallas_call(_accumulate, out_shape=jax.ShapeDtypeStruct((8, 384), dtype),
                          in_specs=[pl.BlockSpec((8, 128), lambda i, j: (i, j))],
                          out_specs=out_specs, grid=(3, 3), debug=debug,
                          compiler_params=params)(x)


def test_each_visit_reads_the_block_back_and_the_traffic_counts():
    x = _ints((24, 384), 1)
    np.testing.assert_array_equal(_reduce(x), x.reshape(3, 8, 384).sum(axis=0))
    st = jax.last_stats()
    # 9 input blocks and 9 read-backs of (8, 128) float32, 9 write-backs
    assert st["blocks_fetched"] == 18 and st["blocks_written"] == 9
    assert st["hbm_bytes_in"] == 18 * 8 * 128 * 4
    any_dma = st["model_dma_busy_ps"]
    _reduce(x, mode=pl.Buffered(1, revisit=pl.RevisitMode.IMMEDIATE))
    assert jax.last_stats()["blocks_fetched"] == 9
    assert jax.last_stats()["model_dma_busy_ps"] < any_dma


def test_immediate_mode_keeps_only_the_last_visit():
    x = _ints((24, 384), 2)
    z = _reduce(x, mode=pl.Buffered(1, revisit=pl.RevisitMode.IMMEDIATE))
    assert not np.array_equal(z, x.reshape(3, 8, 384).sum(axis=0))


def test_bf16_accumulation():
    x = jax.to_bf16(_ints((24, 384), 3))
    z = _reduce(x, dtype=jnp.bfloat16)
    want = jax.from_bf16(x).reshape(3, 8, 384).sum(axis=0)
    np.testing.assert_array_equal(jax.from_bf16(z), want)


def test_an_aliased_output_starts_from_the_input():
    """No zeroing: the first visit reads the aliased input's data."""
    def k(x_ref, init_ref, o_ref):
        o_ref[...] += x_ref[...]

    x, init = _ints((24, 384), 4), _ints((8, 384), 5)
    z = pl.pallas_call(k, out_shape=jax.ShapeDtypeStruct((8, 384), jnp.float32),
                       in_specs=[pl.BlockSpec((8, 128), lambda i, j: (i, j)),
                                 pl.BlockSpec((8, 128), lambda i, j: (0, j))],
                       out_specs=pl.BlockSpec((8, 128), lambda i, j: (0, j),
                                              pipeline_mode=ANY),
                       grid=(3, 3), input_output_aliases={1: 0})(x, init)
    np.testing.assert_array_equal(z, init + x.reshape(3, 8, 384).sum(axis=0))


def test_3d_grid_revisits_every_output_block_at_each_i():
    """grid (i, j, k): o's block (j, k) comes back once per i, after all
    the others; an edge block (rows 20 of 24) reads padding, writes in bounds."""
    def k(x_ref, o_ref):
        @pl.when(pl.program_id(0) == 0)
        def _():
            o_ref[...] = jnp.zeros_like(o_ref)

        o_ref[...] += x_ref[...] * (pl.program_id(0) + 1).astype(jnp.float32)

    x = _ints((4, 20, 256), 6)
    z = pl.pallas_call(k, out_shape=jax.ShapeDtypeStruct((20, 256), jnp.float32),
                       in_specs=[pl.BlockSpec((None, 8, 128), lambda i, j, k: (i, j, k))],
                       out_specs=pl.BlockSpec((8, 128), lambda i, j, k: (j, k),
                                              pipeline_mode=ANY),
                       grid=(4, 3, 2))(x)
    np.testing.assert_array_equal(z, (x * np.arange(1, 5)[:, None, None]).sum(axis=0))


def test_debug_mode_passes_the_legal_revisits():
    x = _ints((24, 384), 7)
    np.testing.assert_array_equal(_reduce(x, debug=True), x.reshape(3, 8, 384).sum(axis=0))


def test_debug_mode_reports_an_immediate_revisit():
    with pytest.raises(TpurtError, match="revisited after its write-back"):
        _reduce(_ints((24, 384), 8), mode=pl.Buffered(1), debug=True)


def test_debug_mode_reports_a_block_shared_by_parallel_iterations():
    """i parallel: its iterations share o's blocks, a race ANY cannot fix."""
    with pytest.raises(TpurtError, match="parallel iterations"):
        _reduce(_ints((24, 384), 9), debug=True, sem=("parallel", "arbitrary"))


_CHILD = r"""
import numpy as np
import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import pallas as pl
from tpuemu.pallas import tpu as pltpu

def k(x_ref, o_ref):
    @pl.when(pl.program_id(1) == 0)
    def _():
        o_ref[...] = jnp.zeros_like(o_ref)
    o_ref[...] += x_ref[...]

x = np.random.default_rng(10).integers(-8, 9, (4, 24, 384)).astype(np.float32)
for debug in (False, True):
    z = pl.pallas_call(
        k, out_shape=jax.ShapeDtypeStruct((4, 8, 384), jnp.float32),
        in_specs=[pl.BlockSpec((None, 8, 128), lambda p, i, j: (p, i, j))],
        out_specs=pl.BlockSpec((None, 8, 128), lambda p, i, j: (p, 0, j),
                               pipeline_mode=pl.Buffered(1, revisit=pl.RevisitMode.ANY)),
        grid=(4, 3, 3), debug=debug,
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=("parallel", "arbitrary", "arbitrary")))(x)
    np.testing.assert_array_equal(z, x.reshape(4, 3, 8, 384).sum(axis=1))
    assert jax.last_stats()["cores_used"] == 2, jax.last_stats()
print("ok")
"""


def test_two_cores_split_the_parallel_dimension():
    """TPURT_DEVICE=sim:cores=2: p parallel, split across the cores; each
    core revisits its own blocks along the arbitrary i."""
    env = dict(os.environ, TPURT_DEVICE="sim:cores=2")
    here = os.path.dirname(os.path.abspath(__file__))
    env["PYTHONPATH"] = os.pathsep.join([os.path.join(here, "..", "..", "python"),
                                         env.get("PYTHONPATH", "")])
    r = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout + r.stderr


def test_an_input_with_revisit_any_is_read_as_always():
    """JAX's lowering takes revisit on any window; an input's blocks are read
    at every new index anyway, so ANY changes nothing for it."""
    x = _ints((24, 384), 11)
    z = pl.pallas_call(_accumulate, out_shape=jax.ShapeDtypeStruct((8, 384), jnp.float32),
                       in_specs=[pl.BlockSpec((8, 128), lambda i, j: (i, j), pipeline_mode=ANY)],
                       out_specs=pl.BlockSpec((8, 128), lambda i, j: (0, j), pipeline_mode=ANY),
                       grid=(3, 3))(x)
    np.testing.assert_array_equal(z, x.reshape(3, 8, 384).sum(axis=0))


@pytest.mark.parametrize("role", ["in", "out"])
def test_revisit_any_with_double_buffering_is_refused(role):
    """JAX's lowering: 'RevisitMode.ANY is not supported with double buffering.'"""
    two = pl.Buffered(2, revisit=pl.RevisitMode.ANY)
    with pytest.raises(pl.TraceError, match="not supported with double buffering"):
        pl.pallas_call(_accumulate, out_shape=jax.ShapeDtypeStruct((8, 384), jnp.float32),
                       in_specs=[pl.BlockSpec((8, 128), lambda i, j: (i, j),
                                              pipeline_mode=two if role == "in" else ANY)],
                       out_specs=pl.BlockSpec((8, 128), lambda i, j: (0, j),
                                              pipeline_mode=two if role == "out" else ANY),
                       grid=(3, 3))(_ints((24, 384), 12))


@pytest.mark.parametrize("space", [pltpu.SMEM, pl.ANY])
def test_revisit_any_outside_vmem_is_refused(space):
    """pl.Buffered is of VMEM blocks (SMEM blocks are read back by the
    device's rule too, but take no Buffered)."""
    def k(x_ref, o_ref):
        pass

    with pytest.raises(TpurtError, match="output 'o_ref': buffer_count .pl.Buffered. is for VMEM blocks only"):
        pl.pallas_call(k, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
                       in_specs=[pl.BlockSpec((8, 128), lambda i: (0, 0))],
                       out_specs=pl.BlockSpec((8, 128), lambda i: (0, 0), memory_space=space,
                                              pipeline_mode=ANY),
                       grid=(2,))(_ints((8, 128), 13))


def test_an_unknown_revisit_mode_is_refused():
    with pytest.raises(TypeError, match="give pl.RevisitMode.IMMEDIATE or ANY"):
        pl.Buffered(1, revisit="sometimes")
