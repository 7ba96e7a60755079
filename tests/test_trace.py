"""Chrome trace export (a track per lane) and torch.profiler trace import (a lane per stream)."""

import gzip
import json
import math
import sys
import time
from pathlib import Path

import pytest

from record.chrome_trace import to_chrome_trace, write_chrome_trace
from record.imported.profiler_import import MAX_PHASE_CHARS, TraceImportError, import_profiler_trace
from record.metrics import compute_metrics
from record.recorder import Span
from record.schema import LANES

ROOT = Path(__file__).resolve().parent.parent


def small_run(loop: str = "normal") -> dict:
    spans = []
    for n in range(3):
        t = 100.0 * n
        spans += [Span("cpu", "schedule", n, t, t + 10, 2, 2, [0, 1]),
                  Span("scheduler_stream", "upload", n, t + 10, t + 15, 2, 2, [0, 1]),
                  Span("engine_stream", "decode", n, t + 15, t + 70, 2, 2, [0, 1]),
                  Span("cpu", "process_last", n, t + 70, t + 90, 2, 2, [0, 1])]
    return {"loop": loop, "decode_steps": 1, "extra_cpu_us": 0, "label": loop,
            "lanes": list(LANES), "gpu_lanes": list(LANES[1:]),
            "metrics": compute_metrics(spans, []), "spans": [s.to_dict() for s in spans],
            "outputs": []}


# ---- export ---------------------------------------------------------------------------------

def test_chrome_trace_has_one_named_track_per_lane_and_one_event_per_span():
    run = small_run()
    trace = json.loads(json.dumps(to_chrome_trace(run)))
    assert trace["displayTimeUnit"] == "ms"
    events = trace["traceEvents"]
    threads = {e["tid"]: e["args"]["name"] for e in events
               if e["ph"] == "M" and e["name"] == "thread_name"}
    assert sorted(threads.values()) == sorted(run["lanes"])
    complete = [e for e in events if e["ph"] == "X"]
    assert len(complete) == len(run["spans"])
    for event, span in zip(complete, run["spans"], strict=True):
        assert threads[event["tid"]] == span["lane"] and event["name"] == span["phase"]
        assert event["ts"] == span["start_us"]
        assert event["dur"] == pytest.approx(span["end_us"] - span["start_us"])
        assert event["args"] == {"step": span["step"], "batch_size": 2, "num_tokens": 2,
                                 "req_ids": [0, 1]}
    assert {e["pid"] for e in events} == {1}


def test_write_chrome_trace_gives_one_process_per_run(tmp_path):
    record = {"schema": 1, "runs": [small_run("normal"), small_run("overlap")]}
    for name in ("both.json", "both.json.gz"):
        path = write_chrome_trace(record, tmp_path / name)
        data = path.read_bytes()
        trace = json.loads(gzip.decompress(data) if name.endswith(".gz") else data)
        processes = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"]
                     if e["ph"] == "M" and e["name"] == "process_name"}
        assert processes == {1: "normal", 2: "overlap"}
        complete = [e for e in trace["traceEvents"] if e["ph"] == "X"]
        assert len(complete) == 2 * len(record["runs"][0]["spans"])


# ---- import: a synthetic CUDA trace shaped like torch.profiler's ------------------------------

T = 1_000_000.0  # profiler timestamps are absolute; the import shifts them to start at 0
LONG_NAME = ("void at::native::vectorized_elementwise_kernel<4, "
             "at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3> >"
             "(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)")


def cuda_trace() -> dict:
    def meta(kind, pid, tid, label):
        key = "labels" if kind == "process_labels" else "name"
        return {"name": kind, "ph": "M", "ts": T, "pid": pid, "tid": tid, "args": {key: label}}

    def x(cat, name, pid, tid, ts, dur, **args):
        return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur,
                "args": args}

    cpu = (1234, 1234)
    events = [
        meta("process_name", 1234, 0, "python3"), meta("process_labels", 1234, 0, "CPU"),
        meta("process_name", 0, 0, "python3"), meta("process_labels", 0, 0, "GPU 0"),
        meta("thread_name", 0, 7, "stream 7 "), meta("thread_name", 0, 20, "stream 20 "),
        meta("thread_name", 1234, 1234, "thread 1234 (python3)"),
        x("user_annotation", "ProfilerStep#5", *cpu, T, 100),
        x("user_annotation", "ProfilerStep#6", *cpu, T + 100, 100),
        x("user_annotation", "decode", *cpu, T + 10, 50),
        x("cpu_op", "aten::add", *cpu, T + 12, 10),
        # Kernel 1: launched and run in step 5.
        x("cuda_runtime", "cudaLaunchKernel", *cpu, T + 20, 5, correlation=1),
        x("kernel", LONG_NAME, 0, 7, T + 30, 40, correlation=1, stream=7, device=0),
        # Kernel 2: launched late in step 5, runs during step 6: the correlation id decides.
        x("cuda_runtime", "cudaLaunchKernel", *cpu, T + 95, 5, correlation=2),
        x("kernel", "gemm", 0, 7, T + 105, 30, correlation=2, stream=7, device=0),
        # A memcpy with no correlation arg, linked to its launch by an ac2g flow; string ts.
        x("cuda_runtime", "cudaMemcpyAsync", *cpu, T + 120, 5, correlation=3),
        {"ph": "s", "cat": "ac2g", "name": "ac2g", "id": 3, "pid": 1234, "tid": 1234,
         "ts": T + 120},
        {"ph": "f", "cat": "ac2g", "name": "ac2g", "id": 3, "pid": 0, "tid": 20, "ts": T + 140,
         "bp": "e"},
        {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoH (Device -> Pinned)", "pid": 0,
         "tid": 20, "ts": str(T + 140), "dur": "20"},
        # A memset with neither: assigned by time to the last step begun before it ran (6).
        x("gpu_memset", "Memset (Device)", 0, 20, T + 180, 10),
        # A kernel launched outside every ProfilerStep: step -1.
        x("cuda_runtime", "cudaLaunchKernel", *cpu, T + 210, 5, correlation=9),
        x("kernel", "tail", 0, 7, T + 220, 10, correlation=9, stream=7, device=0),
        # Noise a real trace has: other flows reusing ids, B/E/i events, events without dur.
        {"ph": "s", "cat": "fwdbwd", "name": "fwdbwd", "id": 3, "pid": 1234, "tid": 1234, "ts": T},
        {"ph": "B", "name": "b", "pid": 1234, "tid": 1234, "ts": T},
        {"ph": "E", "pid": 1234, "tid": 1234, "ts": T + 1},
        {"ph": "i", "s": "g", "name": "Record Window End", "pid": "", "tid": "", "ts": T + 500},
        {"ph": "X", "cat": "kernel", "name": "no dur", "pid": 0, "tid": 7, "ts": T + 300},
        x("gpu_user_annotation", "decode", 0, 7, T + 30, 105),
        42,
    ]
    return {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H200"}],
            "traceEvents": events}


