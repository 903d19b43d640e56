#!/bin/sh
# SPDX-License-Identifier: MIT
# Host test: the Python front end (python/tpuemu) under pytest, against the
# in-process device (TPURT_DEVICE=sim) of the tree's build/lib, with every
# sample of samples/py a test of its own (tests/py/test_samples.py). Needs
# `make userspace` and Debian's python3 with python3-cffi, python3-numpy and
# python3-pytest (scripts/deps.sh). TAP: a plan and one result per pytest
# test (tests/py/conftest.py prints them), a failure's report as comments.
set -u

TOP='@TOP@'
BUILD='@BUILD@'
case "$TOP" in @*) TOP=$(cd "$(dirname "$0")/.." && pwd) ;; esac
case "$BUILD" in @*) BUILD=$TOP/build ;; esac
PY=${PYTHON:-/usr/bin/python3}

if ! "$PY" -c 'import cffi, numpy, pytest' 2>/dev/null; then
	echo "1..0 # SKIP $PY lacks cffi, numpy or pytest (scripts/deps.sh installs them)"
	exit 0
fi
export TPURT_DEVICE=sim
export TPUEMU_LIB="$BUILD/lib/libtpurt.so.0"
export TPUEMU_TAP=1
export PYTHONPATH="$TOP/python"
export PYTHONDONTWRITEBYTECODE=1
export TPUEMU_TAP_FD=3
# TAP on stdout (descriptor 3), failures as its comments; pytest's own
# report (its progress dots would split TAP lines) to /dev/null
cd "$TOP" && exec "$PY" -m pytest -q -p no:cacheprovider tests/py 3>&1 1>/dev/null
