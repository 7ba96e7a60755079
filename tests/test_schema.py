"""One vocabulary for runs: lanes, phases and loops are named in ``record.schema`` and nowhere else.

The record's JSON spells them as it always has (pinned here, as literals, on purpose), and no
tracked Python file outside the schema writes one of them out again: a new copy fails here.
"""

from __future__ import annotations

import ast
import json
import subprocess
from dataclasses import FrozenInstanceError
from pathlib import Path

import pytest

from engine.config import MAX_DECODE_STEPS, LoopSpec
from engine.workloads import MIN_SEQ_LEN, Workload, word_prompt_tokens
from record.schema import (
    BASE_LANES,
    ENGINE_LOOPS,
    FORWARD_PHASES,
    GPU_LANES,
    LANES,
    RECORD_LOOPS,
    Lane,
    Loop,
    Phase,
    loop_label,
)

ROOT = Path(__file__).resolve().parent.parent


# ---- the names, as the JSON has them ------------------------------------------------------------

def test_the_names_are_the_strings_records_have_always_held():
    assert list(LANES) == ["cpu", "scheduler_stream", "engine_stream", "copy_stream"]
    assert list(GPU_LANES) == ["scheduler_stream", "engine_stream", "copy_stream"]
    assert list(BASE_LANES) == ["cpu", "scheduler_stream", "engine_stream"]
    assert {p.value for p in Phase} == {"receive", "schedule", "launch", "wait", "process_last",
                                        "upload", "copy", "prefill", "decode", "sample",
                                        "resolve"}
    assert list(FORWARD_PHASES) == ["prefill", "decode"]
    assert list(ENGINE_LOOPS) == ["normal", "overlap", "multistep"]
    assert list(RECORD_LOOPS) == ["normal", "overlap", "multistep", "imported"]


def test_a_member_is_its_string_in_json_in_sets_and_as_a_key():
    span = {"lane": Lane.ENGINE_STREAM, "phase": Phase.DECODE, "loop": Loop.MULTISTEP}
    assert json.dumps(span) == '{"lane": "engine_stream", "phase": "decode", "loop": "multistep"}'
    read = json.loads(json.dumps(span))          # a record read from a file: plain strings
    assert read["lane"] == Lane.ENGINE_STREAM and read["phase"] in FORWARD_PHASES
    assert {Lane.CPU: 1}.get("cpu") == 1 and "cpu" in {Lane.CPU}
    assert f"lane_{Lane.COPY_STREAM}" == "lane_copy_stream"


def test_the_loop_label_names_k_for_multistep_only():
    assert loop_label(Loop.MULTISTEP, 3) == "multistep k=3"
    assert loop_label(Loop.OVERLAP, 3) == "overlap"
    assert loop_label("normal") == "normal"


# ---- LoopSpec: the loop from the page to the engine ----------------------------------------------

def test_loop_spec_says_which_loop_and_how():
    multi = LoopSpec(Loop.MULTISTEP, 4, 300)
    assert (multi.loop, multi.decode_steps, multi.extra_cpu_us) == (Loop.MULTISTEP, 4, 300)
    assert multi.label == "multistep k=4" and LoopSpec(Loop.OVERLAP).label == "overlap"
    with pytest.raises(FrozenInstanceError):
        multi.loop = Loop.NORMAL


# A loop name as a plain string is refused (the page turns its checkboxes into ``Loop``s once);
# k is the multistep loop's alone, at least 2 there (one step per iteration is the overlap loop).
@pytest.mark.parametrize("args", [("imported",), ("fast",), ("overlap",), (Loop.IMPORTED,),
                                  (Loop.MULTISTEP, 1), (Loop.MULTISTEP, 0),
                                  (Loop.MULTISTEP, MAX_DECODE_STEPS + 1), (Loop.OVERLAP, 2),
                                  (Loop.NORMAL, 3), (Loop.NORMAL, 1, -1), (Loop.NORMAL, 1, 2.5)])
def test_loop_spec_refuses_what_no_loop_can_run(args):
    with pytest.raises(ValueError, match="LoopSpec"):
        LoopSpec(*args)


# ---- Workload: one formula sizes the engine --------------------------------------------------------

class _Arrival:
    def __init__(self, prompt_tokens, output_tokens):
        self.prompt_tokens, self.output_tokens = prompt_tokens, output_tokens


