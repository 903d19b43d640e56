# SPDX-License-Identifier: MIT
"""jax.experimental's module names (tpuemu.experimental.pallas ...) are
tpuemu.pallas's modules themselves, so a port can keep JAX's imports with
jax spelled tpuemu, and state (interpret mode, keys) is one."""
import importlib

import pytest


@pytest.mark.parametrize("alias, real", [
    ("tpuemu.experimental.pallas", "tpuemu.pallas"),
    ("tpuemu.experimental.pallas.tpu", "tpuemu.pallas.tpu"),
    ("tpuemu.experimental.pallas.ops.tpu.random.threefry",
     "tpuemu.pallas.ops.tpu.random.threefry"),
])
def test_aliases_are_the_modules(alias, real):
    assert importlib.import_module(alias) is importlib.import_module(real)


def test_from_imports_and_a_missing_name():
    from tpuemu.experimental import pallas as pl
    from tpuemu.experimental.pallas import tpu as pltpu
    import tpuemu.pallas
    assert pl is tpuemu.pallas and pltpu is tpuemu.pallas.tpu
    with pytest.raises(ImportError):
        importlib.import_module("tpuemu.experimental.pallas.no_such_module")


def test_alias_of_a_loaded_submodule_keeps_what_its_package_binds():
    # megablox binds gmm to the function (ops.gmm) over its gmm.py, as
    # JAX's does: importing gmm.py by its alias name must not set the
    # module back on the package (the import system sets a submodule it
    # loads on its parent, and the alias name was new)
    import tpuemu.pallas.ops.tpu.megablox as megablox
    mod = importlib.import_module("tpuemu.experimental.pallas.ops.tpu.megablox.gmm")
    assert mod is importlib.import_module("tpuemu.pallas.ops.tpu.megablox.gmm")
    assert callable(megablox.gmm) and megablox.gmm is megablox.ops.gmm
