#!/usr/bin/env python3
"""Writes tests/data/profile/gdn_main_path_trace.json.gz: a small TPU profile in the form
jax.profiler's Perfetto trace takes (a process per device named /device:TPU:N with the lines
Steps, XLA Modules and XLA Ops; a host process beside it), for the ops of
tests/data/hlo/gdn_main_path. The durations are made up, chosen so the tests can check the sums;
this is test data, not a measurement."""
import gzip
import json
import pathlib

ENTRY_US = {"fusion.79": 10, "fusion.78": 12, "custom-call.2": 100, "fusion.62": 8, "copy.42": 2}
LOOP_US = {"fusion.112": 3, "fusion.116": 4}  # the scan body's fusions, twice per step
MEASURED_ONLY_US = {"mystery.1": 5}           # an op the program does not have


def main():
    meta = [
        {"ph": "M", "pid": 7, "name": "process_name", "args": {"name": "/device:TPU:0"}},
        {"ph": "M", "pid": 7, "tid": 1, "name": "thread_name", "args": {"name": "Steps"}},
        {"ph": "M", "pid": 7, "tid": 2, "name": "thread_name", "args": {"name": "XLA Modules"}},
        {"ph": "M", "pid": 7, "tid": 3, "name": "thread_name", "args": {"name": "XLA Ops"}},
        {"ph": "M", "pid": 7, "tid": 4, "name": "thread_name", "args": {"name": "Framework Ops"}},
        {"ph": "M", "pid": 9, "name": "process_name", "args": {"name": "/host:CPU"}},
    ]
    events, t = [], 1000.0
    for step in range(2):
        start = t
        ops = list(ENTRY_US.items()) + [(n, us) for n, us in LOOP_US.items() for _ in range(2)]
        ops += list(MEASURED_ONLY_US.items())
        for name, us in ops:
            cat = "custom-call" if name.startswith("custom-call") else "fusion"
            events.append({"ph": "X", "pid": 7, "tid": 3, "name": name, "ts": t, "dur": us,
                           "args": {"long_name": f"%{name} = ...", "hlo_category": cat}})
            t += us
        events.append({"ph": "X", "pid": 7, "tid": 2, "name": "jit_main_path", "ts": start,
                       "dur": t - start})
        events.append({"ph": "X", "pid": 7, "tid": 1, "name": str(step), "ts": start,
                       "dur": t - start})
        events.append({"ph": "X", "pid": 7, "tid": 4, "name": "main_path", "ts": start,
                       "dur": t - start})
        events.append({"ph": "X", "pid": 9, "tid": 1, "name": "PjitFunction", "ts": start,
                       "dur": 50})
        t += 20
    out = pathlib.Path(__file__).resolve().parent.parent / "tests/data/profile"
    out.mkdir(parents=True, exist_ok=True)
    text = json.dumps({"displayTimeUnit": "ns", "traceEvents": meta + events}, indent=1)
    with gzip.open(out / "gdn_main_path_trace.json.gz", "wt") as f:
        f.write(text)


if __name__ == "__main__":
    main()