def spans_on(run: dict, lane: str) -> list[tuple]:
    return [(s["phase"], s["step"], s["start_us"], s["end_us"])
            for s in run["spans"] if s["lane"] == lane]


def test_import_makes_one_lane_per_cuda_stream_labelled_from_thread_names():
    run = import_profiler_trace(json.dumps(cuda_trace()).encode())
    assert run["loop"] == "imported" and run["outputs"] == []
    assert run["gpu_lanes"] == ["GPU 0 stream 7", "GPU 0 stream 20"]
    cpu = "CPU thread 1234 (python3)"                  # the thread that launched the kernels
    assert run["lanes"] == [cpu, "GPU 0 stream 7", "GPU 0 stream 20"]
    short = LONG_NAME[:MAX_PHASE_CHARS - 3] + "..."
    assert spans_on(run, "GPU 0 stream 7") == [(short, 5, 30, 70), ("gemm", 5, 105, 135),
                                               ("tail", -1, 220, 230)]
    assert spans_on(run, "GPU 0 stream 20") == [("Memcpy DtoH (Device -> Pinned)", 6, 140, 160),
                                                ("Memset (Device)", 6, 180, 190)]
    # Its top-level events (aten::add and the first launch sit inside "decode"), by step.
    assert spans_on(run, cpu) == [("decode", 5, 10, 60), ("cudaLaunchKernel", 5, 95, 100),
                                  ("cudaMemcpyAsync", 6, 120, 125),
                                  ("cudaLaunchKernel", -1, 210, 215)]
    assert run["notes"][0] == {"key": "note_steps_profiler_step", "steps": 2, "marker": ""}


def test_import_metrics_measure_the_gpu_lanes():
    run = import_profiler_trace(json.dumps(cuda_trace()).encode())
    m = run["metrics"]
    # GPU window 30..230: busy 40 + 30 + 20 + 10 + 10; gaps 70-105, 135-140, 160-180, 190-220.
    # Three launches are too few to measure a launch's latency: gaps under the stated 5 µs
    # count as busy, so 135-140 (5 µs, between two kernels) does.
    assert run["joined_gap_us"] == 5.0
    assert {"key": "note_joined_fixed", "join": "5.0"} in run["notes"]
    assert m["gpu_busy_frac"] == pytest.approx(115 / 200)
    assert m["idle_gap_count"] == 3 and m["idle_us_total"] == pytest.approx(85)
    assert m["steps"] == 2
    assert m["tokens_per_s"] is None and m["output_tokens"] is None      # not in a trace
    json.dumps(m, allow_nan=False)


def test_import_reads_gzip_files_and_labels_the_run(tmp_path):
    path = tmp_path / "worker0.pt.trace.json.gz"
    path.write_bytes(gzip.compress(json.dumps(cuda_trace()).encode()))
    run = import_profiler_trace(path)
    assert run["label"] == "imported: worker0.pt.trace.json.gz"
    assert run == {**import_profiler_trace(json.dumps(cuda_trace()).encode()),
                   "label": run["label"]}


def test_import_labels_streams_from_kernel_args_without_metadata():
    events = [{"ph": "X", "cat": "kernel", "name": "k", "pid": 3, "tid": 9, "ts": 5, "dur": 1,
               "args": {"device": 1, "stream": 9}}]
    run = import_profiler_trace(json.dumps({"traceEvents": events}).encode())
    assert run["gpu_lanes"] == ["GPU 1 stream 9"] and run["lanes"] == ["GPU 1 stream 9"]
    assert run["spans"][0]["step"] == -1 and run["spans"][0]["start_us"] == 0


# ---- import: a real trace from torch.profiler ------------------------------------------------

@pytest.fixture(scope="module")
def cpu_profiler_trace(tmp_path_factory):
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile, record_function, schedule

    x = torch.ones(8, 8)
    with profile(activities=[ProfilerActivity.CPU],
                 schedule=schedule(wait=0, warmup=1, active=3, repeat=1)) as prof:
        for _ in range(5):
            with record_function("decode"):
                x = (x @ x).clamp(max=1.0)
            prof.step()
    path = tmp_path_factory.mktemp("prof") / "cpu.pt.trace.json"
    prof.export_chrome_trace(str(path))
    return path


def test_real_cpu_only_trace_is_refused_with_a_hint(cpu_profiler_trace):
    with pytest.raises(TraceImportError, match=r"ProfilerActivity\.CUDA"):
        import_profiler_trace(cpu_profiler_trace)


def test_real_trace_imports_when_its_ops_play_kernels(cpu_profiler_trace, tmp_path):
    # Real event shapes (metadata, args, ProfilerStep#N) with the CPU ops relabelled as kernels.
    trace = json.loads(cpu_profiler_trace.read_text())
    for event in trace["traceEvents"]:
        if event.get("cat") == "cpu_op":
            event["cat"] = "kernel"
    path = tmp_path / "relabelled.json"
    path.write_text(json.dumps(trace))
    run = import_profiler_trace(path)
    assert len(run["gpu_lanes"]) == 1
    assert run["notes"][0]["key"] == "note_steps_profiler_step" and run["notes"][0]["steps"] == 3
    steps = {s["step"] for s in run["spans"] if s["lane"] in run["gpu_lanes"]}
    assert len(steps - {-1}) == 3
    assert min(s["start_us"] for s in run["spans"]) >= 0          # the first step starts at 0
    assert 0 < run["metrics"]["gpu_busy_frac"] <= 1


