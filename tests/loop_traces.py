"""Synthetic torch.profiler traces of Mini-SGLang's and SGLang's two loops, built event by event
the way torch.profiler records them, for the import's tests.

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

``sglang_trace`` is SGLang 0.5.17's own profile (``engine.start_profile``): its scheduler's
phases as ``user_annotation`` ranges (``scheduler.recv_requests``, ...), each forward marked
``step[EXTEND bs=16 toks=512]`` / ``step[DECODE bs=16]`` inside ``scheduler.run_batch``, and
the ranges mirrored on the GPU rows as ``gpu_user_annotation`` (as Kineto does). Its loops, as
``sglang/srt/managers/scheduler.py`` runs them:

- ``event_loop_normal``: the forward on the schedule stream (the loop's current stream);
  ``process_batch_result`` reads the batch just launched with ``.tolist()``: a copy into
  pageable memory that returns when the forward has run, then a stream synchronisation.
- ``event_loop_overlap``: ``run_batch(n)`` launches forward n on the forward stream (after it
  waits for the schedule stream) and its result's copy on a copy stream
  (``copy_result_to_cpu``); then ``process_batch_result(n-1)`` synchronises on n-1's
  ``copy_done`` (``cudaEventSynchronize``). The first iteration has no result to process; a
  last one, with no batch, processes the last result.
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


# ---- SGLang's own annotated profile ------------------------------------------------------------

SGLANG_FORWARD_US = 300.0    # a decode graph's GPU time (GPU-bound, as above)
SGLANG_PREFILL_US = 900.0


def _annotation(name: str, ts: float, end: float, pid: int = 1, tid: int = 1,
                cat: str = "user_annotation") -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts,
            "dur": end - ts, "args": {}}


def sglang_trace(overlap: bool, steps: int = 10, batch: int = 16) -> dict:
    """SGLang's profile of ``steps`` forwards (a prefill, then decode steps) of its overlap (or
    normal) loop, one idle iteration before the first."""
    schedule, forward_stream, copy = 8, (7 if overlap else 8), 9
    events: list[dict] = [
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1,
         "args": {"name": "thread 1 (sglang::schedul)"}},
        {"ph": "M", "name": "process_labels", "pid": 0, "tid": 0, "args": {"labels": "GPU 0"}},
    ]
    corr, host, free = 0, T0, {schedule: T0, 7: T0, copy: T0}
    copy_done: list[float] = []

    def launch(name: str, cat: str, kernel: str, stream: int, at: float, dur: float,
               after: float = 0.0) -> float:
        nonlocal corr
        corr += 1
        start = max(at + 8, free[stream], after)
        free[stream] = start + dur
        events.extend([_runtime(name, at, 4, corr), _gpu(cat, kernel, stream, start, dur, corr)])
        return free[stream]

    def opening(t: float) -> float:                      # receive, then the next batch
        events.extend([_annotation("scheduler.recv_requests", t, t + 20),
                       _annotation("scheduler.process_input_requests", t + 21, t + 26)])
        return t + 27

    def process(t: float, waits_for: float, serial_copy: bool) -> float:
        start = t
        if serial_copy:                                  # .tolist(): pageable, then a sync
            end = launch("cudaMemcpyAsync", "gpu_memcpy", "Memcpy DtoH (Device -> Pageable)",
                         schedule, t + 5, COPY_US)
            events[-2]["dur"] = end + 2 - (t + 5)
            t = end + 3
            events.append(_runtime("cudaStreamSynchronize", t, 4))
            t += 5
        else:
            sync_end = max(t + 5 + 2, waits_for + 5)
            events.append(_runtime("cudaEventSynchronize", t + 5, sync_end - t - 5))
            t = sync_end
        end = t + PROCESS_US
        events.append(_annotation("scheduler.process_batch_result", start, end))
        events.append(_annotation("scheduler.process_batch_result", start, end, 0, schedule,
                                  "gpu_user_annotation"))
        return end + 2

    t = opening(host)                                    # an idle iteration: no batch yet
    events.append(_annotation("scheduler.get_next_batch_to_run", t, t + 10))
    host = t + 15
    for n in range(1, steps + 1):
        t = opening(host)
        uploaded = launch("cudaMemcpyAsync", "gpu_memcpy", "Memcpy HtoD (Pinned -> Device)",
                          schedule, t + 10, UPLOAD_US)
        events.append(_annotation("scheduler.get_next_batch_to_run", t, t + 40))
        begin = t + 42
        name = f"step[EXTEND bs={batch} toks={batch * 32}]" if n == 1 else f"step[DECODE bs={batch}]"
        gpu = SGLANG_PREFILL_US if n == 1 else SGLANG_FORWARD_US
        done = launch("cudaGraphLaunch", "kernel", "graph_kernel", forward_stream, begin + 10, gpu,
                      after=uploaded)
        events.append(_annotation(name, begin + 5, begin + 20))
        events.append(_annotation(name, done - gpu, done, 0, forward_stream, "gpu_user_annotation"))
        end = begin + 22
        if overlap:                                      # the result's copy on the copy stream
            copied = launch("cudaMemcpyAsync", "gpu_memcpy", "Memcpy DtoH (Device -> Pinned)",
                            copy, begin + 23, COPY_US, after=done)
            events.append(_annotation("copy_result_to_cpu", begin + 22, begin + 30))
            copy_done.append(copied)
            end = begin + 32
        events.append(_annotation("scheduler.run_batch", begin, end))
        if overlap:
            host = process(end + 2, copy_done[-2], False) if n > 1 else end + 2
        else:
            host = process(end + 2, done, True)
    if overlap:                                          # the last iteration: no batch, the
        t = opening(host)                                # last result processed
        events.append(_annotation("scheduler.get_next_batch_to_run", t, t + 10))
        process(t + 12, copy_done[-1], False)
    return {"traceEvents": events}


def sglang_trace_bytes(overlap: bool, steps: int = 10) -> bytes:
    return json.dumps(sglang_trace(overlap, steps)).encode()
