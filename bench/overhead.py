"""Recording overhead: the same workload with the span recorder on and off, interleaved.

    python -m bench --overhead [--device cuda --models qwen2.5-0.5b-shape --graphs graph]

Runs alternate (off, on, off, on, ...) so drift in the machine hits both equally; the table shows
median tokens/s of each and the difference, which the timeline issue holds to at most 2%.
"""

from __future__ import annotations

import statistics

from bench.decode import Workload
from engine.config import EngineConfig, SamplingParams
from record.timeline import Timeline


def run(device: str, model: str, batch: int, graph: bool, extra: int, work: Workload) -> int:
    """Median tokens/s with the recorder off and on, for each loop (at least 5 pairs)."""
    from engine import Engine
    from engine.teach.workload import make_prompts

    repeats = max(work.repeats, 5)
    print(f"{'device':<8} {'model':<20} {'B':>3} {'graph':<5} {'mode':<8} {'off tok/s':>10} "
          f"{'on tok/s':>10} {'overhead':>9}")
    cfg = EngineConfig(model=model, device=device, cuda_graph=graph, max_batch_size=batch,
                       max_seq_len=work.prompt_len + work.new_tokens + 16)
    with Engine(cfg) as eng:
        prompts = make_prompts(eng.tokenizer, batch, work.prompt_len, 0, eng.spec.vocab_size)
        params = SamplingParams(max_new_tokens=work.new_tokens, ignore_eos=True)
        eng.generate(prompts[:2], SamplingParams(max_new_tokens=4))
        for overlap in (False, True):
            speeds: dict[bool, list[float]] = {False: [], True: []}
            for _ in range(repeats):
                for record in (False, True):
                    r = eng.generate(prompts, params, overlap=overlap, extra_cpu_us=extra,
                                     timeline=Timeline(enabled=record))
                    speeds[record].append(sum(len(o.token_ids) for o in r.outputs) / r.wall_s)
            off, on = statistics.median(speeds[False]), statistics.median(speeds[True])
            print(f"{device:<8} {model:<20} {batch:>3} {str(graph):<5} "
                  f"{'overlap' if overlap else 'normal':<8} {off:>10.1f} {on:>10.1f} "
                  f"{100 * (off - on) / off:>8.2f}%")
    return 0