# ---- import: errors a user can act on ---------------------------------------------------------

@pytest.mark.parametrize("data, message", [
    (b"{not json", "not a JSON trace"),
    (gzip.compress(b"{not json", mtime=0), "not a JSON trace"),
    (gzip.compress(b'{"traceEvents": []}', mtime=0)[:15], "broken gzip"),
    (b"\xff\xfe\x00\x81garbage", "not a JSON trace"),
    (b'{"displayTimeUnit": "ms"}', "without \"traceEvents\""),
    (b'{"traceEvents": {}}', "not a list"),
    (b'{"traceEvents": []}', "no GPU kernel, memcpy or memset events"),
])
def test_broken_inputs_give_clear_errors(data, message):
    with pytest.raises(TraceImportError, match=message):
        import_profiler_trace(data)


def test_files_over_the_size_limit_are_refused(tmp_path):
    path = tmp_path / "big.json"
    path.write_text(json.dumps(cuda_trace()))
    with pytest.raises(TraceImportError, match="the limit is 100 bytes"):
        import_profiler_trace(path, max_bytes=100)
    with pytest.raises(TraceImportError, match=r"the limit is 1\.0 KiB"):
        import_profiler_trace(path.read_bytes(), max_bytes=1024)
    # A small gzip that inflates past the limit is refused too.
    bomb = gzip.compress(b" " * 100_000 + b'{"traceEvents": []}')
    assert len(bomb) < 1000
    with pytest.raises(TraceImportError, match="inflates to more than"):
        import_profiler_trace(bomb, max_bytes=1000)


def test_missing_file_is_an_import_error(tmp_path):
    with pytest.raises(TraceImportError, match="cannot read trace file"):
        import_profiler_trace(tmp_path / "nope.json")
    assert issubclass(TraceImportError, ValueError)


# ---- import: our own exports come back as they were ---------------------------------------------

def test_a_record_exported_as_a_trace_imports_back_into_the_same_runs(tmp_path):
    from record.imported.profiler_import import import_trace
    from record.run_record import make_record

    runs = [small_run("normal"), small_run("overlap")]
    runs[1]["loop"], runs[1]["decode_steps"] = "multistep", 3
    record = make_record({"device_name": "cpu", "torch_version": "x"}, {}, runs)
    write_chrome_trace(record, tmp_path / "t.json.gz")
    back, env = import_trace(gzip.decompress((tmp_path / "t.json.gz").read_bytes()), "t.json.gz")
    assert env["device_name"] == "cpu" and env["torch_version"] == "x"
    assert [(r["loop"], r["decode_steps"]) for r in back] == [("normal", 1), ("multistep", 3)]
    for old, new in zip(record["runs"], back):
        assert new["lanes"] == old["lanes"] and new["gpu_lanes"] == old["gpu_lanes"]
        assert [(s["lane"], s["phase"], s["step"], s["start_us"], s["end_us"], s["req_ids"])
                for s in new["spans"]] == [(s["lane"], s["phase"], s["step"], s["start_us"],
                                            s["end_us"], s["req_ids"]) for s in old["spans"]]
        assert new["metrics"]["gpu_busy_frac"] == pytest.approx(old["metrics"]["gpu_busy_frac"])


def test_the_example_trace_in_the_docs_imports():
    from record.imported.given_file import load_any

    record = load_any(ROOT / "docs" / "example_trace.json")
    assert [run["loop"] for run in record["runs"]] == ["normal", "overlap"]
    assert all(run["metrics"]["gpu_busy_frac"] > 0 for run in record["runs"])


# ---- import: traces without ProfilerStep marks (SGLang's, vLLM's, transformers') -----------------

def _generate_like_trace(steps: int = 6, graphs: bool = False) -> dict:
    """A decode loop as torch.profiler records it without schedule(): per step the host launches
    an embedding kernel, four GEMMs, an argmax, then waits and post-processes; no step marks."""
    events, corr, t = [], 0, 1000.0
    for _ in range(steps):
        names = ["graph"] if graphs else ["indexSelectLargeIndex", *["gemm_f16"] * 4,
                                          "reduce_argmax"]
        for name in names:
            corr += 1
            launch = "cudaGraphLaunch" if graphs else "cudaLaunchKernel"
            events.append({"ph": "X", "cat": "cuda_runtime", "name": launch, "pid": 1, "tid": 1,
                           "ts": t, "dur": 4, "args": {"correlation": corr}})
            events.append({"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7,
                           "ts": t + 10, "dur": 8 if not graphs else 60,
                           "args": {"correlation": corr, "stream": 7, "device": 0}})
            t += 10
        events.append({"ph": "X", "cat": "cpu_op", "name": "aten::item", "pid": 1, "tid": 1,
                       "ts": t, "dur": 40, "args": {}})
        t += 100                                          # the host's per-step work
    return {"traceEvents": events}


@pytest.mark.parametrize("graphs, how", [(False, "note_steps_marker"),
                                         (True, "note_steps_graph_launch")])
