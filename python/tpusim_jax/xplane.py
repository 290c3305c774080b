"""`python -m tpusim_jax xplane-to-trace PROFILE.xplane.pb -o TRACE.json.gz`: XProf's own profile
format (an XSpace protocol buffer, what jax.profiler writes as `*.xplane.pb`) rewritten as the
Chrome trace-event JSON `tpusim import profile` reads: each plane a process named as the plane
("/device:TPU:0", "/host:CPU"), each line a thread named as the line ("XLA Ops", "XLA Modules",
"Steps", a host thread), each event a complete event ("ph": "X") with its start and duration in
microseconds and its stats as args. It reads the file with jaxlib's own XSpace reader
(jax.profiler.ProfileData), so it needs no other package.
"""
from __future__ import annotations

import gzip
import json
import os

from tpusim_jax.export import ExportError


def _value(v):
    return v if isinstance(v, (int, float, str, bool)) else str(v)


def xplane_to_trace(path: str) -> dict:
    from jax.profiler import ProfileData

    try:
        space = ProfileData.from_file(path)
    except Exception as e:  # jaxlib raises its own status errors
        raise ExportError(f"{path}: not an XProf profile (.xplane.pb): {e}") from None
    events = []
    for pid, plane in enumerate(space.planes, start=1):
        events.append({"ph": "M", "pid": pid, "name": "process_name", "args": {"name": plane.name}})
        for tid, line in enumerate(plane.lines, start=1):
            events.append({"ph": "M", "pid": pid, "tid": tid, "name": "thread_name",
                           "args": {"name": line.name}})
            for e in line.events:
                event = {"ph": "X", "pid": pid, "tid": tid, "name": e.name,
                         "ts": e.start_ns / 1e3, "dur": e.duration_ns / 1e3}
                stats = {k: _value(v) for k, v in e.stats}
                if stats:
                    event["args"] = stats
                events.append(event)
    return {"displayTimeUnit": "ns", "traceEvents": events}


def write_trace(path: str, output: str) -> str:
    """Converts `path` and writes `output` (gzip-compressed when it ends in .gz), whole or not at
    all."""
    trace = xplane_to_trace(path)
    text = json.dumps(trace).encode()
    opener = gzip.open if output.endswith(".gz") else open
    with opener(output + ".tmp", "wb") as f:
        f.write(text)
    os.replace(output + ".tmp", output)
    return output
