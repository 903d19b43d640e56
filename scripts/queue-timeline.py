#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Where a compute-queue descriptor's time goes, from QEMU's trace log.

Run the VM with the device's queue events traced, timestamped:

  QEMU_EXTRA_ARGS="-trace enable=tpu_mxu_queue_* -trace enable=tpu_mxu_read \\
      -trace enable=tpu_mxu_irq -D /tmp/q.log -msg timestamp=on" \\
      scripts/vm-run.sh -- bench_submit
  scripts/queue-timeline.py /tmp/q.log [--skip N] [--count N]

and this prints, over consecutive descriptors, the medians and 90th
percentiles of the gaps between the doorbell, the worker's start, the
completion, the next read of HEAD and MSI after it, and the next doorbell
(all host times, in microseconds).
"""
import argparse
import bisect
import re
import sys

LINE = re.compile(r"(\d+)@(\d+)\.(\d+):(\S+) (.*)")
QUEUE = 1                       # TPU_QUEUE_COMPUTE
HEAD_REG = 0x200 + QUEUE * 0x40 + 0x1c  # TPU_REG_Q(QUEUE, TPU_Q_HEAD)


def events(path):
    """(time in us, event name, its text) for each trace line."""
    with open(path, errors="replace") as f:
        for line in f:
            m = LINE.match(line)
            if m:
                _, sec, usec, name, rest = m.groups()
                yield int(sec) * 1000000 + int(usec), name, rest


def timeline(path):
    doorbell, start, complete, head, irq = {}, {}, {}, [], []
    for t, name, rest in events(path):
        words = rest.split()
        if name == "tpu_mxu_read":
            if int(words[1], 16) == HEAD_REG:
                head.append(t)
        elif name == "tpu_mxu_irq":
            irq.append(t)
        elif len(words) > 1 and words[0] == "queue" and int(words[1]) == QUEUE:
            if name == "tpu_mxu_queue_doorbell":
                doorbell[int(words[3]) - 1] = t     # tail = index + 1
            elif name == "tpu_mxu_queue_start":
                start[int(words[3])] = t
            elif name == "tpu_mxu_queue_complete":
                complete[int(words[3])] = t
    return doorbell, start, complete, head, irq


def first_after(times, t, before):
    """The first of sorted @times at or after @t and before @before."""
    k = bisect.bisect_left(times, t)
    return times[k] if k < len(times) and times[k] < before else None


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("log")
    ap.add_argument("--skip", type=int, default=64, help="descriptors to skip (warm-up)")
    ap.add_argument("--count", type=int, default=1500, help="descriptors to look at")
    args = ap.parse_args(argv[1:])
    doorbell, start, complete, head, irq = timeline(args.log)
    ids = sorted(i for i in doorbell
                 if i in start and i in complete and i + 1 in doorbell)
    ids = ids[args.skip:args.skip + args.count]
    if not ids:
        print("queue-timeline: no traced descriptors in %s" % args.log, file=sys.stderr)
        return 1
    gaps = {k: [] for k in ("doorbell->start", "start->complete", "complete->HEAD read",
                            "HEAD read->next doorbell", "complete->MSI",
                            "doorbell->next doorbell")}
    for i in ids:
        db, st, cp, nxt = doorbell[i], start[i], complete[i], doorbell[i + 1]
        gaps["doorbell->start"].append(st - db)
        gaps["start->complete"].append(cp - st)
        gaps["doorbell->next doorbell"].append(nxt - db)
        h = first_after(head, cp, nxt)
        if h is not None:
            gaps["complete->HEAD read"].append(h - cp)
            gaps["HEAD read->next doorbell"].append(nxt - h)
        m = first_after(irq, cp, nxt)
        if m is not None:
            gaps["complete->MSI"].append(m - cp)
    print("%d descriptors of queue %d" % (len(ids), QUEUE))
    for name, v in gaps.items():
        v.sort()
        if v:
            print("%-26s n=%5d median %7.0f us  p90 %7.0f us"
                  % (name, len(v), v[len(v) // 2], v[int(len(v) * 0.9)]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