def test_steps_are_found_without_profiler_step_marks(graphs, how):
    run = import_profiler_trace(json.dumps(_generate_like_trace(graphs=graphs)).encode())
    assert run["notes"][0]["key"] == how and run["notes"][0]["steps"] == 6
    if not graphs:
        assert run["notes"][0]["marker"] == "indexSelectLargeIndex"    # once per forward
    steps = {s["step"] for s in run["spans"] if s["lane"] in run["gpu_lanes"]}
    assert steps == set(range(1, 7))
    m = run["metrics"]
    # A trace measures no CPU work: the rest of its step is the GPU waiting for the host.
    assert m["steps"] == 6 and m["t_fwd_us"] > 0 and m["t_cpu_us"] is None
    assert m["gpu_wait_us"] > 0 and m["predicted_overlap_speedup"] is None
    if not graphs:          # six 8 µs kernels 2 µs apart: the gaps inside a forward are joined
        assert m["t_fwd_us"] == pytest.approx(6 * 8 + 5 * 2)
    assert run["lanes"][0].startswith("CPU thread")               # the launching thread drawn
    # No blocking call, no step's GPU work under the next: serial or overlapped cannot be told,
    # and the formula reads it as serial, saying so.
    assert run["loop_seen"]["verdict"] == "unknown"
    html = __import__("viz").metrics_html([run])
    assert 'data-metric="trace_predicted"' in html and "read as a serial loop" in html


# ---- import: hostile files get a clear message, in bounded time ---------------------------------

def _kernel(**changes):
    return {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10, "dur": 5,
            "args": {}, **changes}


def test_strange_fields_are_skipped_or_kept_without_errors():
    events = [_kernel(ts=float("nan")), _kernel(ts="inf"), _kernel(dur=-1), _kernel(tid=[1, 2]),
              _kernel(ts=30, pid={"a": 1}), _kernel(ts=50),
              {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#" + "9" * 5000,
               "pid": 1, "tid": 1, "ts": 0, "dur": 100}]
    data = json.dumps({"traceEvents": events}).replace("NaN", '"nan"').encode()
    run = import_profiler_trace(data)
    assert len(run["gpu_lanes"]) == 3                 # tid [1, 2] and pid {"a": 1} are lanes too
    assert all(math.isfinite(s["start_us"]) for s in run["spans"])
    json.dumps(run, allow_nan=False)


def test_deep_nesting_and_many_lanes_are_refused_quickly():
    started = time.process_time()     # this process's CPU time: other load on the machine adds none
    deep = b'{"traceEvents": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    with pytest.raises(TraceImportError, match="nests deeper"):
        import_profiler_trace(deep)
    lanes = [_kernel(tid=i, ts=i) for i in range(60_000)]
    with pytest.raises(TraceImportError, match="at most 64 lanes"):
        import_profiler_trace(json.dumps({"traceEvents": lanes}).encode())
    assert time.process_time() - started < 20     # ~1 s; the quadratic lane check took 52 s


# ---- import: real traces of real decode loops (studies/profile_traces.py, one H200) -------------

TRACES = ROOT / "tests" / "data" / "traces"


@pytest.mark.parametrize("name, how, cpu_bound, loop", [
    ("hf-generate-qwen05-b8.json.gz", "note_steps_marker", True, "serial"),   # transformers'
    ("engine-eager-qwen05-b8.json.gz", "note_steps_marker", True, "overlapped"),  # ours, eager
    ("engine-graph-qwen05-b8.json.gz", "note_steps_graph_launch", False, "overlapped"),  # graphs
])
def test_real_traces_without_step_marks_give_a_whole_lesson(name, how, cpu_bound, loop):
    """12 new tokens: a prefill, then 11 decode steps, 12 steps to find (the prefill's kernels, or
    its launch without a graph, differ from the decode steps' mark: it is the work before the
    first mark); the launching thread drawn; the article's terms where the trace allows them.
    Under the profiler an eager step is host-bound (the host's part is many times the forward),
    a graphed one is not."""
    from record.imported.given_file import load_any

    run = load_any(TRACES / name)["runs"][0]                   # a few seconds (bench: not timed here)
    assert run["notes"][0]["key"] == how and run["notes"][0]["steps"] == 12
    assert {"key": "note_steps_prefill"} in run["notes"]
    assert run["lanes"][0].startswith("CPU thread") and len(run["gpu_lanes"]) >= 1
    m = run["metrics"]
    assert m["steps"] == 12 and 0 < m["gpu_busy_frac"] < 1
    assert m["t_fwd_us"] > 0 and m["t_cpu_us"] is None and m["gpu_wait_us"] > 0
    assert (m["gpu_wait_us"] > 3 * m["t_fwd_us"]) == cpu_bound
    # Their loops, told from their timing: generate() blocks on the GPU every step; our engine
    # ran its overlap loop (studies/profile_traces.py), which never does.
    assert run["loop_seen"]["verdict"] == loop
    html = __import__("viz").metrics_html([run])
    assert 'data-block="trace"' in html
    assert ('data-metric="trace_predicted"' in html) == (loop == "serial")
    assert ("no overlap is predicted" in html) == (loop == "overlapped")
    assert "torch.profiler's own cost is inside this trace" in html
    # Gaps shorter than this trace's own launch latency (7-10 µs on the H200) are joined.
    assert 5 < run["joined_gap_us"] < 15
    assert any(note["key"] == "note_joined" for note in run["notes"])


# ---- import: the loop a trace shows (record.imported.trace_loop), the host's phases, the gaps ---

sys.path.insert(0, str(Path(__file__).resolve().parent))
from loop_traces import FORWARD_US, loop_trace, loop_trace_bytes  # noqa: E402


@pytest.mark.parametrize("named", [True, False])
def test_an_overlapped_trace_is_told_and_no_overlap_is_predicted_for_it(named):
    """Mini-SGLang's overlap loop, GPU-bound: the host never waits for the GPU to run dry, each
    forward runs on after the host has begun the next step, the next upload runs on its stream
    beside it; with the scheduler's functions named, its processing runs under the forward."""
    import viz

    run = import_profiler_trace(loop_trace_bytes(overlap=True, named=named))
    seen = run["loop_seen"]
    assert seen["verdict"] == "overlapped" and seen["steps"] == 8
    assert seen["waited"] == 0 and seen["late"] > 0.4 and seen["beside"] == 8
    assert (seen["under"] > 0.9) if named else seen["under"] is None
    m = run["metrics"]
    assert m["steady_step_us"] == pytest.approx(FORWARD_US, rel=0.02)   # the forward bounds it
    assert m["t_cpu_us"] is None and m["predicted_overlap_speedup"] is None
    for lang, said in (("en", "no overlap is predicted"), ("zh", "不对它预测重叠")):
        html = viz.metrics_html([run], lang)
        assert said in html and 'data-metric="trace_predicted"' not in html
        assert "T_sched + T_post" not in html.split("<table")[0]     # no CPU term in the formula
    titles = [a["text"] for a in viz.side_by_side_figure([run]).layout["annotations"]]
    assert "overlapped loop" in titles[0]


