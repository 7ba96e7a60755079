"""One command a module: ``python -m bench NAME [flags]`` and ``python -m studies NAME [flags]``.
Each command is a module with a ``main(argv) -> int``; its help is its docstring, whose first
line ``dispatch`` lists without importing it. The flags several commands share are added here."""

from __future__ import annotations

import argparse
import ast
import importlib
import importlib.util
import statistics
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from engine.workloads import Workload


def summary(module: str) -> str:
    """The first line of ``module``'s docstring."""
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        return ""
    doc = ast.get_docstring(ast.parse(Path(spec.origin).read_text(encoding="utf-8"))) or ""
    return doc.splitlines()[0] if doc else ""


def usage(prog: str, doc: str, commands: dict[str, str]) -> str:
    width = max(map(len, commands))
    lines = [f"usage: {prog} NAME [flags]   ({prog} NAME --help: its flags)", "",
             doc.strip(), "", "commands:"]
    lines += [f"  {name:<{width}}  {summary(module)}" for name, module in commands.items()]
    return "\n".join(lines)


def dispatch(prog: str, doc: str, commands: dict[str, str], argv: list[str] | None = None) -> int:
    """Run the command ``argv[0]`` names with the rest of ``argv``; its exit status."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(usage(prog, doc, commands))
        return 0 if argv else 2
    name, rest = argv[0], argv[1:]
    if name not in commands:
        print(f"{prog}: no command {name!r}; the commands are {', '.join(commands)}",
              file=sys.stderr)
        return 2
    return int(importlib.import_module(commands[name]).main(rest))


def parser(prog: str, doc: str | None) -> argparse.ArgumentParser:
    """A command's parser: its module's docstring is its help."""
    return argparse.ArgumentParser(prog=prog, description=doc,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)


def add_device(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", choices=["cpu", "cuda"], default=None,
                   help="default: cuda where a GPU exists, else cpu")


def device_of(args: argparse.Namespace) -> str:
    """The device asked for, else cuda where a GPU exists, else cpu."""
    if args.device is None:
        import torch

        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    return str(args.device)


def spread(values: list[float], fmt: str = "{:.1f}") -> str:
    """ "median [min-max]" of ``values``, each written with ``fmt``: a table's cell."""
    return (fmt.format(statistics.median(values)) + " [" + fmt.format(min(values)) + "-"
            + fmt.format(max(values)) + "]")


def add_work(p: argparse.ArgumentParser, new_tokens: int = 128, repeats: int = 3) -> None:
    """The steady workload's lengths (``workload``) and how many runs make a median."""
    p.add_argument("--prompt-len", type=int, default=32, help="prompt tokens a request")
    p.add_argument("--new-tokens", type=int, default=new_tokens, help="new tokens a request")
    p.add_argument("--repeats", type=int, default=repeats,
                   help=f"runs per configuration, the median reported (default {repeats})")


def workload(args: argparse.Namespace, **given: Any) -> Workload:
    """The steady workload of ``add_work``'s flags: every request ``--new-tokens`` long (EOS
    ignored), the engine sized with 16 positions to spare."""
    from engine.workloads import Workload

    return Workload(args.prompt_len, args.new_tokens, margin=16, ignore_eos=True, **given)
