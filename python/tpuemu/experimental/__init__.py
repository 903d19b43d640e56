# SPDX-License-Identifier: MIT
"""jax.experimental's names for what tpuemu has at its top: `from
tpuemu.experimental import pallas as pl`, `from tpuemu.experimental.pallas
import tpu as pltpu`, `tpuemu.experimental.pallas.ops.tpu...` are the
modules under tpuemu.pallas themselves (one module each, not copies: an
alias finder hands out the real module for any depth of name)."""
import importlib
import importlib.abc
import importlib.util
import sys

_ALIASES = {"tpuemu.experimental.pallas": "tpuemu.pallas",
            "tpuemu.experimental.checkify": "tpuemu.checkify",
            "tpuemu.experimental.shard_map": "tpuemu._shard_map"}


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, real):
        self.real = real

    def create_module(self, spec):
        module = importlib.import_module(self.real)
        # the real module's submodules imported so far go in under the
        # alias too: importing one by its alias name then finds it loaded,
        # as its real name would, and does not set it on its package over
        # a name the package binds to something else (megablox's gmm, the
        # function, not gmm.py)
        real, alias = self.real + ".", spec.name + "."
        for name, sub in list(sys.modules.items()):
            if name.startswith(real):
                sys.modules.setdefault(alias + name[len(real):], sub)
        return module

    def exec_module(self, module):
        pass		# the real module ran when it was imported


class _AliasFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        for alias, real in _ALIASES.items():
            if fullname == alias or fullname.startswith(alias + "."):
                name = real + fullname[len(alias):]
                if importlib.util.find_spec(name) is None:
                    return None
                return importlib.util.spec_from_loader(fullname, _AliasLoader(name))
        return None


if not any(isinstance(f, _AliasFinder) for f in sys.meta_path):
    sys.meta_path.insert(0, _AliasFinder())

from . import pallas  # noqa: E402,F401  (tpuemu.experimental.pallas)