def test_a_serial_trace_waits_for_the_gpu_every_step_and_gets_a_prediction():
    import viz

    run = import_profiler_trace(loop_trace_bytes(overlap=False))
    seen = run["loop_seen"]
    assert seen == {**seen, "verdict": "serial", "waited": 8, "late": 0.0, "beside": 0}
    assert seen["under"] < 0.25          # its processing waits under the forward, then works alone
    m = run["metrics"]
    assert m["steady_step_us"] > FORWARD_US + 100            # the host's part adds to each step
    html = viz.metrics_html([run], "en")
    assert "A serial loop" in html and 'data-metric="trace_predicted"' in html
    assert "GPU waiting for the host" in html and "m_gpu_wait_us" not in html
    assert viz.side_by_side_figure([run]).layout["annotations"][0]["text"].count("serial loop")


@pytest.mark.parametrize("overlap", [False, True])
def test_a_host_that_polls_for_its_tokens_is_read_like_one_that_blocks(overlap):
    """The same loops waiting by cudaEventQuery in a loop: the serial one is still serial (each
    poll ends just after the GPU ran dry), the overlapped one still overlapped; a lone query is
    no wait."""
    from record.imported import trace_loop

    run = import_profiler_trace(loop_trace_bytes(overlap=overlap, poll=True))
    blocked = import_profiler_trace(loop_trace_bytes(overlap=overlap))
    assert run["loop_seen"]["verdict"] == ("overlapped" if overlap else "serial")
    assert run["loop_seen"]["waited"] == blocked["loop_seen"]["waited"]
    assert trace_loop.polls([(0.0, 1.0), (500.0, 501.0)]) == []
    assert trace_loop.polls([(0.0, 1.0), (10.0, 11.0), (20.0, 21.0), (200.0, 201.0)]) == [(0.0, 21.0)]


def test_the_cpu_lane_shows_the_hosts_named_phases_in_their_roles_colours():
    import viz

    run = import_profiler_trace(loop_trace_bytes(overlap=True))
    assert run["phase_roles"] == {"_schedule_next_batch": "schedule", "_forward": "launch",
                                  "_process_last_data": "process_last"}
    cpu = [s for s in run["spans"] if s["lane"] == "CPU thread 1 (python3)"]
    assert [s["phase"] for s in cpu[:3]] == ["_schedule_next_batch", "_forward",
                                             "_process_last_data"]
    # Building and launching step n belong to step n (before its graph launch), processing
    # the batch before to the step it runs in.
    assert [s["step"] for s in cpu[3:6]] == [2, 2, 2]
    figure = viz.side_by_side_figure([run])
    legend = {trace["name"] for trace in figure.data if trace.get("type") == "bar"}
    assert {"schedule", "launch", "process_last"} <= legend
    assert {"key": "note_phases", "phases": "_forward, _process_last_data, _schedule_next_batch"} \
        in run["notes"]


@pytest.mark.parametrize("name, cat, phase", [
    ("python/minisgl/scheduler/scheduler.py(138): _process_last_data", "python_function",
     ("_process_last_data", "process_last")),
    ("sglang/srt/managers/scheduler.py(1200): get_next_batch_to_run", "python_function",
     ("get_next_batch_to_run", "schedule")),
    ("vllm/v1/core/sched/scheduler.py(300): schedule", "python_function", ("schedule", "schedule")),
    ("gpu_model_runner: forward", "user_annotation", ("gpu_model_runner: forward", "launch")),
    ("my range", "user_annotation", ("my range", None)),       # any record_function range
    ("mylib/loop.py(10): _forward", "python_function", None),   # not a scheduler's
    ("ProfilerStep#3", "user_annotation", None),
])
def test_host_phases_are_the_schedulers_functions_and_record_function_ranges(name, cat, phase):
    from record.imported.host_phases import phase_of

    assert phase_of(name, cat) == phase


def test_a_phase_holding_phases_of_other_roles_is_drawn_as_them():
    """vLLM's execute_model holds its runner's preprocess, forward and postprocess ranges;
    Mini-SGLang's _schedule_next_batch holds _prepare_batch, a schedule phase too."""
    from record.imported.host_phases import phases

    vllm = phases([("vllm/v1/executor/abstract.py(80): execute_model", "python_function", 0, 100),
                   ("gpu_model_runner: preprocess", "user_annotation", 5, 30),
                   ("gpu_model_runner: forward", "user_annotation", 30, 60),
                   ("gpu_model_runner: postprocess", "user_annotation", 60, 90)])
    assert [(p.name, p.role) for p in vllm] == [("gpu_model_runner: preprocess", "schedule"),
                                                 ("gpu_model_runner: forward", "launch"),
                                                 ("gpu_model_runner: postprocess", "process_last")]
    mini = phases([("minisgl/scheduler/scheduler.py(219): _schedule_next_batch",
                    "python_function", 0, 50),
                   ("minisgl/scheduler/scheduler.py(204): _prepare_batch", "python_function",
                    10, 40)])
    assert [p.name for p in mini] == ["_schedule_next_batch"]


def test_gaps_shorter_than_a_launch_are_busy_not_idle_bands():
    """Our engine's graphed trace: thousands of sub-microsecond gaps between the kernels of each
    graph; joined, the steady window is busy, and the chart's idle bands are between forwards."""
    from record.imported.given_file import load_any
    from record.metrics import idle_gaps

    run = load_any(TRACES / "engine-graph-qwen05-b8.json.gz")["runs"][0]
    raw = idle_gaps(run["spans"], run["gpu_lanes"])
    m = run["metrics"]
    assert len(raw) > 6000 and m["idle_gap_count"] < len(raw) / 5
    assert m["steady_busy_frac"] > 0.95
    assert m["idle_gap_count"] == len(idle_gaps(run["spans"], run["gpu_lanes"],
                                                join_us=run["joined_gap_us"]))


