#!/usr/bin/env python3
"""Writes two small TPU profiles in the form jax.profiler's Perfetto trace takes (a process per
device named /device:TPU:N with the lines Steps, XLA Modules and XLA Ops; a host process beside
it): tests/data/profile/gdn_main_path_trace.json.gz for the ops of tests/data/hlo/gdn_main_path,
and tests/data/profile/small_step_trace.json.gz, a training step of the 4-layer model of
tests/data/profile/small_step.yaml as MaxText runs it: the embedding, a forward and a backward
layer loop (while ops whose spans hold their iterations' ops, the forward's HLO text carrying
XLA's known_trip_count, the backward's not), the loss inside a 2-trip loop, the optimizer, with
collectives inside and outside the loops and idle gaps between top-level ops. The durations are
made up, chosen so the tests can check the sums; this is test data, not a measurement."""
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
    write("gdn_main_path_trace.json.gz", meta + events)
    write("small_step_trace.json.gz", meta + step_events())


def write(name, events):
    out = pathlib.Path(__file__).resolve().parent.parent / "tests/data/profile"
    out.mkdir(parents=True, exist_ok=True)
    text = json.dumps({"displayTimeUnit": "ns", "traceEvents": events}, indent=1)
    with open(out / name, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as f:
        f.write(text.encode())  # no timestamp in the header: the same bytes on every run


LAYERS = 4
FORWARD_BODY_US = [("fusion.20", 30), ("custom-call.21", 40), ("all-gather-done.22", 2),
                   ("fusion.23", 25)]
BACKWARD_BODY_US = [("fusion.30", 60), ("custom-call.31", 80), ("reduce-scatter-done.32", 3)]
LOSS_BODY_US = [("fusion.51", 5)]
GAP_US = 1  # idle between top-level ops
ANNOTATIONS = {"fusion.20": {"model_flops": 1000000, "bytes_accessed": 4096}}  # per execution


def step_events():
    """Two steps: (name, us) top-level ops and (loop name, trips, body, with trip count) loops."""
    plan = [("fusion.1", 50), ("all-gather-done.3", 5),
            ("while.10", LAYERS, FORWARD_BODY_US, True), ("while.11", LAYERS, BACKWARD_BODY_US, False),
            ("fusion.40", 30), ("while.50", 2, LOSS_BODY_US, True), ("fusion.60", 20)]
    events, t = [], 5000.0

    def op(name, ts, dur, long_name=None):
        cat = ("custom-call" if name.startswith("custom-call") else "while" if name.startswith("while")
               else "collective" if "-done" in name else "fusion")
        args = {"long_name": long_name or f"%{name} = ...", "hlo_category": cat}
        args |= ANNOTATIONS.get(name, {})
        events.append({"ph": "X", "pid": 7, "tid": 3, "name": name, "ts": ts, "dur": dur,
                       "args": args})

    for step in range(2):
        start = t
        for item in plan:
            if len(item) == 2:
                op(item[0], t, item[1])
                t += item[1] + GAP_US
                continue
            name, trips, body, with_count = item
            loop_start = t
            for _ in range(trips):
                for body_name, us in body:
                    op(body_name, t, us)
                    t += us
            text = (f'%{name} = (...) while(...), backend_config={{"known_trip_count":{{"n":"{trips}"}}}}'
                    if with_count else None)
            op(name, loop_start, t - loop_start, text)
            t += GAP_US
        events.append({"ph": "X", "pid": 7, "tid": 2, "name": "jit_train_step", "ts": start,
                       "dur": t - start})
        events.append({"ph": "X", "pid": 7, "tid": 1, "name": str(step), "ts": start,
                       "dur": t - start})
        t += 100
    return events


if __name__ == "__main__":
    main()
