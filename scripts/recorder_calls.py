"""What each CUDA call of a serial step costs the scheduler thread, inside the real loop.

    python scripts/recorder_calls.py [--batch 1 --runs 5]          # on a machine with CUDA

``recorder_probe.py`` times a timing event's record in a tight loop (about 2.5 µs on an H200's
host); ``recorder_split.py`` finds the recorder's events adding far more than that to a serial
step. This times the calls where the loop makes them: ``torch.cuda.Event.record`` (timing events,
the recorder's, apart from the device's plain ones), ``Stream.wait_event``, the metadata's H2D
copy and the graph's replay, each wrapped with two clock reads, over the normal loop's decode
steps (bundled model, CUDA graphs), with spans off and on. Printed: calls per step and the median
host time of one call of each kind, so the cost of a timing event's record inside the loop can
be read directly, beside a plain one's.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402


def main() -> int:
    from bench.decode import fresh
    from engine import Engine, EngineConfig, SamplingParams
    from engine.devices import cuda_buffers, cuda_graph
    from engine.workloads import make_prompts
    from record.recorder import Timeline

    parser = argparse.ArgumentParser()
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--new-tokens", type=int, default=256)
    args = parser.parse_args()

    timed: set[int] = set()                       # ids of the recorder's (timing) events
    costs: dict[str, list[int]] = defaultdict(list)
    take = cuda_buffers.EventPool.take

    def take_marked(self, n):
        events = take(self, n)
        timed.update(id(e) for e in events)
        return events

    def wrap(owner, name, label):
        original = getattr(owner, name)

        def timed_call(self, *a, **k):
            t0 = time.perf_counter_ns()
            out = original(self, *a, **k)
            costs[label(self) if callable(label) else label].append(time.perf_counter_ns() - t0)
            return out
        setattr(owner, name, timed_call)

    cuda_buffers.EventPool.take = take_marked
    wrap(torch.cuda.Event, "record",
         lambda e: "Event.record, timing" if id(e) in timed else "Event.record, plain")
    wrap(torch.cuda.Stream, "wait_event", "Stream.wait_event")
    wrap(cuda_buffers.UploadRing, "send", "UploadRing.send (wait + H2D copy)")
    wrap(cuda_graph._Graph, "replay", "a step's graph (input copy + replay)")
    wrap(torch.cuda.CUDAGraph, "replay", "CUDAGraph.replay")

    cfg = EngineConfig(model="bundled", device="cuda", cuda_graph=True,
                       max_batch_size=args.batch, max_seq_len=32 + args.new_tokens + 16)
    print(f"{torch.cuda.get_device_name()}: normal loop, bundled model, CUDA graphs, B = "
          f"{args.batch}, {args.new_tokens} new tokens, {args.runs} runs each; median host "
          "time of one call (us), calls per step\n")
    with Engine(cfg) as eng:
        prompts = make_prompts(eng.tokenizer, args.batch, 32, 0, eng.spec.vocab_size)
        params = SamplingParams(max_new_tokens=args.new_tokens, ignore_eos=True)
        rows = []
        for name, make in (("spans off", lambda: Timeline(enabled=False)), ("spans on", Timeline)):
            eng.generate(prompts, params, overlap=False, timeline=make())          # warm
            costs.clear()
            steps = 0
            for _ in range(args.runs):
                r = fresh(eng).generate(prompts, params, overlap=False, timeline=make())
                steps += max(len(o.token_ids) for o in r.outputs)
            for label, values in sorted(costs.items()):
                rows.append((name, label, len(values) / steps, statistics.median(values) / 1e3,
                             statistics.quantiles(values, n=10)[-1] / 1e3))
    print("| recorder | call | per step | median us | p90 us |\n|---|---|---|---|---|")
    for name, label, per_step, med, p90 in rows:
        print(f"| {name} | {label} | {per_step:.1f} | {med:.2f} | {p90:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