def test_launch_latency_is_measured_on_launches_onto_an_idle_gpu():
    from record.imported.trace_loop import DEFAULT_JOIN_US, GpuWork, launch_latency_us

    work = [GpuWork(100.0 * i + 7, 100.0 * i + 9, 7, 100.0 * i) for i in range(30)]
    # a copy launched while a forward is pending on another stream: it waits, not measured
    work += [GpuWork(100.0 * i + 60, 100.0 * i + 61, 9, 100.0 * i + 2) for i in range(30)]
    work += [GpuWork(100.0 * i + 8, 100.0 * i + 59, 8, 100.0 * i + 1, direct=False)
             for i in range(30)]
    assert launch_latency_us(work) == (7.0, True)
    assert launch_latency_us(work[:5]) == (DEFAULT_JOIN_US, False)


@pytest.mark.parametrize("lang, late, host", [
    ("en", "ran after the host had begun step 6", "`_process_last_data` (process_last): "),
    ("zh", "是在主机开始第 6 步之后运行的", "`_process_last_data`（process_last）："),
])
def test_the_step_through_walks_an_imported_step(lang, late, host):
    import viz

    run = import_profiler_trace(loop_trace_bytes(overlap=True))
    caption = viz.step_caption(run, 5, lang)
    assert late in caption and host in caption and "no forward on the engine stream" not in caption
    figure = viz.step_figure(run, 5, lang)
    names = {shape.get("name") for shape in figure.layout["shapes"]}
    assert {"trace_step", "trace_late"} <= names
    outlined = [trace["name"] for trace in figure.data if trace.get("showlegend") is False
                and trace.get("meta") == "host"]
    assert sorted(outlined) == ["_forward", "_process_last_data", "_schedule_next_batch"]
    serial = import_profiler_trace(loop_trace_bytes(overlap=False))
    assert "ran after the host" not in viz.step_caption(serial, 5, "en")
    assert "Step 99" in viz.step_caption(serial, 99, "en")        # no GPU work: said so


def test_the_profilers_own_cost_is_said_with_the_traces_events_per_step():
    import viz

    run = import_profiler_trace(json.dumps(loop_trace(overlap=True)).encode())
    assert run["loop_seen"]["events_per_step"] == 7.0         # 3 python functions, 4 calls
    for lang, said in (("en", "torch.profiler's own cost is inside this trace"),
                       ("zh", "torch.profiler 自身的开销就在这个 trace 里")):
        assert said in viz.metrics_html([run], lang)


def test_every_trace_string_has_a_chinese_one_with_the_same_placeholders():
    import re

    from texts import t, traces

    assert set(traces.EN) == set(traces.ZH)
    for key in traces.EN:
        en, zh = t("en", key), t("zh", key)
        assert zh != en and re.search("[\u4e00-\u9fff]", zh), key
        assert sorted(re.findall(r"\{(\w+)", en)) == sorted(re.findall(r"\{(\w+)", zh)), key


# ---- import: SGLang's own annotated profile (engine.start_profile) --------------------------------

from loop_traces import SGLANG_FORWARD_US, sglang_trace_bytes  # noqa: E402


@pytest.mark.parametrize("overlap", [False, True])
def test_sglangs_own_marks_are_the_steps_and_its_annotations_the_phases(overlap):
    """SGLang's profile of either loop: one step per ``step[...]`` mark (a prefill, then decode
    steps), its batch size and tokens from the name; its scheduler's annotations on the CPU lane
    in their roles' colours, its mark of the forward inside run_batch, the host's wait for the
    GPU inside process_batch_result drawn as wait; the GPU rows' mirrored ranges are no work."""
    run = import_profiler_trace(sglang_trace_bytes(overlap))
    assert run["notes"][0] == {"key": "note_sglang_steps", "steps": 10,
                               "modes": "1 × EXTEND (bs=16, toks=512), 9 × DECODE (bs=16)"}
    assert [n for n, _ in run["step_starts"]] == list(range(1, 11))
    roles = run["phase_roles"]
    assert {name: roles[name] for name in ("scheduler.recv_requests",
                                           "scheduler.process_input_requests",
                                           "scheduler.get_next_batch_to_run",
                                           "scheduler.run_batch", "step[DECODE bs=16]",
                                           "scheduler.process_batch_result")} == {
        "scheduler.recv_requests": "receive", "scheduler.process_input_requests": "receive",
        "scheduler.get_next_batch_to_run": "schedule", "scheduler.run_batch": "launch",
        "step[DECODE bs=16]": "launch", "scheduler.process_batch_result": "process_last"}
    wait = "wait: cudaEventSynchronize" if overlap else \
        "wait: cudaMemcpyAsync + cudaStreamSynchronize"        # .tolist(): pageable, then sync
    assert roles[wait] == "wait" and "copy_result_to_cpu" not in roles   # inside run_batch
    cpu = [s for s in run["spans"] if s["lane"] == "CPU thread 1 (sglang::schedul)"]
    marks = [s for s in cpu if s["phase"].startswith("step[")]
    assert [(s["step"], s["batch_size"], s["num_tokens"]) for s in marks[:2]] == [
        (1, 16, 512), (2, 16, 0)]
    # Every step's forward was launched in it; the GPU rows' mirrored annotations drew nothing.
    forwards = [s for s in run["spans"] if s["phase"] == "graph_kernel"]
    assert [s["step"] for s in forwards] == list(range(1, 11))
    assert not any(s["phase"].startswith(("step[", "scheduler.")) for s in run["spans"]
                   if s["lane"] in run["gpu_lanes"])
    assert {"key": "note_sglang_overlap"} in run["notes"] if overlap else \
        {"key": "note_sglang_overlap"} not in run["notes"]


