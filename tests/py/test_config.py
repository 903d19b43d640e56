# SPDX-License-Identifier: MIT
"""jax.config: the options tpuemu has (poisoned buffers; x64 off), each
read back as set, scoped by jax.config.option, and unknown ones refused."""
import numpy as np
import pytest

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import pallas as pl
from tpuemu.pallas import tpu as pltpu


def _scratch_row():
    def kernel(o_ref, s_ref):
        s_ref[0:1, :] = jnp.ones((1, 128), jnp.float32)
        o_ref[...] = s_ref[...]
    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
                          scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32)])()


def test_poison_is_scoped():
    assert jax.config.jax_pallas_poison_buffers is False
    with jax.config.option("jax_pallas_poison_buffers", True):
        assert jax.config.read("jax_pallas_poison_buffers") is True
        out = _scratch_row()
    assert jax.config.jax_pallas_poison_buffers is False
    np.testing.assert_array_equal(out[0], 1.0)
    assert np.isnan(out[1:]).all()		# rows never written: poisoned
    np.testing.assert_array_equal(_scratch_row()[0], 1.0)


def test_options_are_checked():
    with pytest.raises(AttributeError, match="Unrecognized config option: jax_no_such"):
        jax.config.update("jax_no_such", 1)
    with pytest.raises(NotImplementedError, match="no 64-bit types"):
        jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_enable_x64", False)
    with pytest.raises(TypeError, match="a bool"):
        jax.config.update("jax_pallas_poison_buffers", 1)
    with pytest.raises(AttributeError, match="set options with jax.config.update"):
        jax.config.jax_enable_x64 = False
