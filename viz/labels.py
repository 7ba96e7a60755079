"""What a chart calls a run and its lanes: the lane order and labels, the runs' short names in
the reader's language, and a run's title."""

from __future__ import annotations

import html

from record.gpu_time import GpuTime, gpu_time
from record.imported import imported, loop_verdict
from record.kernel_lanes import drawn_kernel_lane, is_kernel_lane, kernel_lane_streams, stream_number
from record.metrics import busy_fraction
from record.run_record import loop_of
from record.schema import ENGINE_LOOPS, LANES, OURS_DETAIL, Loop, RunDict
from record.window import time_range
from texts import count, t


def ordered_lanes(run: RunDict) -> list[str]:
    """Our lanes first (when present), then the others in the run's order; a kernel lane with
    no kernel of its own here is left out."""
    listed = list(run.get("lanes") or [])
    seen = list(dict.fromkeys(listed + [s["lane"] for s in run.get("spans", [])]))
    standard = [lane for lane in LANES if lane in seen]
    return standard + [lane for lane in seen if lane not in LANES
                       and (not is_kernel_lane(lane) or drawn_kernel_lane(run, lane))]


def lane_ticks(run: RunDict, lang: str) -> list[str]:
    """The labels of a run's lanes, top to bottom, as its timeline draws them."""
    return [_tick(run, lane, lang) for lane in ordered_lanes(run) or LANES]


def _tick(run: RunDict, lane: str, lang: str) -> str:
    """A lane's name; a kernel lane's names its stream and how busy its kernels kept it."""
    if not is_kernel_lane(lane):
        return lane_label(lane, lang)
    stream = kernel_lane_streams(run).get(lane)
    name = (t(lang, "lane_kernels_of").format(stream=lane_label(stream, lang)) if stream
            else t(lang, "lane_kernels_stream").format(number=html.escape(stream_number(lane))))
    spans = [s for s in run.get("spans", []) if s["lane"] == lane]
    t_start, t_end = time_range(spans)
    if "window" in run:
        t_start, t_end = run["window"]["t_start_us"], run["window"]["t_end_us"]
        spans = [s for s in spans if s["end_us"] > t_start and s["start_us"] < t_end]
    if t_end <= t_start or not spans:   # nothing captured here: no busy figure, not "0.0%"
        return name
    busy = 100.0 * busy_fraction(spans, [lane], (t_start, t_end))
    return t(lang, "lane_busy").format(lane=name, busy=busy)


def lane_label(lane: str, lang: str) -> str:
    """Our lanes in the reader's language; any other (from a file) escaped."""
    if lane in LANES:
        return t(lang, f"lane_{lane}")
    if lane.startswith("CPU thread "):      # a host thread of an imported trace
        return t(lang, "lane_cpu_thread").format(thread=html.escape(lane[len("CPU thread "):]))
    return html.escape(lane)


# The parts of a run label's detail said in the reader's language (the rest are names).
DETAIL_KEYS = {"CUDA graphs": "detail_graphs", "eager": "detail_eager",
               "compiled": "detail_compiled", "triton attention": "detail_triton",
               "FlashInfer attention": "detail_flashinfer",
               "separate device process": "detail_device_process"}


def label_detail(run: RunDict) -> str:
    """A run's engine and setup from its label: "overlap (Mini-SGLang, H200)" -> "Mini-SGLang, H200"."""
    return str(run.get("label") or "").partition(" (")[2].rstrip(")")


def _detail_word(part: str, lang: str) -> str:
    """One part of a label's detail in the reader's language (a name stays as it is)."""
    if part.startswith(OURS_DETAIL + " "):                # our engine beside the peers
        return t(lang, "detail_ours") + part[len(OURS_DETAIL):]
    return t(lang, DETAIL_KEYS[part]) if part in DETAIL_KEYS else part


def display_labels(runs: list[RunDict], lang: str = "en") -> list[str]:
    """Short names for charts and tables in the reader's language; a label's detail ("overlap
    (CPU, ...)") stays only where the runs' differ, less what every detail says."""
    labels = [str(run.get("label") or "run") for run in runs]
    parts = [[p.strip() for p in label_detail(run).split(",") if p.strip()] for run in runs]
    keep_details = len(runs) > 1 and len({tuple(p) for p in parts if p}) > 1
    shared = set.intersection(*(set(p) for p in parts if p)) if keep_details else set()
    names = []
    for run, label, detail in zip(runs, labels, parts):
        loop, k = loop_of(run)
        if loop in ENGINE_LOOPS:
            name = t(lang, f"loopname_{loop}").format(k=k)
        elif loop == Loop.IMPORTED and imported(run).get("source"):
            name = t(lang, "loopname_imported").format(source=imported(run).get("source"))
        else:
            name = label.partition(" (")[0]
        said = ", ".join(_detail_word(p, lang) for p in detail if p not in shared)
        names.append(f"{name} ({said})" if keep_details and said else name)
    # Runs of two records side by side may share a loop's name: those name their record.
    sources = [imported(run).get("source") for run in runs]
    return [f"{name} · {source}" if names.count(name) > 1 and source
            and loop_of(run)[0] != Loop.IMPORTED else name
            for name, run, source in zip(names, runs, sources)]


def busy_text(time: GpuTime, lang: str) -> str:
    """"95.2% all stream lanes, 93.0% engine stream alone" (a trace: its GPU lanes only)."""
    if time.busy_both is None:
        return "–"
    both = f"{100 * time.busy_both:.1f}"
    if time.busy_engine is None:
        return t(lang, "busy_gpu_lanes").format(both=both)
    return t(lang, "busy_two_ways").format(both=both, engine=f"{100 * time.busy_engine:.1f}")


def loop_tag(run: RunDict, lang: str) -> str:
    """" · overlapped loop" / " · serial loop" for an imported trace whose timing says which."""
    if loop_of(run)[0] != Loop.IMPORTED:
        return ""
    verdict = loop_verdict(run)
    return t(lang, f"tag_{verdict}") if verdict in ("overlapped", "serial", "unknown") else ""


def run_title(run: RunDict, label: str, lang: str) -> tuple[str, str]:
    """A run's title in two parts: its idle gaps, and its busy share."""
    time = gpu_time(run)
    key = "run_title" if time.active_share is None else "run_title_active"
    label += loop_tag(run, lang)
    head = t(lang, key).format(label=label, idle=f"{time.idle_us / 1000.0:.1f}",
                               gaps=count(lang, time.gap_count, "gaps"),
                               share=f"{100 * (time.active_share or 0.0):.0f}")
    return head, t(lang, "run_busy").format(busy=busy_text(time, lang))