def _processed(run: dict) -> list[int]:
    """The step of each process_batch_result, in time order (its pieces around a wait, once)."""
    import itertools

    return [step for step, _ in itertools.groupby(
        s["step"] for s in run["spans"] if s["phase"] == "scheduler.process_batch_result")]


def test_sglangs_serial_loop_processes_the_result_it_just_launched():
    run = import_profiler_trace(sglang_trace_bytes(overlap=False))
    assert _processed(run) == list(range(1, 11))
    seen = run["loop_seen"]
    assert seen["verdict"] == "serial" and seen["waited"] == seen["steps"] == 8
    assert seen["under"] < 0.25          # its waits are no work; its work runs with the GPU idle
    assert run["metrics"]["steady_step_us"] > SGLANG_FORWARD_US + 100


def test_sglangs_overlap_loop_processes_step_n_minus_1_under_forward_n():
    """The overlap loop: the first iteration has nothing to process, then iteration n processes
    step n-1 after launching step n, and a last iteration with no batch processes the last; its
    timing reads overlapped; the step-through shows step n-1's processing after step n began."""
    import viz

    run = import_profiler_trace(sglang_trace_bytes(overlap=True))
    assert _processed(run) == list(range(1, 11))
    spans = run["spans"]
    launched_2 = next(s for s in spans if s["phase"] == "step[DECODE bs=16]" and s["step"] == 2)
    first_processing = next(s for s in spans if s["phase"] == "scheduler.process_batch_result")
    assert first_processing["step"] == 1 and first_processing["start_us"] > launched_2["end_us"]
    seen = run["loop_seen"]
    assert seen["verdict"] == "overlapped" and seen["waited"] == 0 and seen["beside"] == 8
    assert seen["under"] > 0.5           # its processing runs under the next forward
    assert run["metrics"]["predicted_overlap_speedup"] is None
    caption = viz.step_caption(run, 5, "en")
    assert "ran after the host had begun step 6" in caption
    assert "`scheduler.process_batch_result` (process_last)" in caption
    assert "`wait: cudaEventSynchronize` (wait)" in caption
    assert caption.count("scheduler.process_batch_result") == 1       # its pieces said once


def test_the_sglang_notes_say_the_steps_and_phases_are_its_own_in_both_languages():
    import viz
    from texts import t

    run = import_profiler_trace(sglang_trace_bytes(overlap=True))
    for lang, said in (("en", "The steps and phases are SGLang's own annotations"),
                       ("zh", "这些步和阶段都是 SGLang 自己的标注")):
        html = viz.metrics_html([run], lang)
        found = html.index(f"<summary>{t(lang, 'trace_found')}</summary>")
        assert html.index(said) < found > html.index("copy_result_to_cpu")   # said at once
    assert all(note["key"] != "note_phases" for note in run["notes"])


SGLANG_TRACES = [  # SGLang 0.5.17's own profile of its serial loop (studies/peers/sglang/runner.py), one
    # H200, Qwen2.5-0.5B shape: B=1, 16 new tokens; B=16, 128 new tokens cut to the events
    # before its 41st loop iteration (the file is 1.7 MB whole)
    ("sglang-normal-b1.trace.json.gz", 16, "1 × EXTEND (bs=1, toks=32), 15 × DECODE (bs=1)"),
    ("sglang-normal-b16-first40.trace.json.gz", 40,
     "1 × EXTEND (bs=16, toks=512), 39 × DECODE (bs=16)"),
]


@pytest.mark.parametrize("name, steps, modes", SGLANG_TRACES)
def test_real_sglang_traces_read_as_its_serial_loop_step_by_step(name, steps, modes):
    """One step per forward (graph launches gave 2.5 a forward: 40 steps for B=1), each
    read as serial: the host waits in every step's process_batch_result for the forward's
    tokens (a copy into pageable memory)."""
    from record.imported.given_file import load_any

    record = load_any(TRACES / name)
    run = record["runs"][0]
    assert run["notes"][0] == {"key": "note_sglang_steps", "steps": steps, "modes": modes}
    assert run["metrics"]["steps"] == steps
    seen = run["loop_seen"]
    assert seen["verdict"] == "serial" and seen["waited"] == seen["steps"] == steps - 2
    assert _processed(run)[:steps] == list(range(1, steps + 1))
    assert run["phase_roles"]["wait: cudaMemcpyAsync + cudaStreamSynchronize"] == "wait"
    assert {"key": "note_sglang_overlap"} not in run["notes"]
    assert record["env"]["device_name"] == "NVIDIA H200"


def test_a_real_sglang_overlap_trace_reads_as_its_overlap_loop():
    """SGLang 0.5.17's own profile of its overlap loop (studies/peers/sglang/runner.py, one H200,
    Qwen2.5-0.5B shape, B=1, 16 new tokens): one step per forward, 17 of them (the overlap loop
    runs one forward past the last token, lag one), its phases under SGLang's names, and read as
    overlapped: most steps' host work runs beside a forward instead of waiting for it."""
    from record.imported.given_file import load_any

    record = load_any(TRACES / "sglang-overlap-b1.trace.json.gz")
    run = record["runs"][0]
    assert run["notes"][0] == {"key": "note_sglang_steps", "steps": 17,
                               "modes": "1 × EXTEND (bs=1, toks=32), 16 × DECODE (bs=1)"}
    assert run["metrics"]["steps"] == 17
    phases = next(n for n in run["notes"] if n["key"] == "note_sglang_phases")["phases"]
    for name in ("scheduler.recv_requests", "scheduler.get_next_batch_to_run",
                 "scheduler.run_batch", "scheduler.process_batch_result"):
        assert name in phases
    seen = run["loop_seen"]
    assert seen["verdict"] == "overlapped" and seen["waited"] < seen["steps"] / 2
    assert {"key": "note_sglang_overlap"} in run["notes"]


