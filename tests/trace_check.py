#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Check a timeline trace (TPURT_TRACE, tpurt-model --trace) against the
statistics its jobs reported.

    trace_check.py TRACE.json EXPECTED.json

EXPECTED holds {"host": bool, "jobs": [stats, ...]}, one entry per job in
submission order (or one job's object from tpurt-model --json), each with the job report's figures: steps, cores_used,
model_time_ps, model_mxu_busy_ps, model_dma_busy_ps, model_bubble_ps,
hbm_bytes_in, hbm_bytes_out, and "every_step_mxu" when each step has a dot.
The trace's events are summed independently of the report: each event's
times are rounded on their own, so sums may differ from the report by up
to a picosecond per event. Prints one line per problem; exits 1 if any.
"""
import json
import sys
from collections import defaultdict

DEVICE, HOST = 1, 2
LANES = ["step", "DMA in", "MXU", "vector unit", "DMA out", "bubble"]


def ps(us):
    """Microseconds with picosecond decimals, back to whole picoseconds."""
    return round(us * 1e6)


def check_job(n, want, events, host, problems):
    def fail(msg):
        problems.append("job %d: %s" % (n, msg))

    def near(what, have, expect, tol):
        if abs(have - expect) > tol:
            fail("%s: trace %d, report %d (off by %d, allowed %d)"
                 % (what, have, expect, have - expect, tol))

    jobs = [e for e in events if e["pid"] == DEVICE and e["tid"] == 0
            and e["name"] != "launch"]
    launch = [e for e in events if e["pid"] == DEVICE and e["name"] == "launch"]
    if len(jobs) != 1 or len(launch) != 1:
        fail("%d job and %d launch events, want 1 each" % (len(jobs), len(launch)))
        return
    t0 = ps(jobs[0]["ts"])
    near("the job event's duration", ps(jobs[0]["dur"]), want["model_time_ps"], 1)

    by_lane = defaultdict(list)         # (core, lane) -> events
    for e in events:
        if e["pid"] == DEVICE and e["tid"] != 0:
            by_lane[(e["args"]["core"], e["name"])].append(e)
    cores = sorted({c for c, _ in by_lane})
    if len(cores) != want["cores_used"]:
        fail("events on %d cores, the job used %d" % (len(cores), want["cores_used"]))
    nevents = sum(len(v) for v in by_lane.values())

    def total(lane, key=None):
        return sum(e["args"][key] if key else ps(e["dur"])
                   for c in cores for e in by_lane[(c, lane)])

    steps = sum(len(by_lane[(c, "step")]) for c in cores)
    if steps != want["steps"]:
        fail("%d step events, the job ran %d steps" % (steps, want["steps"]))
    if want.get("every_step_mxu"):
        mxu = sum(len(by_lane[(c, "MXU")]) for c in cores)
        if mxu != want["steps"]:
            fail("%d MXU events for %d steps" % (mxu, want["steps"]))
    if total("DMA in", "bytes") != want["hbm_bytes_in"]:
        fail("DMA in moves %d bytes, the report %d"
             % (total("DMA in", "bytes"), want["hbm_bytes_in"]))
    if total("DMA out", "bytes") != want["hbm_bytes_out"]:
        fail("DMA out moves %d bytes, the report %d"
             % (total("DMA out", "bytes"), want["hbm_bytes_out"]))
    near("DMA busy", total("DMA in") + total("DMA out"),
         want["model_dma_busy_ps"], nevents)
    near("bubbles", total("bubble"), want["model_bubble_ps"], nevents)

    # compute per step is the longer of MXU and vector work (tpu_model.h)
    compute = 0
    for c in cores:
        per_step = defaultdict(int)
        for lane in ("MXU", "vector unit"):
            for e in by_lane[(c, lane)]:
                s = e["args"]["step"]
                per_step[s] = max(per_step[s], ps(e["dur"]))
        compute += sum(per_step.values())
    near("compute (MXU busy)", compute, want["model_mxu_busy_ps"], nevents)

    # each core's steps tile its timeline; the slowest core plus the
    # launch cost is the job's modeled time
    end = 0
    for c in cores:
        lane_events = [e for (cc, _), v in by_lane.items() if cc == c for e in v]
        end = max(end, max(ps(e["ts"]) + ps(e["dur"]) for e in lane_events))
        seq = sorted(by_lane[(c, "step")], key=lambda e: e["args"]["step"])
        for a, b in zip(seq, seq[1:]):
            if abs(ps(a["ts"]) + ps(a["dur"]) - ps(b["ts"])) > 1:
                fail("core %d: step %d does not start where step %d ends"
                     % (c, b["args"]["step"], a["args"]["step"]))
                break
    near("the last event's end", end - t0, want["model_time_ps"], 2)

    hosts = [e for e in events if e["pid"] == HOST and e["tid"] != 0]
    if not host:
        if hosts:
            fail("%d host events in a model-only trace" % len(hosts))
        return
    if len(hosts) != want["steps"]:
        fail("%d host step events, the job ran %d steps" % (len(hosts), want["steps"]))
    run = [e for e in events if e["pid"] == HOST and e["tid"] == 0]
    if len(run) != 1:
        fail("%d host job events, want 1" % len(run))
        return
    lo, hi = ps(run[0]["ts"]), ps(run[0]["ts"]) + ps(run[0]["dur"])
    for e in hosts:
        if ps(e["ts"]) < lo or ps(e["ts"]) + ps(e["dur"]) > hi:
            fail("host step %d lies outside the job's host run" % e["args"]["step"])
            break


def main():
    trace = json.load(open(sys.argv[1]))
    expected = json.load(open(sys.argv[2]))
    if "jobs" not in expected:          # tpurt-model --json: one matmul
        expected = {"host": False,
                    "jobs": [dict(expected, every_step_mxu=True)]}
    problems = []
    by_job = defaultdict(list)
    for e in trace["traceEvents"]:
        if e["ph"] == "X":
            by_job[e["args"]["job"]].append(e)
    if len(by_job) != len(expected["jobs"]):
        problems.append("%d jobs in the trace, %d expected"
                        % (len(by_job), len(expected["jobs"])))
    for n, want in enumerate(expected["jobs"]):
        check_job(n, want, by_job.get(n, []), expected["host"], problems)
    for p in problems:
        print("# trace_check: " + p)
    if not problems:
        print("# trace_check: %d jobs, %d events agree with the reports"
              % (len(by_job), sum(len(v) for v in by_job.values())))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
