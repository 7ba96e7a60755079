"""Command line: run a workload in normal and/or overlap mode and print what the timeline measured.

    python -m engine --mode both --requests 16 --max-new-tokens 64 --extra-cpu-us 4000
    python -m engine --mode all --decode-steps 4 --extra-cpu-us 20000  # + multi-step overlap
    python -m engine --request-rate 8 --requests 32       # requests arrive by a Poisson process
    python -m engine --arrivals trace.json                # ... or as a trace file says
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from engine.config import EngineConfig, LoopSpec
from engine.workloads import Workload
from record.schema import Loop, RunDict, loop_label

if TYPE_CHECKING:
    from engine.engine import Engine


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m engine", description=__doc__.splitlines()[0])
    p.add_argument("--mode", choices=["normal", "overlap", "both", "all"], default="both",
                   help="both: normal and overlap; all: also multi-step overlap (--decode-steps K)")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    p.add_argument("--model", default="bundled",
                   help="'bundled', a preset (smollm2-135m-shape, qwen2.5-0.5b-shape, "
                        "qwen2.5-1.5b-shape, llama-3.1-8b-shape: random weights, for timing), "
                        "a local HF directory "
                        "or a hub id such as Qwen/Qwen2.5-0.5B-Instruct (fetched once, guarded)")
    p.add_argument("--requests", type=int, default=None,
                   help="how many requests (default 16; with --arrivals, the whole trace)")
    p.add_argument("--batch-size", type=int, default=16, help="requests decoded together")
    p.add_argument("--prompt-len", type=int, default=16, help="prompt tokens per request")
    p.add_argument("--prompt-words", type=int, default=0, metavar="N",
                   help="text prompts of N words cut from the app's default prompts (the app's "
                        "workload) instead of --prompt-len tokens")
    p.add_argument("--shared-prefix", type=int, default=0, metavar="N",
                   help="one system prompt of N tokens before every prompt (the prefix cache "
                        "computes it once)")
    p.add_argument("--no-prefix-cache", action="store_true",
                   help="run without the radix prefix cache")
    p.add_argument("--kv-pages", type=int, default=None, metavar="N",
                   help="KV pool of N pages of 16 tokens (default: every request at full "
                        "length); fewer make the scheduler retract requests when it runs dry")
    p.add_argument("--stop-early", action="store_true",
                   help="as the app does: each request stops on a token picked from a probe run")
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--ignore-eos", action="store_true", help="always run max-new-tokens")
    p.add_argument("--cuda-graph", action="store_true")
    p.add_argument("--compile", action=argparse.BooleanOptionalAction, default=None,
                   help="CUDA: torch.compile the decode step between attentions (default: on "
                        "for CUDA; a start-up cost of seconds, cached on disk)")
    p.add_argument("--attention", choices=["auto", "reference", "triton"], default="auto",
                   help="auto: Triton paged decode attention on CUDA, plain PyTorch on CPU")
    p.add_argument("--dtype", default="auto")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--extra-cpu-us", type=int, default=0,
                   help="extra real scheduler CPU work per step (emulates a heavier scheduler)")
    p.add_argument("--decode-steps", type=int, default=1, metavar="K",
                   help="overlap: launch K decode steps per scheduling iteration (multi-step)")
    p.add_argument("--no-record", action="store_true", help="turn the span recorder off")
    p.add_argument("--json", metavar="PATH", help="write the run record (schema 1)")
    p.add_argument("--trace", metavar="PATH", help="write a Chrome/Perfetto trace")
    p.add_argument("--profile-steps", type=int, nargs=2, metavar=("FIRST", "LAST"),
                   help="CUDA: add kernel-level lanes from torch.profiler for these steps")
    p.add_argument("--show-text", type=int, default=2, help="print this many generated texts")
    p.add_argument("--request-rate", type=float, default=None, metavar="R",
                   help="requests arrive by a Poisson process at R requests/s (inf: all at "
                        "t=0), the same arrival times for every loop; prints TTFT and ITL")
    p.add_argument("--arrivals", metavar="FILE",
                   help="a trace of arrival times and prompt/output token lengths (JSON list of "
                        "{arrival_s, prompt_tokens, output_tokens}); without times, spread at "
                        "--request-rate")
    return p.parse_args(argv)


def load_arrivals(a: argparse.Namespace) -> list | None:
    """The run's arrivals (``--request-rate`` / ``--arrivals``), or None: all at t=0."""
    from engine.scheduler.arrivals import check_rate, load_trace, poisson_times

    if a.request_rate is not None:
        check_rate(a.request_rate, "--request-rate")
    if a.arrivals:
        return load_trace(a.arrivals, a.request_rate, a.seed, limit=a.requests)
    if a.request_rate is not None:
        from engine.scheduler.arrivals import Arrival
        return [Arrival(t) for t in poisson_times(a.request_rate, a.requests or 16, a.seed)]
    return None