@pytest.mark.parametrize("closing", [False, True])
def test_a_prefill_before_the_first_mark_is_a_step_only_where_the_marks_open_forwards(closing):
    """transformers' generate without step marks: the prefill's embedding kernel differs from a
    decode step's, so a mark opening forwards (the decode embedding) misses it and the work
    before the first mark is its step; a mark closing them (the lm_head GEMM, which the prefill
    runs too) counts it already."""
    events, corr, t = [], 0, 1000.0
    for n in range(6):
        kernels = ["prefill_embed" if n == 0 else "decode_embed", "body", "body", "lm_head"]
        if closing:                           # no embedding kernel repeats: none marks a step
            kernels[0] = f"embed_{n}"
        for name in kernels:
            corr += 1
            events += [{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1,
                        "tid": 1, "ts": t, "dur": 4, "args": {"correlation": corr}},
                       {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7,
                        "ts": t + 10, "dur": 60 if n == 0 else 20,
                        "args": {"correlation": corr, "stream": 7, "device": 0}}]
            t += 70 if n == 0 else 30
        t += 100
    run = import_profiler_trace(json.dumps({"traceEvents": events}).encode())
    assert run["notes"][0]["marker"] == ("lm_head" if closing else "decode_embed")
    assert run["notes"][0]["steps"] == 6
    assert ({"key": "note_steps_prefill"} in run["notes"]) != closing


def test_a_threads_ops_less_than_a_launch_apart_are_one_span_and_a_wait_stays_apart():
    """An eager forward launches a thousand ops a step: those closer than a launch (no host
    could have run anything between them) are drawn as one span, named by the longest and how
    many more it holds; an op that waited for the GPU keeps its own span and name."""
    events, corr = [], 0
    for step in range(4):
        t = 1000.0 + 1000 * step
        corr += 1
        events += [{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1,
                    "tid": 1, "ts": t, "dur": 3, "args": {"correlation": corr}},
                   {"ph": "X", "cat": "kernel", "name": "embed", "pid": 0, "tid": 7,
                    "ts": t + 10, "dur": 50, "args": {"correlation": corr, "stream": 7}}]
        for i, name in enumerate(["aten::embedding", "aten::linear", "aten::add"]):
            events.append({"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1,
                           "ts": t + 5 + 30 * i, "dur": 28 if i < 2 else 4, "args": {}})
        events += [{"ph": "X", "cat": "cpu_op", "name": "aten::item", "pid": 1, "tid": 1,
                    "ts": t + 90, "dur": 100, "args": {}},
                   {"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamSynchronize", "pid": 1,
                    "tid": 1, "ts": t + 95, "dur": 90, "args": {}}]
    run = import_profiler_trace(json.dumps({"traceEvents": events}).encode())
    assert run["joined_gap_us"] == 5.0                     # too few launches: the default
    cpu = [(s["step"], s["phase"]) for s in run["spans"] if s["lane"] == "CPU thread 1"]
    # the launch call, then embedding, linear and add, each 2 µs after the last: one span
    assert cpu[:2] == [(1, "aten::embedding +3"), (1, "aten::item")]
    assert len(cpu) == 8


def test_two_traces_far_from_the_prediction_say_what_made_the_difference(monkeypatch):
    """A serial trace beside an overlapped one whose forward is shorter: the measured ratio is
    above the serial trace's prediction, and the note says why in the terms a trace has."""
    import loop_traces

    import viz

    serial = import_profiler_trace(loop_trace_bytes(overlap=False))
    monkeypatch.setattr(loop_traces, "FORWARD_US", 0.6 * FORWARD_US)     # a shorter forward
    overlapped = import_profiler_trace(loop_trace_bytes(overlap=True))
    monkeypatch.undo()
    serial["source"], overlapped["source"] = "serial.json", "overlap.json"
    for lang, said in (("en", "the GPU's busy time (T_fwd) was"), ("zh", "GPU 每步忙碌（T_fwd）")):
        html = viz.metrics_html([serial, overlapped], lang)
        why = html[html.index('data-block="traces-measured"'):]
        assert 'data-block="why" data-direction="above"' in why and said in why
    same = import_profiler_trace(loop_trace_bytes(overlap=True))
    assert 'data-block="why"' not in viz.metrics_html([serial, same], "en")   # within 10%


def test_reading_a_file_pauses_the_cycle_collector_and_restores_it(tmp_path):
    import gc

    from record.imported.given_file import collector_paused, load_any

    path = tmp_path / "t.json"
    path.write_bytes(loop_trace_bytes(overlap=True))
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        load_any(path)
        assert not gc.isenabled()                          # left as it was found
    finally:
        gc.enable()


def test_our_serial_run_beside_a_trace_gets_the_same_explanation():
    """Our normal run as the baseline (its prediction from its T_fwd and T_cpu) beside a trace
    whose step is far shorter: the note names the trace's shorter forward and its wait."""
    from viz.formula import trace_why_html

    ours = {"loop": "normal", "decode_steps": 1, "metrics": {
        "steady_step_us": 480.0, "t_fwd_us": 300.0, "t_cpu_us": 180.0, "tokens_per_s": 10.0,
        "gpu_busy_frac": 0.6, "idle_us_total": 100.0}}
    trace = {"loop": "imported", "decode_steps": 1, "loop_seen": {"verdict": "overlapped"},
             "metrics": {"steady_step_us": 200.0, "t_fwd_us": 180.0, "gpu_wait_us": 20.0,
                         "t_cpu_us": None, "tokens_per_s": None, "gpu_busy_frac": 0.9,
                         "idle_us_total": 10.0}}
    said = trace_why_html(ours, trace, "normal", "sglang", "en")
    assert 'data-direction="above"' in said and "2.40×, 50% more than the 1.60×" in said
    assert said.index("the GPU's busy time (T_fwd) was 0.18 ms") < said.index(
        "the GPU still waited 0.02 ms")                    # largest first
    assert "GPU 每步仍要等待主机 0.02 ms" in trace_why_html(ours, trace, "normal", "sglang", "zh")
