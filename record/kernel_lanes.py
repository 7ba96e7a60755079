"""Kernel lanes named after the stream that ran them.

A torch.profiler capture names each CUDA stream's lane by a number ("kernels: stream 33"). A kernel
lane is matched by what it holds: the one with the most compute kernels is the forward's stream
(``engine_stream``); of the others, the one with the most host-to-device copies is the upload's,
the one with the most device-to-host copies the copy's. A lane of memory copies alone draws again
what its stream's own lane draws, so it is not drawn (``drawn_kernel_lane``)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from record.schema import FORWARD_PHASES, Phase, RunDict, SpanDict

PREFIX = "kernels"                 # every kernel lane's name starts so ("kernels: stream 33")
COMPUTE, TO_DEVICE, TO_HOST, OTHER_COPY = "compute", "to_device", "to_host", "other_copy"
# What kind of kernel each of our stream lanes' phases says it runs.
HOME_PHASES = {COMPUTE: set(FORWARD_PHASES), TO_DEVICE: {Phase.UPLOAD}, TO_HOST: {Phase.COPY}}


def is_kernel_lane(lane: str) -> bool:
    return lane.startswith(PREFIX)


def stream_number(lane: str) -> str:
    """"33" for "kernels: stream 33"."""
    return lane.rpartition(" ")[2]


def kernel_kind(name: str) -> str:
    """A profiler event's kind by its name ("Memcpy HtoD (Pinned -> Device)": a copy to device)."""
    lowered = name.lower()
    if "memcpy htod" in lowered:
        return TO_DEVICE
    if "memcpy dtoh" in lowered:
        return TO_HOST
    if "memcpy" in lowered or "memset" in lowered:
        return OTHER_COPY
    return COMPUTE


def _kinds(spans: Iterable[SpanDict]) -> dict[str, Counter[str]]:
    kinds: dict[str, Counter[str]] = {}
    for span in spans:
        if is_kernel_lane(span["lane"]):
            kinds.setdefault(span["lane"], Counter())[kernel_kind(str(span["phase"]))] += 1
    return kinds


def drawn_kernel_lane(run: RunDict, lane: str) -> bool:
    """Whether a kernel lane holds a compute kernel in ``run`` (a window, or a whole run)."""
    kinds = _kinds(s for s in run.get("spans", []) if s["lane"] == lane)
    return bool(kinds.get(lane, Counter())[COMPUTE])


def kernel_lane_streams(run: RunDict) -> dict[str, str]:
    """Each kernel lane that can be matched -> the lane of our stream that ran it."""
    spans = run.get("spans", [])
    home: dict[str, str] = {}
    for kind, phases in HOME_PHASES.items():
        lanes = Counter(s["lane"] for s in spans if s["phase"] in phases)
        if lanes:
            home[kind] = lanes.most_common(1)[0][0]
    kinds = _kinds(spans)
    found: dict[str, str] = {}
    for kind in (COMPUTE, TO_DEVICE, TO_HOST):
        stream = home.get(kind)
        holders = [lane for lane, counts in kinds.items() if counts[kind] and lane not in found]
        if stream is None or stream in found.values() or not holders:
            continue
        found[max(holders, key=lambda lane: kinds[lane][kind])] = stream
    return found