def test_a_workload_sizes_max_seq_len_for_its_longest_request():
    assert Workload(32, 128, margin=16).max_seq_len() == 32 + 128 + 16
    assert Workload(8, 8).max_seq_len() == MIN_SEQ_LEN
    # the page's words: about two tokens each and a chat template, after the system prompt
    assert Workload(word_prompt_tokens(24), 96, 40).max_seq_len() == 2 * 24 + 96 + 64 + 40
    trace = [_Arrival(None, 300), _Arrival(200, None), _Arrival(None, None)]
    assert Workload(32, 64, 10, margin=16, arrivals=trace, requests=3).longest() == 32 + 300 + 10
    config = Workload(100, 50).engine_config(max_batch_size=4, device="cpu")
    assert (config.max_seq_len, config.max_batch_size) == (150, 4)


# ---- no stray copies ------------------------------------------------------------------------------

NAMES = {"lane": {m.value for m in Lane}, "phase": {m.value for m in Phase},
         "loop": {m.value for m in Loop}}
VOCABULARY = set().union(*NAMES.values())
# Spelled like nothing else in this code: any literal of these is a copy of a schema name.
UNMISTAKABLE = {Lane.SCHEDULER_STREAM.value, Lane.ENGINE_STREAM.value, Lane.COPY_STREAM.value,
                Phase.PROCESS_LAST.value, Loop.MULTISTEP.value}
# Names whose values are lanes, phases or loops: a literal compared with one, given as one or
# keyed by one is a copy. ("cpu", "copy" or "normal" elsewhere are devices, copy placements, CLI
# modes: other vocabularies that happen to share a word.)
ROLES = {"lane", "lanes", "phase", "phases", "loop", "loops", "kind", "mode"}
EXEMPT = {"record/schema.py"}           # the one definition
EXEMPT_DIRS = ("tests/",)               # tests pin the JSON with literals of their own, on purpose
# Literals that stay, each with why: (path, literal).
ALLOWED: dict[tuple[str, str], str] = {
    ("texts/strings.py", "multistep k={k}"): "the page's English name of the loop: page copy",
    ("bench/__main__.py", "multistep"): "a command's name (python -m bench multistep)",
    ("scripts/screenshots.py", "multistep"): "a flag's name (--multistep-only)",
}


def _role(node: ast.AST) -> bool:
    """Whether ``node`` reads a lane, phase or loop: ``x.lane``, ``s["phase"]``,
    ``run.get("loop")``, a variable named ``kind``..."""
    if isinstance(node, ast.Attribute):
        return node.attr in ROLES
    if isinstance(node, ast.Name):
        return node.id in ROLES
    if isinstance(node, ast.Subscript):
        return isinstance(node.slice, ast.Constant) and node.slice.value in ROLES
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
            and node.func.attr == "get" and node.args:
        return isinstance(node.args[0], ast.Constant) and node.args[0].value in ROLES
    return False


def _strings(node: ast.AST) -> list[str]:
    """The string literals ``node`` gives as a value (through tuples, lists, sets, ``a if c
    else b``)."""
    if isinstance(node, ast.Constant):
        return [node.value] if isinstance(node.value, str) else []
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [s for item in node.elts for s in _strings(item)]
    if isinstance(node, ast.IfExp):
        return _strings(node.body) + _strings(node.orelse)
    return []


def _one_vocabulary(values: list) -> bool:
    """Two or more string literals, all names of one vocabulary: a copied list of names."""
    return (len(values) >= 2 and all(isinstance(v, str) for v in values)
            and any(set(values) <= names for names in NAMES.values()))


def signatures(sources: list[str]) -> dict[str, list[str]]:
    """The positional parameters of every function and dataclass these sources define, by name
    (a name defined twice with other parameters is left out: a call to it cannot be read)."""
    found: dict[str, list[str]] = {}
    clashes: set[str] = set()
    for source in sources:
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                params = [a.arg for a in node.args.posonlyargs + node.args.args]
            elif isinstance(node, ast.ClassDef):
                params = ["self"] + [item.target.id for item in node.body
                                     if isinstance(item, ast.AnnAssign)
                                     and isinstance(item.target, ast.Name)]
            else:
                continue
            params = params[1:] if params[:1] in (["self"], ["cls"]) else params
            if found.get(node.name, params) != params:
                clashes.add(node.name)
            found[node.name] = params
    return {name: params for name, params in found.items() if name not in clashes}


