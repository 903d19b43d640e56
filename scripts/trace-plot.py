#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Draw one job of a timeline trace (TPURT_TRACE, tpurt-model --trace) as a
picture, through gnuplot: a row per core and track (step, DMA in, MXU,
vector unit, DMA out, bubble) in modeled chip time, a box per event. For
README's screenshot and for a quick look without a trace viewer.

    trace-plot.py TRACE.json OUT.svg|OUT.png [--job N] [--steps N]

--steps: only the first N steps of each core (default 24), so that the
boxes stay wide enough to see; the whole job is in the JSON.
"""
import argparse
import json
import subprocess
import sys

DEVICE = 1
LANES = ["step", "DMA in", "MXU", "vector unit", "DMA out", "bubble"]
COLORS = ["#bbbbbb", "#0072b2", "#d55e00", "#009e73", "#cc79a7", "#f0e442"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("out")
    ap.add_argument("--job", type=int, default=0)
    ap.add_argument("--steps", type=int, default=24)
    a = ap.parse_args()

    events = [e for e in json.load(open(a.trace))["traceEvents"]
              if e["ph"] == "X" and e["pid"] == DEVICE
              and e["args"].get("job") == a.job]
    jobs = [e for e in events if e["tid"] == 0 and e["name"] != "launch"]
    if not jobs:
        sys.exit("trace-plot: %s has no job %d" % (a.trace, a.job))
    lanes = [e for e in events if e["tid"] != 0 and e["name"] in LANES]
    if not lanes:
        sys.exit("trace-plot: job %d has no core events" % a.job)
    # each core's events up to the end of its first --steps steps
    until = {}
    for e in lanes:
        if e["name"] == "step" and e["args"]["step"] < a.steps:
            c = e["args"]["core"]
            until[c] = max(until.get(c, 0), e["ts"] + e["dur"])
    lanes = [e for e in lanes if e["ts"] < until.get(e["args"]["core"], 0)]
    cores = sorted({e["args"]["core"] for e in lanes})
    rows = [(c, l) for c in cores for l in LANES]
    end = max(e["ts"] + e["dur"] for e in lanes)
    start = min(e["ts"] for e in lanes)

    term = ("set terminal png size 1200,%d noenhanced" if a.out.endswith(".png")
            else "set terminal svg size 1200,%d noenhanced font 'sans,11' "
            "background rgb 'white'") % (120 + 28 * len(rows))
    g = [term, "set output '%s'" % a.out.replace("'", ""),
         "set title \"%s: the first %d steps per core, modeled time\""
         % (jobs[0]["name"].replace('"', ""), a.steps),
         "set xlabel 'modeled time (us)'", "unset key", "set grid x",
         "set xrange [%g:%g]" % (start, end), "set yrange [-0.5:%g]" % (len(rows) - 0.5),
         "set ytics (%s)" % ", ".join('"core %d: %s" %d' % (c, l, len(rows) - 1 - i)
                                      for i, (c, l) in enumerate(rows)),
         "set style fill solid 0.9 border rgb 'black'"]
    plots = []
    for li, lane in enumerate(LANES):
        data = ["%g %g %g %g" % (e["ts"] + e["dur"] / 2,
                                 len(rows) - 1 - rows.index((e["args"]["core"], lane)),
                                 e["dur"] / 2, 0.35)
                for e in lanes if e["name"] == lane]
        if data:
            g.append("$lane%d << EOD\n%s\nEOD" % (li, "\n".join(data)))
            plots.append("$lane%d with boxxyerror lc rgb '%s'" % (li, COLORS[li]))
    g.append("plot " + ", ".join(plots))
    p = subprocess.run(["gnuplot"], input="\n".join(g) + "\n", text=True)
    if p.returncode:
        sys.exit("trace-plot: gnuplot failed writing %s" % a.out)
    print("trace-plot: %s: job %d, %d events on %d core(s)"
          % (a.out, a.job, len(lanes), len(cores)))


if __name__ == "__main__":
    main()
