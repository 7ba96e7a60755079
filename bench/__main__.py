"""Command line of the benchmarks: ``python -m bench [--multistep | --overhead] ...``.

    python -m bench --device cuda                      # normal vs overlap, eager vs graphs
    python -m bench --device cpu --quick               # a 2-core CPU in about a minute
    python -m bench --overhead                         # span recording on vs off
    python -m bench --multistep                        # k decode steps per iteration
    python -m bench --rates 2 4 8 inf --requests 32    # latency vs request rate (serving)
    python -m bench --forward                          # forward-only step vs floor, per variant
    python -m bench --forward-gap                      # the loop's forward vs the graph alone, kernels
    python -m bench --trace-kernels FILE               # another engine's forward by kernel kind
    python -m bench --attention-sweep                  # the attention kernel alone
    python -m bench --launch-cost                      # host time per forward, by primitive
    python -m bench --copy-placement                   # the result copy: copy, engine, scheduler stream
    python -m bench --peer all --minisgl .whl-peer/python --site /tmp/site --sglang-site DIR
                                   # SGLang and Mini-SGLang, each at its best, beside ours (bench/peer.py)
    python -m bench --ttft-bound                       # the best TTFT a prefix cache allows (CUDA)
    python -m bench --app-workload --repeats 5         # the page's workload through the CLI, spread
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from bench import app_workload, decode, forward, latency_vs_rate, launch, multistep, overhead, placement


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench", description=decode.__doc__.splitlines()[0])
    p.add_argument("--device", choices=["cpu", "cuda"], default=None,
                   help="default: cuda where a GPU exists, else cpu")
    p.add_argument("--models", nargs="+", default=None)
    p.add_argument("--batches", nargs="+", type=int, default=None)
    p.add_argument("--extra-cpu-us", nargs="+", type=int, default=None)
    p.add_argument("--graphs", nargs="+", choices=["eager", "graph"], default=None)
    p.add_argument("--prompt-len", type=int, default=32)
    p.add_argument("--new-tokens", type=int, default=128)
    p.add_argument("--repeats", type=int, default=None,
                   help="runs per configuration, the median reported (default 3; 1 with --quick)")
    p.add_argument("--ceiling-iters", type=int, default=50)
    p.add_argument("--hf", action="store_true", help="also time transformers generate")
    p.add_argument("--hf-dynamic-only", action="store_true",
                   help="with --hf: skip the static-cache variant (it may compile for minutes)")
    p.add_argument("--quick", action="store_true", help="small CPU settings")
    p.add_argument("--overhead", action="store_true", help="recording on vs off only")
    p.add_argument("--multistep", action="store_true", help="k decode steps per iteration")
    p.add_argument("--workdir", default=tempfile.gettempdir())
    # Serving (bench/latency_vs_rate.py): requests arrive over time; latency against request rate.
    p.add_argument("--rates", nargs="+", type=float, default=None, metavar="R",
                   help="serving: request rates (req/s; inf = burst); latency vs rate, both loops")
    p.add_argument("--requests", type=int, default=32, help="serving: requests per run")
    p.add_argument("--arrivals", metavar="FILE", help="serving: a trace file (times, lengths)")
    p.add_argument("--seed", type=int, default=0, help="serving: the arrival process's seed")
    p.add_argument("--json", metavar="PATH", help="serving: write the rows (viz.latency draws)")
    p.add_argument("--shared-prefix", type=int, default=0, metavar="N",
                   help="serving: a system prompt of N tokens in front of every request")
    p.add_argument("--prefix-cache", choices=["on", "off", "both"], default="on",
                   help="serving: with the radix prefix cache, without it, or both (compared)")
    p.add_argument("--compile", action="store_true", help="CUDA: compiled decode regions")
    p.add_argument("--attention", choices=["auto", "reference", "triton"], default="auto")
    p.add_argument("--forward", action="store_true",
                   help="forward-only decode step vs the weight-read floor, per variant (CUDA)")
    p.add_argument("--variants", nargs="+", choices=list(forward.VARIANTS),
                   default=["triton", "triton+compile", "triton+compile+gemv"])
    p.add_argument("--context", type=int, default=160, help="--forward: keys per row")
    p.add_argument("--splits", nargs="+", type=int, default=None,
                   help="--forward: chunks per row in decode attention (default: the engine's)")
    p.add_argument("--profile", action="store_true", help="--forward: kernels of one step")
    p.add_argument("--forward-gap", action="store_true",
                   help="the loop's decode forward against its graph alone, and its kernels (CUDA)")
    p.add_argument("--trace-kernels", nargs="+", metavar="FILE",
                   help="a profiler trace's marked steps (SGLang's), kernel by kind (no GPU)")
    p.add_argument("--attention-sweep", action="store_true", help="the attention kernel alone")
    p.add_argument("--launch-cost", action="store_true", help="host time per forward (CUDA)")
    p.add_argument("--copy-placement", action="store_true",
                   help="gap between forwards and busy, result copy on each stream (CUDA)")
    # The peer benchmark (bench/peer.py): SGLang and Mini-SGLang beside our engine, same work.
    p.add_argument("--peer", choices=["mini-sglang", "sglang", "all"],
                   help="the peer engines to run beside ours, each in the configurations its "
                        "users would choose (bench/peer_configs.py)")
    p.add_argument("--sglang-site", metavar="DIR",
                   help="--peer sglang: the folder holding SGLang's packages "
                        "(scripts/sglang_payload.sh's set, unpacked)")
    p.add_argument("--minisgl-pages-256", action="store_true",
                   help="--peer mini-sglang: also with its offline benchmark's pages of 256")
    p.add_argument("--sglang-compile", action="store_true",
                   help="--peer sglang: also its torch.compile configuration (minutes of "
                        "autotuning before the first run)")
    p.add_argument("--sglang-traces", metavar="DIR",
                   help="--peer sglang: SGLang's own profiler traces of both loops go there")
    p.add_argument("--budget-s", type=float, default=3600.0,
                   help="--peer: what no longer fits in this many seconds is not started")
    p.add_argument("--no-warm", action="store_true",
                   help="--peer: no warm-up processes (the kernels are cached already)")
    p.add_argument("--warm-also", nargs="+", default=[], metavar="MODEL",
                   help="--peer: shapes only warmed, their kernels cached for a later call")
    p.add_argument("--skip-ours", action="store_true",
                   help="--peer: the peers only (our rows and record from another call, merged)")
    p.add_argument("--merge", action="store_true",
                   help="--peer: keep the JSON's rows of engines and shapes not run this time")
    p.add_argument("--minisgl", default=".whl-peer/python", metavar="DIR",
                   help="--peer: the folder holding Mini-SGLang's minisgl/ "
                        "(scripts/prepare_peer.sh makes it)")
    p.add_argument("--site", metavar="DIR", help="--peer: where its wheels were installed "
                                                 "(pip install --target DIR)")
    p.add_argument("--jit-cache", default=str(Path(tempfile.gettempdir()) / "peer-jit"),
                   metavar="DIR", help="--peer: where FlashInfer and tvm-ffi keep the kernels "
                                       "they compile (FLASHINFER_WORKSPACE_BASE, TVM_FFI_CACHE_DIR)")
    p.add_argument("--peer-record", metavar="DIR",
                   help="--peer: also write each engine's recorded runs (both loops) there")
    p.add_argument("--peer-record-batch", type=int, default=16, metavar="B")
    p.add_argument("--peer-record-tokens", type=int, default=64, metavar="N")
    p.add_argument("--commit", default="", help="--peer: this checkout's commit, where git cannot "
                                                "tell (a copy without .git)")
    p.add_argument("--ttft-bound", action="store_true",
                   help="the linear layers alone: the best TTFT ratio a prefix cache allows (CUDA)")
    p.add_argument("--app-workload", action="store_true",
                   help="the page's default workload through the CLI, --repeats runs, with spread")
    p.add_argument("engine_args", nargs="*", metavar="-- ENGINE_ARGS",
                   help="--app-workload: more flags for python -m engine, after --")
    return p.parse_args(argv)


def run_peer(args: argparse.Namespace, argv: list[str]) -> int:
    """``--peer``: SGLang and Mini-SGLang beside our engine (bench/peer.py); bad settings get a
    message."""
    from bench import peer
    from bench.peer_processes import PeerPaths
    from bench.peer_work import PeerWork

    work = PeerWork(models=tuple(args.models or PeerWork.models),
                    batches=tuple(args.batches or PeerWork.batches),
                    prompt_len=args.prompt_len, new_tokens=args.new_tokens,
                    repeats=10 if args.repeats is None else args.repeats, seed=args.seed,
                    record_batch=args.peer_record_batch if args.peer_record else 0,
                    record_tokens=args.peer_record_tokens,
                    sglang_compile=args.sglang_compile, warm=not args.no_warm,
                    minisgl_pages_256=args.minisgl_pages_256,
                    warm_also=tuple(args.warm_also))
    paths = PeerPaths(Path(args.minisgl).resolve(),
                      Path(args.site).resolve() if args.site else None,
                      Path(args.sglang_site).resolve() if args.sglang_site else None,
                      Path(args.jit_cache).resolve(),
                      Path(args.sglang_traces).resolve() if args.sglang_traces else None)
    json_path = Path(args.json) if args.json else None
    record_dir = Path(args.peer_record) if args.peer_record else None
    try:
        return peer.run(args.peer, work, paths, json_path, record_dir,
                        "python -m bench " + " ".join(argv), args.commit, args.budget_s,
                        args.merge, not args.skip_ours)
    except ValueError as error:
        print(f"python -m bench --peer: {error}", file=sys.stderr)
        return 2


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.trace_kernels:
        from bench import trace_kernels

        return trace_kernels.run(args.trace_kernels)
    if args.peer:
        return run_peer(args, sys.argv[1:] if argv is None else list(argv))
    if args.device is None:
        import torch

        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    cuda = args.device == "cuda"
    if args.engine_args and not args.app_workload:
        print("flags after -- go to python -m engine, with --app-workload only", file=sys.stderr)
        return 2
    if args.repeats is None:
        args.repeats = 1 if args.quick else 3
    if args.app_workload:
        return app_workload.run(args.repeats, args.engine_args)
    if args.ttft_bound:
        from bench import ttft_bound

        return ttft_bound.run((args.models or ["llama-3.1-8b-shape"])[0], args.shared_prefix or 512,
                              args.prompt_len, (args.batches or [16])[0])
    work = decode.Workload(prompt_len=args.prompt_len, new_tokens=args.new_tokens,
                           repeats=args.repeats, ceiling_iters=args.ceiling_iters)
    if args.quick:
        work = decode.Workload(args.prompt_len, min(args.new_tokens, 48), args.repeats, 10)
    if args.rates:
        from engine.scheduler.arrivals import check_rate

        rates = tuple(check_rate(r, "--rates") for r in args.rates)
        caches = {"on": (True,), "off": (False,), "both": (False, True)}[args.prefix_cache]
        serving = latency_vs_rate.ServingWorkload(rates, args.requests, args.prompt_len,
                                                  args.new_tokens, args.repeats, args.seed,
                                                  args.arrivals, max(args.shared_prefix, 0),
                                                  caches)
        model = (args.models or ["bundled"])[0]
        batch = (args.batches or [16])[0]
        graph = cuda and (args.graphs or ["graph"])[0] == "graph"     # as the page
        return latency_vs_rate.run(args.device, model, batch, (args.extra_cpu_us or [0])[0],
                                   serving, args.json, graph)
    graph_names = args.graphs or (["eager", "graph"] if cuda else ["eager"])
    if args.forward:
        return forward.run(args.models or ["qwen2.5-0.5b-shape"], args.batches or [1, 8, 64],
                           args.variants, args.context, args.ceiling_iters, args.repeats,
                           args.profile, args.splits)
    if args.forward_gap:
        from bench import forward_gap

        return forward_gap.run(args.models or ["qwen2.5-0.5b-shape"], args.batches or [1, 64],
                               args.prompt_len, args.new_tokens, args.ceiling_iters, args.repeats)
    if args.attention_sweep:
        return forward.attention_sweep()
    if args.launch_cost:
        return launch.run((args.models or ["bundled"])[0], (args.batches or [8])[0])
    if args.multistep or args.overhead or args.copy_placement:
        models = args.models or ["bundled"]
        graph = (args.graphs or ["graph" if cuda else "eager"])[0] == "graph"
        extra = (args.extra_cpu_us or [0])[0]
        if args.overhead:
            return overhead.run(args.device, models, args.batches or [1, 64], graph, extra, work)
        if args.copy_placement:
            return placement.run(args.device, models, args.batches or [16], graph, extra, work)
        extra = (args.extra_cpu_us or [200 if cuda else 4000])[0]
        return multistep.run(args.device, models[0], (args.batches or [8])[0], graph, extra,
                             work)
    models = args.models or (["bundled", "smollm2-135m-shape", "qwen2.5-0.5b-shape"] if cuda
                             else ["bundled"])
    batches = args.batches or ([1, 8, 64] if cuda else [8])
    extras = args.extra_cpu_us if args.extra_cpu_us is not None else ([0, 200] if cuda
                                                                       else [0, 4000])
    return decode.run(args.device, models, batches, extras, [g == "graph" for g in graph_names],
                      work, args.hf, Path(args.workdir), args.compile, args.attention,
                      not args.hf_dynamic_only)


if __name__ == "__main__":
    sys.exit(main())
