"""Where the recorder's cost in the serial loop goes: CPU spans, GPU events, or both.

    python scripts/recorder_split.py [--batches 1 64 --pairs 9]     # on a machine with CUDA

``python -m bench --overhead`` measures the whole recorder (spans on vs off). This splits it, on
the normal loop where every microsecond of the scheduler thread is GPU idle time: runs with
nothing recorded, with only the CPU lane's spans (the device records no events), with only the
GPU's events (the scheduler thread's spans are dropped at ``add_cpu``), and with both,
interleaved so drift hits all alike; and with the GPU's events recorded but dropped at once
(given back to the pool, nothing kept until the run ends), which tells the cost of keeping them
from the cost of recording them. Printed: median decode tok/s [min-max] of each, what each adds to
one decode step in microseconds (from the medians), and the median length of each CPU phase of a
step (where the scheduler thread's spans are kept): what the host pays inside ``schedule`` (the
upload's events) and ``launch`` (the forward's and the copy's) against what the GPU pays, which
lengthens ``wait``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from record.recorder import Timeline  # noqa: E402


class CpuOnly(Timeline):
    """The scheduler thread records; the device is handed a disabled timeline (no events)."""


class GpuOnly(Timeline):
    """The device records its events; the scheduler thread's spans are dropped."""

    def add_cpu(self, *args, **kwargs) -> None:
        pass


class EventsDropped(Timeline):
    """Both record; the device's event groups are given back at once instead of kept."""

    def add_gpu_group(self, events, spans, step, req_ids=(), release=None) -> None:  # noqa: ARG002
        if release is not None:
            release(events)


PHASES = ("schedule", "launch", "wait", "process_last")


def phase_medians(spans) -> dict[str, float]:
    """Median length (us) of each CPU phase over the run's steps."""
    out = {}
    for phase in PHASES:
        lengths = [s.end_us - s.start_us for s in spans if s.lane == "cpu" and s.phase == phase]
        out[phase] = statistics.median(lengths) if lengths else float("nan")
    return out


def main() -> int:
    from bench.decode import fresh
    from engine import Engine, EngineConfig, SamplingParams
    from engine.devices.cuda import CudaDevice
    from engine.workloads import make_prompts

    parser = argparse.ArgumentParser()
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 64])
    parser.add_argument("--pairs", type=int, default=9)
    parser.add_argument("--new-tokens", type=int, default=256)
    args = parser.parse_args()

    begin = CudaDevice.begin_run

    def begin_run(self, timeline):
        begin(self, Timeline(enabled=False) if isinstance(timeline, CpuOnly) else timeline)

    CudaDevice.begin_run = begin_run
    variants = {"off": lambda: Timeline(enabled=False), "cpu spans only": CpuOnly,
                "gpu events only": GpuOnly, "both, events dropped": EventsDropped,
                "both (the recorder)": Timeline}
    print("normal loop, bundled model, CUDA graphs, 32-token prompts; decode tok/s median "
          "[min-max] and microseconds added to a step\n")
    print("| B | recorded | tok/s | per step | " + " | ".join(PHASES) + " |\n|---|---|---|---|"
          + "---|" * len(PHASES))
    for batch in args.batches:
        cfg = EngineConfig(model="bundled", device="cuda", cuda_graph=True, max_batch_size=batch,
                           max_seq_len=32 + args.new_tokens + 16)
        with Engine(cfg) as eng:
            prompts = make_prompts(eng.tokenizer, batch, 32, 0, eng.spec.vocab_size)
            params = SamplingParams(max_new_tokens=args.new_tokens, ignore_eos=True)
            for make in variants.values():                            # warm every variant
                eng.generate(prompts, params, overlap=False, timeline=make())
            speeds: dict[str, list[float]] = {name: [] for name in variants}
            phases: dict[str, list[dict[str, float]]] = {name: [] for name in variants}
            for _ in range(args.pairs):
                for name, make in variants.items():
                    r = fresh(eng).generate(prompts, params, overlap=False, timeline=make())
                    speeds[name].append(sum(len(o.token_ids) for o in r.outputs) / r.wall_s)
                    phases[name].append(phase_medians(r.timeline))
        off = statistics.median(speeds["off"])
        for name, values in speeds.items():
            med = statistics.median(values)
            step_us = batch * 1e6 * (1 / med - 1 / off)
            cells = [statistics.median(p[ph] for p in phases[name]) for ph in PHASES]
            print(f"| {batch} | {name} | {med:.0f} [{min(values):.0f}-{max(values):.0f}] | "
                  f"{step_us:+.1f} us | " + " | ".join(
                      "-" if c != c else f"{c:.1f}" for c in cells) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