def stray_names(source: str, known: dict[str, list[str]] | None = None) -> list[tuple[int, str]]:
    """(line, literal) for every lane, phase or loop name ``source`` writes out itself; with
    ``known`` (``signatures``), also those passed by position to a parameter named for one."""
    found: list[tuple[int, str]] = []
    known = known or {}

    def add(node: ast.AST, values: list[str]) -> None:
        found.extend((node.lineno, v) for v in values if v in VOCABULARY)

    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if node.value in UNMISTAKABLE or node.value.startswith("multistep k"):
                found.append((node.lineno, node.value))
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(_role(side) for side in sides):
                for side in sides:
                    add(side, _strings(side))
        elif isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            values = [e.value if isinstance(e, ast.Constant) else None for e in node.elts]
            if _one_vocabulary(values):
                add(node, values)
        elif isinstance(node, ast.Dict):
            keys = [k.value if isinstance(k, ast.Constant) else None for k in node.keys]
            if _one_vocabulary(keys):
                add(node, keys)
            for key, value in zip(node.keys, node.values):
                if isinstance(key, ast.Constant) and key.value in ROLES:
                    add(value, _strings(value))
        elif isinstance(node, ast.keyword) and node.arg in ROLES:
            add(node.value, _strings(node.value))
        elif isinstance(node, ast.Call):
            name = node.func.id if isinstance(node.func, ast.Name) else \
                node.func.attr if isinstance(node.func, ast.Attribute) else ""
            for param, arg in zip(known.get(name, []), node.args):
                if param in ROLES:
                    add(arg, _strings(arg))
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(_role(target) for target in targets):
                add(node.value, _strings(node.value))
        elif isinstance(node, ast.arguments):
            named = node.posonlyargs + node.args
            pairs = list(zip(named[len(named) - len(node.defaults):], node.defaults))
            pairs += [(a, d) for a, d in zip(node.kwonlyargs, node.kw_defaults) if d is not None]
            for arg, default in pairs:
                if arg.arg in ROLES:
                    add(default, _strings(default))
    return sorted(set(found))


def _tracked_python() -> list[str]:
    out = subprocess.run(["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout.split()
    return [p for p in out if p not in EXEMPT and not p.startswith(EXEMPT_DIRS)
            and (ROOT / p).exists()]


def test_no_tracked_python_file_writes_a_lane_phase_or_loop_name_of_its_own():
    paths = _tracked_python()
    known = signatures([(ROOT / path).read_text() for path in paths])
    strays = [f"{path}:{line}: {value!r}" for path in paths
              for line, value in stray_names((ROOT / path).read_text(), known)
              if (path, value) not in ALLOWED]
    assert not strays, ("name these through record.schema (Lane, Phase, Loop, loop_label):\n"
                        + "\n".join(strays))


@pytest.mark.parametrize("copy", [
    'if span["lane"] == "engine_stream": pass',
    'LOOPS = ("normal", "overlap", "multistep")',
    'FORWARD = ("prefill", "decode")',
    'COLORS = {"receive": 1, "schedule": 2}',
    'done = [s for s in spans if s.phase == "wait"]',
    'ok = run.get("loop") == "imported"',
    'span = {"lane": "cpu", "phase": "launch"}',
    'Span(lane="cpu", phase="copy", step=1)',
    'def add(lane="cpu"): pass',
    'phase = "prefill" if first else "decode"',
    'name = f"multistep k={k}"',
])
def test_the_check_finds_a_copy(copy):
    assert stray_names(copy)


@pytest.mark.parametrize("call", ['meta = StepMeta(0, "decode", 8)', 'choose(page, "normal")',
                                  'x.choose(page, "overlap")'])
def test_the_check_finds_a_copy_passed_by_position(call):
    known = signatures(["@dataclass\nclass StepMeta:\n    step: int\n    kind: str\n",
                        "def choose(page, loop: str): pass"])
    assert known == {"StepMeta": ["step", "kind"], "choose": ["page", "loop"]}
    assert stray_names(call, known)
    assert not stray_names(call)                       # by position, only with the signatures
    assert not stray_names('choose("normal", page)', known)   # not the parameter of a loop


@pytest.mark.parametrize("other", [
    'EngineConfig(device="cpu")',
    'if placement == "copy": pass',
    'MODES = ("normal", "overlap", "both", "all")',
    'DEVICES = ("auto", "cpu", "cuda")',
    'roles = ("forward", "upload", "copy", "wait", "process")',
    'text = t(lang, "loopname_normal")',
])
def test_the_check_leaves_other_vocabularies_alone(other):
    assert not stray_names(other)
