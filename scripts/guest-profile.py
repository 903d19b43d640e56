#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Instructions per guest function, from tools/tcg_tb_count.c's counts.

scripts/guest-profile.sh runs this; it takes the block counts of a run (and
of a baseline boot, taken off function by function), the kernel's
symbols (/proc/kallsyms of a nokaslr boot, so its addresses hold), and the
modules' code addresses the guest printed as "TPUEMU-MODULE NAME ADDR", with
each module's .ko for its symbols. User space is one line: its addresses
belong to whichever process ran."""
import argparse
import bisect
import os
import re
import subprocess
import sys

KERNEL_START = 0xffff800000000000


def read_blocks(path):
    counts = {}
    with open(path) as f:
        for line in f:
            if line.startswith("#"):
                continue
            vaddr, insns, _runs = line.split()
            counts[int(vaddr, 16)] = counts.get(int(vaddr, 16), 0) + int(insns)
    return counts


def kernel_syms(path):
    syms = []
    with open(path) as f:
        for line in f:
            addr, kind, name = line.split()[:3]
            if int(addr, 16) == 0:
                raise SystemExit("guest-profile: %s has no addresses (kptr_restrict?)" % path)
            if kind in "tTwW":
                syms.append((int(addr, 16), name, ""))
    return syms


def module_syms(ko, base, module):
    """The .ko's functions in .text, placed at the module's .text address."""
    sections = {}
    for line in subprocess.run(["readelf", "-SW", ko], capture_output=True, text=True,
                               check=True).stdout.splitlines():
        m = re.match(r"\s*\[\s*(\d+)\]\s+(\S+)", line)
        if m:
            sections[m.group(1)] = m.group(2)
    syms = []
    for line in subprocess.run(["readelf", "-sW", ko], capture_output=True, text=True,
                               check=True).stdout.splitlines():
        f = line.split()
        if len(f) == 8 and f[3] == "FUNC" and sections.get(f[6]) == ".text":
            syms.append((base + int(f[1], 16), f[7], module))
    return syms


def find_ko(root, name, given):
    if name in given:
        return given[name]
    want = {name + ".ko", name.replace("_", "-") + ".ko"}
    for top, _dirs, files in os.walk(root):
        for f in files:
            if f in want:
                return os.path.join(top, f)
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--blocks", required=True)
    ap.add_argument("--baseline")
    ap.add_argument("--console", required=True)
    ap.add_argument("--kallsyms", required=True)
    ap.add_argument("--modules", required=True)
    ap.add_argument("--module", action="append", default=[], help="NAME=KO")
    ap.add_argument("--per", type=float, default=1)
    ap.add_argument("--top", type=int, default=40)
    a = ap.parse_args()

    given = dict(m.split("=", 1) for m in a.module)
    syms = kernel_syms(a.kallsyms)
    with open(a.console, errors="replace") as f:
        for line in f:
            m = re.search(r"TPUEMU-MODULE (\S+) (0x[0-9a-f]+)", line)
            if not m or int(m.group(2), 16) == 0:
                continue
            ko = find_ko(a.modules, m.group(1), given)
            if ko:
                syms += module_syms(ko, int(m.group(2), 16), m.group(1))
    syms.sort()
    starts = [s[0] for s in syms]

    def by_function(counts):
        out = {}
        for vaddr, insns in counts.items():
            if vaddr < KERNEL_START:
                key = ("[user space]", "")
            else:
                i = bisect.bisect_right(starts, vaddr) - 1
                key = (syms[i][1], syms[i][2]) if i >= 0 else ("?", "")
            out[key] = out.get(key, 0) + insns
        return out

    run = by_function(read_blocks(a.blocks))
    if a.baseline:
        for key, insns in by_function(read_blocks(a.baseline)).items():
            run[key] = run.get(key, 0) - insns
    run = {k: v for k, v in run.items() if v > 0}
    kernel = sum(v for k, v in run.items() if k[0] != "[user space]")
    user = run.get(("[user space]", ""), 0)
    print("guest instructions%s: kernel %.0f, user %.0f"
          % (" per %g" % a.per if a.per != 1 else "", kernel / a.per, user / a.per))
    print("%12s %6s  %s" % ("insns", "kernel", "function [module]"))
    for (name, module), insns in sorted(run.items(), key=lambda kv: -kv[1])[:a.top]:
        share = "" if name == "[user space]" else "%5.1f%%" % (100.0 * insns / max(kernel, 1))
        print("%12.0f %6s  %s%s" % (insns / a.per, share, name, " [%s]" % module if module else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