def build_run(a: argparse.Namespace, arrivals: list | None = None) -> tuple[EngineConfig, Workload]:
    """The engine to build and the workload to run, from the flags (``ValueError`` names the
    flag that is wrong)."""
    if a.requests is not None and a.requests < 1:
        raise ValueError("--requests must be >= 1")
    if a.prompt_len < 1 or a.prompt_words < 0 or a.shared_prefix < 0:
        raise ValueError("--prompt-len must be >= 1, --prompt-words and --shared-prefix >= 0")
    if a.mode == "all" and a.decode_steps < 2:
        raise ValueError("--mode all compares with multi-step overlap: give --decode-steps K >= 2")
    cli_loops(a.mode, a.decode_steps, a.extra_cpu_us)    # --decode-steps, --extra-cpu-us in range
    if a.stop_early and any(x.output_tokens for x in arrivals or ()):
        raise ValueError("--stop-early picks stop tokens for --max-new-tokens; the trace in "
                         "--arrivals already gives each request its output length")
    given = dict(arrivals=tuple(arrivals or ()),
                 requests=len(arrivals) if arrivals else a.requests or 16,
                 temperature=a.temperature, ignore_eos=a.ignore_eos, stop_early=a.stop_early,
                 request_rate=a.request_rate, seed=a.seed,
                 arrivals_file=Path(a.arrivals).name if a.arrivals else None)
    work = (Workload.of_words(a.prompt_words, a.max_new_tokens, a.shared_prefix, **given)
            if a.prompt_words else
            Workload(a.prompt_len, a.max_new_tokens, a.shared_prefix, **given))
    cfg = work.engine_config(model=a.model, device=a.device, cuda_graph=a.cuda_graph,
                             prefix_cache=not a.no_prefix_cache,
                             max_batch_size=a.batch_size, dtype=a.dtype, seed=a.seed,
                             max_prefill_tokens=max(512, a.prompt_len),
                             record_timeline=not a.no_record, compile=a.compile,
                             attention=a.attention)
    if a.kv_pages is not None and a.kv_pages < cfg.pages_per_seq:
        raise ValueError(f"--kv-pages must be at least {cfg.pages_per_seq}, the pages of one "
                         f"request at full length ({cfg.max_seq_len} tokens)")
    return replace(cfg, num_pages=a.kv_pages), work


def cli_loops(mode: str, decode_steps: int, extra_cpu_us: int) -> list[LoopSpec]:
    """The loops ``--mode`` names, in order: "overlap" with ``--decode-steps K`` > 1 is the
    multistep loop; "all" runs normal, overlap and multistep."""
    normal = LoopSpec(Loop.NORMAL, 1, extra_cpu_us)
    overlap = LoopSpec(Loop.OVERLAP, 1, extra_cpu_us)
    overlapped = LoopSpec(Loop.MULTISTEP, decode_steps, extra_cpu_us) if decode_steps > 1 else overlap
    return {"normal": [normal], "overlap": [overlapped], "both": [normal, overlapped],
            "all": [normal, overlap, overlapped]}[mode]


def format_table(runs: list[RunDict]) -> str:
    """The runs' metrics, a row each; after a normal run, each later run's predicted and measured
    speedup per decode step (steady window), and its whole-run ratio."""
    from record.metrics import compare_runs

    head = (f"{'loop':<13} {'tok/s':>9} {'decode tok/s':>12} {'GPU busy':>8} {'idle ms':>8} "
            f"{'step ms':>8} {'T_fwd ms':>8} {'T_cpu ms':>8} {'wasted':>6}")
    lines = [head, "-" * len(head)]
    for r in runs:
        m = r["metrics"]
        lines.append(
            f"{_name(r):<13} {m['tokens_per_s']:>9.1f} {m['decode_tokens_per_s']:>12.1f} "
            f"{100 * m['gpu_busy_frac']:>7.1f}% {m['idle_us_total'] / 1e3:>8.1f} "
            f"{m['steady_step_us'] / 1e3:>8.3f} {m['t_fwd_us'] / 1e3:>8.3f} "
            f"{(m['t_cpu_us'] or 0.0) / 1e3:>8.3f} {m['wasted_tokens']:>6}")
    if len(runs) >= 2 and runs[0]["loop"] == Loop.NORMAL:
        for r in runs[1:]:
            k = r["decode_steps"]
            c = compare_runs(runs[0]["metrics"], r["metrics"], k)
            formula = "max(T_fwd, T_cpu)" if k == 1 else f"max(T_fwd, T_cpu / {k})"
            lines.append(f"{_name(r)}: (T_fwd + T_cpu) / {formula} from the normal run = "
                         f"{c['predicted_speedup']:.2f}x predicted, {c['measured_speedup']:.2f}x "
                         f"measured per decode step (steady window); whole run "
                         f"{c['whole_run_speedup']:.2f}x tokens/s")
    return "\n".join(lines)


