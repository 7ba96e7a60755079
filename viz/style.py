"""One colour per phase, the same in every chart, so a reader learns the legend once: CPU phases
blues and purples (neighbours of different lightness, also for colour blindness), scheduler-stream
phases greens, engine-stream phases oranges and browns. GPU idle is the only red thing on the page;
time with no request in the system is a plain light grey band."""

from __future__ import annotations

from record.schema import Phase

PHASE_COLORS: dict[str, str] = {
    # cpu: the scheduler thread
    Phase.RECEIVE: "#a6dcef",
    Phase.SCHEDULE: "#08306b",
    Phase.LAUNCH: "#c994c7",
    Phase.WAIT: "#c9c9c9",
    Phase.PROCESS_LAST: "#88419d",
    # scheduler_stream: metadata uploads (and, with result_copy_stream="scheduler", the copy)
    Phase.UPLOAD: "#31a354",
    Phase.COPY: "#a1d99b",                 # the result copy, on whichever stream it ran
    # the engine stream: forward and sampling (and, with result_copy_stream="engine", the copy)
    Phase.PREFILL: "#a63603",
    Phase.DECODE: "#fd8d3c",
    Phase.SAMPLE: "#8c6d31",
    Phase.RESOLVE: "#fdd0a2",              # a peer's token gather before its forward
    # imported torch.profiler traces
    "kernel": "#f16913",
    "memcpy": "#41ab5d",
    "memset": "#c7e9c0",
    "cpu_op": "#4292c6",
    "runtime": "#9e9ac8",
    "user_annotation": "#bcbddc",
}

FONT = {"family": "Inter, Segoe UI, Noto Sans SC, sans-serif", "size": 12}
NEUTRAL_COLOR = "#969696"
OTHER_PHASE = "other"

IDLE_FILL = "rgba(214, 39, 40, 0.16)"
IDLE_LINE = "rgba(214, 39, 40, 0.75)"
IDLE_FILL_OPAQUE = "#f3bebe"   # a whole run's bands: opaque, or plotly may drop one under a pixel
QUIET_FILL = "rgba(150, 150, 150, 0.16)"   # no request in the system (not GPU idleness)
IDLE_SUM = "#d62728"       # a run's GPU idle gaps laid end to end (the red of the bands, solid)
BUSY_SUM = "#636363"       # ... followed by its GPU busy time
BUSY_COLOR = "#a63603"     # a panel's badge: the machine was too busy to compare (not red)
ROW_BACKGROUND = "#f0f0f0" # the idle-over-time row where the GPU was busy (its full height: 100%)


def phase_color(phase: str) -> str:
    """The phase's colour; a neutral grey for phases the legend does not know."""
    return PHASE_COLORS.get(phase, NEUTRAL_COLOR)


# The KV-memory chart's pages: in use, held only by the prefix cache, free (never red: GPU idle).
MEMORY_COLORS: dict[str, str] = {
    "used": "#6a51a3",
    "cached": "#41b6c4",
    "free": "#e7e7e7",
}
RETRACTION_COLOR = "#222222"
