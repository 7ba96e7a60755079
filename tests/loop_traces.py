"""Synthetic torch.profiler traces of Mini-SGLang's two loops, built event by event the way
torch.profiler (with ``with_stack=True``) records them, for the import's tests.

Each step, as ``python/minisgl/scheduler/scheduler.py`` runs it: ``_schedule_next_batch``
(its metadata upload on the scheduler stream), ``_forward`` (one CUDA graph launch on the
engine stream, then the sampled tokens' copy to the host on a copy stream), and
``_process_last_data`` (``copy_done.synchronize()`` on a batch's copy, then Python work).

- ``overlap=False`` (``normal_loop``): the host processes the batch it just launched, so it
  blocks until that forward and its copy are done: the GPU runs dry every step.
- ``overlap=True`` (``overlap_loop``): the host processes the batch before, whose copy is done
  (or finishes while the next forward runs), so the GPU always has the next forward queued: the
  forward of step n runs under the host's processing of step n-1 and building of step n+1, and
  the next upload runs on its stream beside it.
"""

from __future__ import annotations

import json

FORWARD_US = 300.0       # the graph's GPU time: longer than the host's part (GPU-bound)
UPLOAD_US = 2.0
COPY_US = 3.0
PROCESS_US = 80.0        # the host's Python work in _process_last_data
T0 = 1_000_000.0


def _py(name: str, line: int, ts: float, end: float) -> dict:
    return {"ph": "X", "cat": "python_function", "pid": 1, "tid": 1, "ts": ts, "dur": end - ts,
            "name": f"python/minisgl/scheduler/scheduler.py({line}): {name}", "args": {}}


def _runtime(name: str, ts: float, dur: float, corr: int | None = None) -> dict:
    args = {"correlation": corr} if corr is not None else {}
    return {"ph": "X", "cat": "cuda_runtime", "name": name, "pid": 1, "tid": 1, "ts": ts,
            "dur": dur, "args": args}


def _gpu(cat: str, name: str, stream: int, ts: float, dur: float, corr: int) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": 0, "tid": stream, "ts": ts, "dur": dur,
            "args": {"correlation": corr, "stream": stream, "device": 0}}


def loop_trace(overlap: bool, steps: int = 10, named: bool = True, poll: bool = False) -> dict:
    """A trace of ``steps`` decode steps of Mini-SGLang's overlap (or normal) loop; ``named``:
    with the scheduler's python functions (``with_stack=True``); ``poll``: the host waits for a
    batch's copy by querying its event every 10 µs instead of synchronising on it."""
    events: list[dict] = [
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "thread 1 (python3)"}},
        {"ph": "M", "name": "process_labels", "pid": 0, "tid": 0, "args": {"labels": "GPU 0"}},
    ]
    corr, host, engine_free = 0, T0, T0
    copy_done: list[float] = []
    for _ in range(steps):
        corr += 1                                    # _schedule_next_batch: build, upload
        events += [_runtime("cudaMemcpyAsync", host + 10, 4, corr),
                   _gpu("gpu_memcpy", "Memcpy HtoD (Pinned -> Device)", 8, host + 18, UPLOAD_US,
                        corr)]
        schedule = (host, host + 30)
        corr += 1                                    # _forward: the graph on the engine stream
        launch = host + 35
        start = max(launch + 10, engine_free, host + 18 + UPLOAD_US)
        engine_free = start + FORWARD_US
        events += [_runtime("cudaGraphLaunch", launch, 5, corr),
                   _gpu("kernel", "graph_kernel", 7, start, FORWARD_US, corr)]
        corr += 1                                    # the tokens' copy, after the forward
        events += [_runtime("cudaMemcpyAsync", host + 40, 3, corr),
                   _gpu("gpu_memcpy", "Memcpy DtoH (Device -> Pinned)", 9, engine_free,
                        COPY_US, corr)]
        copy_done.append(engine_free + COPY_US)
        forward = (host + 30, host + 45)
        # _process_last_data: the batch just launched (normal) or the one before (overlap)
        if overlap:                                  # the first step has none to process
            waits_for = copy_done[-2] if len(copy_done) > 1 else float("-inf")
        else:
            waits_for = copy_done[-1]
        sync_start = host + 47
        sync_end = max(sync_start + 2, waits_for + 5)
        if poll:                                     # query until done: at least one query
            t = sync_start
            while True:
                events.append(_runtime("cudaEventQuery", t, 1.0))
                if t >= waits_for:
                    break
                t += 10.0
            sync_end = t + 1.0
        else:
            events.append(_runtime("cudaEventSynchronize", sync_start, sync_end - sync_start))
        process = (host + 45, sync_end + PROCESS_US)
        if named:
            events += [_py("_schedule_next_batch", 219, *schedule), _py("_forward", 227, *forward),
                       _py("_process_last_data", 138, *process)]
        host = process[1] + 5
    return {"traceEvents": events}


def loop_trace_bytes(overlap: bool, steps: int = 10, named: bool = True,
                     poll: bool = False) -> bytes:
    return json.dumps(loop_trace(overlap, steps, named, poll)).encode()