def _name(run: RunDict) -> str:
    return loop_label(run["loop"], run["decode_steps"])


def _check_output_paths(a: argparse.Namespace) -> None:
    """Refuse an output file that cannot be written before the run, not after it."""
    for flag, path in (("--json", a.json), ("--trace", a.trace)):
        if path is None:
            continue
        folder = Path(path).expanduser().resolve().parent
        if not folder.is_dir():
            raise ValueError(f"{flag} {path}: the folder {folder} does not exist")
        if not os.access(folder, os.W_OK):
            raise ValueError(f"{flag} {path}: the folder {folder} is not writable")


def format_startup(startup_s: dict[str, float]) -> str:
    """``total T s (load L s, warm_up W s, capture C s)``: what the user waited for."""
    parts = ", ".join(f"{k} {v:.1f} s" for k, v in startup_s.items() if k != "total")
    return f"total {startup_s.get('total', 0.0):.1f} s" + (f" ({parts})" if parts else "")


class CtrlC:
    """Ctrl-C ends the run at the scheduler's next iteration (``should_stop``); a second at once."""

    def __init__(self) -> None:
        self.pressed = False
        self._before: object = None

    def __enter__(self) -> CtrlC:
        if threading.current_thread() is threading.main_thread():   # only it may set handlers
            self._before = signal.signal(signal.SIGINT, self._on_sigint)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._before is not None:
            signal.signal(signal.SIGINT, self._before)

    def _on_sigint(self, *_signal: object) -> None:
        if self.pressed:
            raise KeyboardInterrupt
        self.pressed = True

    def should_stop(self) -> bool:
        return self.pressed


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    eng = None
    ctrl_c = CtrlC()
    try:
        _check_output_paths(a)
        cfg, work = build_run(a, load_arrivals(a))
        from engine import Engine
        eng = Engine(cfg)
        with ctrl_c:
            return _run(a, eng, work, ctrl_c)
    except (KeyboardInterrupt, ValueError, RuntimeError, FileNotFoundError) as err:
        if isinstance(err, KeyboardInterrupt) or ctrl_c.pressed:   # RunCancelled: by Ctrl-C
            print("interrupted", file=sys.stderr)
            return 130
        print(f"error: {err}", file=sys.stderr)                    # one line, no traceback
        return 2
    finally:
        if eng is not None:
            eng.close()


def _run(a: argparse.Namespace, eng: Engine, work: Workload, ctrl_c: CtrlC) -> int:
    from engine.run import RunOptions, compare_loops

    # What runs where, before the minutes it may take (and a sign for a script that it began).
    print(f"device: {eng.device_label()}  model: {eng.config.model}"
          f"{'  (random weights, for timing)' if eng.random_weights else ''}")
    print(f"start-up: {format_startup(eng.startup_s)}", flush=True)
    # Every loop is warmed up first (not measured), so no measured run pays first-use costs.
    options = RunOptions(warm_up=True, should_stop=ctrl_c.should_stop,
                         profile_steps=tuple(a.profile_steps) if a.profile_steps else None)
    record = compare_loops(eng, work, cli_loops(a.mode, a.decode_steps, a.extra_cpu_us),
                           options=options)
    _report(a, work, record["runs"])
    if a.json:
        from record.run_record import save_record
        save_record(record, a.json)
        print(f"wrote {a.json}")
    if a.trace:
        from record.chrome_trace import write_chrome_trace
        write_chrome_trace(record, a.trace)
        print(f"wrote {a.trace}")
    return 0


def _report(a: argparse.Namespace, work: Workload, runs: list[RunDict]) -> None:
    """The table, what the prefix cache found, the latency table with arrivals, some texts."""
    print(format_table(runs))
    for r in runs:
        m = r["metrics"]
        if m["prefix_hit_tokens"] or m["retractions"]:
            found = ("no prefix cache" if m["prefix_hit_tokens"] is None else
                     f"prefix cache found {m['prefix_hit_tokens']} prompt tokens "
                     f"({100 * (m['prefix_hit_rate'] or 0.0):.0f}% of those admitted)")
            print(f"{_name(r)}: {found}, "
                  f"{m['retractions']} retraction{'' if m['retractions'] == 1 else 's'}")
    if work.arrivals:
        from engine.scheduler.arrivals import describe
        from record.latency_rows import format_table as latency_table
        from record.latency_rows import row_from_metrics, summarize

        rate = None if a.request_rate is None or a.arrivals else a.request_rate
        print(f"\narrivals: {describe(list(work.arrivals))}")
        print(latency_table(summarize([row_from_metrics(_name(r), rate, work.requests,
                                                        r["metrics"]) for r in runs])))
    for o in runs[-1]["outputs"][: a.show_text]:
        print(f"  [{o['finish_reason']}] {o['text']!r}")


if __name__ == "__main__":
    sys.exit(main())
