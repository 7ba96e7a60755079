"""Kernel lanes say which stream ran their kernels, and only lanes with kernels are drawn.

A torch.profiler capture names its lanes by CUDA stream numbers ("kernels: stream 33"); the
eager recording of section 8 had three such lanes, two of them holding nothing but a few
1 µs memory copies that no view could show. Now each kernel lane is named after our stream that
ran it, read from what it holds against what the record's own lanes ran, and a lane of copies
alone (its stream's own lane draws them as ``upload`` and ``copy``) is left out.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("plotly", reason="viz needs plotly")

import viz  # noqa: E402
from record.kernel_lanes import drawn_kernel_lane, kernel_kind, kernel_lane_streams  # noqa: E402
from record.run_record import load_record  # noqa: E402
from record.schema import Lane  # noqa: E402
from viz.labels import lane_ticks, ordered_lanes  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
EAGER = ROOT / "assets" / "recorded" / "h200-smollm-eager-kernels.json"


def _span(lane: str, phase: str, start: float, end: float, step: int = 1) -> dict:
    return {"lane": lane, "phase": phase, "step": step, "start_us": start, "end_us": end}


def _run(copy_lane: str = Lane.COPY_STREAM) -> dict:
    """One step: an upload, a forward of two kernels, the result copy, and a profiler capture
    of it on three streams (7: the forward's kernels, 9: the upload's copy, 11: the result's)."""
    spans = [_span(Lane.SCHEDULER_STREAM, "upload", 0, 10),
             _span(Lane.ENGINE_STREAM, "decode", 10, 100),
             _span(copy_lane, "copy", 100, 110),
             _span("kernels: stream 9", "Memcpy HtoD (Pinned -> Device)", 2, 3),
             _span("kernels: stream 7", "void gemv_kernel<bf16>", 20, 40),
             _span("kernels: stream 7", "at::native::elementwise_kernel", 50, 60),
             _span("kernels: stream 11", "Memcpy DtoH (Device -> Pinned)", 102, 104)]
    lanes = [Lane.CPU, Lane.SCHEDULER_STREAM, Lane.ENGINE_STREAM, Lane.COPY_STREAM,
             "kernels: stream 7", "kernels: stream 9", "kernels: stream 11"]
    return {"mode": "normal", "loop": "normal", "label": "normal", "lanes": lanes,
            "gpu_lanes": lanes[1:4], "spans": spans, "outputs": [], "metrics": {}}


def test_a_kernel_lane_is_matched_to_the_stream_that_ran_what_it_holds():
    assert kernel_lane_streams(_run()) == {"kernels: stream 7": Lane.ENGINE_STREAM,
                                           "kernels: stream 9": Lane.SCHEDULER_STREAM,
                                           "kernels: stream 11": Lane.COPY_STREAM}
    assert [kernel_kind(name) for name in ("Memcpy HtoD (Pinned -> Device)", "Memset (Device)",
                                           "Memcpy DtoH (Device -> Pinned)", "ampere_gemm")] \
        == ["to_device", "other_copy", "to_host", "compute"]


def test_a_stream_is_claimed_once():
    """The copy on the engine stream (Mini-SGLang's place): no other lane is the engine's."""
    run = _run(copy_lane=Lane.ENGINE_STREAM)
    assert kernel_lane_streams(run)["kernels: stream 7"] == Lane.ENGINE_STREAM
    assert "kernels: stream 11" not in kernel_lane_streams(run)


def test_only_lanes_with_kernels_are_drawn_and_they_say_their_stream_in_both_languages():
    run = _run()
    assert drawn_kernel_lane(run, "kernels: stream 7")
    assert not drawn_kernel_lane(run, "kernels: stream 9")         # a copy alone
    assert ordered_lanes(run)[-1] == "kernels: stream 7" and len(ordered_lanes(run)) == 5
    # busy over the time its kernels span (30 of 40 µs): the capture's window, not the run's
    assert lane_ticks(run, "en")[-1] == "kernels: engine stream · busy 75.0%"
    assert lane_ticks(run, "zh")[-1] == "kernel：engine stream · 忙碌 75.0%"


def test_a_lane_that_cannot_be_matched_keeps_its_number_in_the_readers_language():
    run = _run()
    run["spans"] = [s for s in run["spans"] if s["lane"] != Lane.ENGINE_STREAM]
    assert lane_ticks(run, "en")[-1].startswith("kernels: stream 7 · busy")
    assert lane_ticks(run, "zh")[-1].startswith("kernel：第 7 号 stream · 忙碌")


@pytest.mark.parametrize("window", [None, (25, 26)])
def test_the_eager_recording_draws_one_kernel_lane_the_engine_streams(window):
    """Section 8's recording, as the page opens it (steps 25-26) and whole."""
    runs = load_record(EAGER)["runs"]
    figure = viz.side_by_side_figure(runs, window=window).to_dict()
    ticks = [tick for key, axis in figure["layout"].items() if key.startswith("yaxis")
             for tick in axis.get("ticktext") or []]
    kernels = [tick for tick in ticks if tick.startswith("kernels")]
    assert len(kernels) == 2 and all(t.startswith("kernels: engine stream · busy ") for t in kernels)
    assert not any("stream 29" in tick or "stream 37" in tick for tick in ticks)
