"""Retractions of the serial and the overlap loop on the same work under memory pressure.

    python -m studies retraction-pressure [--pages 40 48] [--requests 16] [--new 64]

The bundled model on the CPU engine: ``--requests`` requests sharing one 256-token prompt (the
prefix cache finds it), ``--new`` new tokens each (ignore_eos), a pool of ``--pages`` pages of 16
tokens. Prints, per pool and loop, the retractions, whether the tokens equal the serial loop's,
and whether anything leaked (``Engine.memory_problems``), with the prefix cache on and off.
"""

from __future__ import annotations

import random

from bench import cli


def main(argv: list[str]) -> int:
    from engine import Engine, EngineConfig, SamplingParams
    from engine.config import NORMAL, OVERLAP

    ap = cli.parser("python -m studies retraction-pressure", __doc__)
    ap.add_argument("--pages", type=int, nargs="+", default=[40, 48])
    ap.add_argument("--requests", type=int, default=16)
    ap.add_argument("--new", type=int, default=64)
    args = ap.parse_args(argv)
    rng = random.Random(0)
    prompt = [rng.randrange(4, 200) for _ in range(256)]
    params = SamplingParams(max_new_tokens=args.new, ignore_eos=True)
    print("pages  cache  serial  overlap  overlap/serial  tokens_equal  leaks")
    for pages in args.pages:
        for cache in (True, False):
            cfg = EngineConfig(model="bundled", device="cpu", num_pages=pages, prefix_cache=cache)
            with Engine(cfg) as eng:
                got = {}
                for overlap, loop in ((False, NORMAL), (True, OVERLAP)):
                    eng.clear_prefix_cache()
                    res = eng.generate([prompt] * args.requests, params, loop)
                    got[overlap] = (res.metrics["retractions"],
                                    [o.token_ids for o in res.outputs], eng.memory_problems())
            (rs, ts, ps), (ro, to, po) = got[False], got[True]
            print(f"{pages:5d}  {'on ' if cache else 'off'}  {rs:6d}  {ro:7d}  "
                  f"{ro / max(rs, 1):14.2f}  {str(ts == to):12s}  {ps + po or 'none'}")
    return 0
