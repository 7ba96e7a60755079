"""The layout is the architecture, checked: ``record`` at the bottom (standard library only),
then ``engine`` (torch, never a UI library), ``texts`` (the page's copy: the standard library and
``record`` only), ``viz`` (plotly, never torch or the engine), ``ui`` and ``app.py`` on top; no
package imports one above it, and no module import cycle anywhere. Beside the lesson, ``bench``
(the benchmarks a reader runs) imports the engine and the record, and ``studies`` (the lab)
may import anything of the lesson's, while nothing imports it. Inside ``record``, the record of
our own runs never imports ``record.imported`` (other engines' traces).

Inside ``engine`` the subpackages are layers too (``ENGINE_LAYERS``, bottom first): the scheduling
core never imports a device implementation, the devices never import the processes around them,
and nothing below the server imports it."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("record", "engine", "texts", "viz", "ui", "bench", "studies")
# What each package may import from this repository (its own modules aside).
MAY_IMPORT = {"record": set(), "engine": {"record"}, "texts": {"record"}, "viz": {"record", "texts"},
              "ui": {"record", "engine", "texts", "viz"}, "bench": {"record", "engine"},
              "studies": {"record", "engine", "texts", "viz", "ui", "bench"}}
# engine's own layers, bottom first. A module may import its own layer and those below it; every
# module of engine belongs to exactly one (the longest name that is a prefix of its own).
ENGINE_LAYERS = (
    ("engine.config", "engine.proc_watch",                        # values; what the OS says;
     "engine.workloads"),                                         # the prompts runs are given
    ("engine.layers",),                   # sampling and attention kernels (torch, triton)
    ("engine.models",),                   # the model, checkpoints, tokenizing
    ("engine.scheduler",),                # the article: loops, requests, KV pages, sources
    ("engine.devices",),                  # CUDA streams, the CPU device process, the runner
    ("engine", "engine.engine"),          # the public API: Engine (the package's lazy names)
    ("engine.run",),                      # the one run pipeline: loops compared, one record
    ("engine.lab",),                      # the hazard lab
    ("engine.scheduler_process",),                # the scheduler process, its service and messages
    ("engine.serve", "engine.__main__"),  # the OpenAI-compatible server, the CLI
)
MAX_TOP_LEVEL_MODULES = 9                 # engine/*.py: the rest lives in subpackages
FORBIDDEN = {"record": {"torch", "numpy", "gradio", "plotly", "transformers"},
             "engine": {"gradio", "plotly"}, "viz": {"torch", "gradio", "transformers"},
             "texts": {"torch", "numpy", "gradio", "plotly", "transformers"}}


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _imports(path: Path, module: str, known: set[str] | frozenset = frozenset()) -> set[str]:
    """Every module ``path`` imports (at any depth: a lazy import is an import too). ``from
    package import submodule`` imports the submodule, not the package's other names."""
    names: set[str] = set()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1]
                                + ([base] if base else []))
            subs = {f"{base}.{alias.name}" for alias in node.names}
            names.update(subs & known if subs <= known else subs | {base})
    return names


def test_no_package_imports_a_layer_above_it_or_a_library_it_must_not():
    problems = []
    for module, path in _modules().items():
        top = module.split(".")[0]
        for name in _imports(path, module):
            first = name.split(".")[0]
            if first in PACKAGES and first != top and first not in MAY_IMPORT[top]:
                problems.append(f"{module} imports {name}")
            if first in FORBIDDEN.get(top, ()):
                problems.append(f"{module} imports {first}")
    assert not problems, problems


def test_nothing_imports_the_studies():
    """The lab reads the lesson; the lesson, the benchmarks, the app and the scripts never read it."""
    importers = dict(_modules())
    importers["app"] = ROOT / "app.py"
    importers.update({f"scripts.{p.stem}": p for p in (ROOT / "scripts").glob("*.py")})
    problems = [f"{module} imports {name}" for module, path in importers.items()
                if module.split(".")[0] != "studies"
                for name in _imports(path, module) if name.split(".")[0] == "studies"]
    assert not problems, problems


def test_our_own_record_never_imports_the_imports():
    problems = [f"{module} imports {name}" for module, path in _modules().items()
                if module.startswith("record") and not module.startswith("record.imported")
                for name in _imports(path, module) if name.startswith("record.imported")]
    assert not problems, problems


def _engine_layer(name: str) -> int | None:
    """The index in ENGINE_LAYERS of the layer ``name`` (a module, or a name inside one) is in."""
    best, found = -1, None
    for index, layer in enumerate(ENGINE_LAYERS):
        for prefix in layer:
            if (name == prefix or name.startswith(prefix + ".")) and len(prefix) > best:
                best, found = len(prefix), index
    return found


def test_engine_is_grouped_by_concern():
    top = sorted(p.name for p in (ROOT / "engine").glob("*.py"))
    subpackages = sorted(p.parent.name for p in (ROOT / "engine").glob("*/__init__.py"))
    assert len(top) <= MAX_TOP_LEVEL_MODULES, top
    assert len(subpackages) >= 4, subpackages
    for name in subpackages:              # each says what lives there and what it may import
        doc = ast.get_docstring(ast.parse((ROOT / "engine" / name / "__init__.py").read_text()))
        assert doc and "May import" in doc, f"engine/{name}/__init__.py: no docstring saying so"
    unplaced = [m for m in _modules() if m.split(".")[0] == "engine" and _engine_layer(m) is None]
    assert not unplaced, f"modules in no layer of ENGINE_LAYERS: {unplaced}"


def test_no_engine_module_imports_a_layer_above_its_own():
    problems = []
    known = set(_modules())
    for module, path in _modules().items():
        if module.split(".")[0] != "engine":
            continue
        own = _engine_layer(module)
        for name in _imports(path, module, known):
            if name.split(".")[0] != "engine":
                continue
            layer = _engine_layer(name)
            if layer is not None and layer > own:
                problems.append(f"{module} (layer {own}) imports {name} (layer {layer})")
    assert not problems, problems


def test_the_modules_import_no_cycle():
    modules = _modules()
    known = set(modules)
    graph = {m: {n for n in _imports(p, m, known) if n in modules and n != m}
             for m, p in modules.items()}
    seen: dict[str, int] = {}               # 1: on the current path, 2: done

    def visit(node: str, path: list[str]) -> None:
        seen[node] = 1
        for nxt in graph[node]:
            if seen.get(nxt) == 1:
                raise AssertionError(f"import cycle: {' -> '.join(path + [node, nxt])}")
            if nxt not in seen:
                visit(nxt, path + [node])
        seen[node] = 2

    for module in sorted(graph):
        if module not in seen:
            visit(module, [])


# ``ui``'s rooms, bottom first: what the server keeps and says, then the handlers of each tab,
# then the tabs' layout and wiring. A module may import its own room and those below it.
UI_ROOMS = (
    ("ui.state", "ui.status", "ui.queues", "ui.stopping",          # state, status lines, queues,
     "ui.turns"),                                                    # the engine's line
    ("ui.i18n", "ui.inputs", "ui.scheduler_link", "ui.view", "ui.controls", "ui.parsing",
     "ui.live_chart"),                                               # controls, languages, link
    ("ui.presets", "ui.same_work", "ui.recorded_runs", "ui.step_through", "ui.serving_runs",
     "ui.lab_runs"),
    ("ui.live_runs", "ui.waiting"),                                  # handlers built on those
    ("ui.tabs",),                                                    # layout and wiring
)


def _ui_room(name: str) -> int | None:
    for index, room in enumerate(UI_ROOMS):
        if any(name == m or name.startswith(m + ".") for m in room):
            return index
    return None


def test_every_ui_module_has_a_room_and_imports_none_above_it():
    known = set(_modules())
    ui = [m for m in known if m.split(".")[0] == "ui" and m != "ui"]
    assert not [m for m in ui if _ui_room(m) is None], "ui modules in no room of UI_ROOMS"
    problems = []
    for module in ui:
        own = _ui_room(module)
        for name in _imports(_modules()[module], module, known):
            room = _ui_room(name) if name.split(".")[0] == "ui" else None
            if room is not None and own is not None and room > own:
                problems.append(f"{module} (room {own}) imports {name} (room {room})")
    assert not problems, problems


def test_no_two_modules_of_the_layers_above_the_engine_share_a_file_name():
    """A file's name says its job: ``live.py`` three times over said nothing."""
    seen: dict[str, list[str]] = {}
    for package in ("ui", "record", "viz"):
        for path in (ROOT / package).rglob("*.py"):
            if path.name != "__init__.py":
                seen.setdefault(path.name, []).append(str(path.relative_to(ROOT)))
    assert not {name: paths for name, paths in seen.items() if len(paths) > 1}


MAX_PARAMETERS = 8


def _is_triton_kernel(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A ``@triton.jit`` kernel takes its pointers, strides and sizes one by one: exempt."""
    return any("triton.jit" in ast.unparse(d) for d in node.decorator_list)


def test_no_function_takes_more_than_eight_parameters():
    """Where several values travel together they are one typed value (a config, a context),
    not a list that grew one argument at a time. ``self``/``cls``, ``*args`` and ``**kwargs``
    are not counted."""
    paths = [p for package in PACKAGES + ("scripts",) for p in (ROOT / package).rglob("*.py")]
    problems = []
    for path in paths + [ROOT / "app.py"]:
        where = path.relative_to(ROOT).as_posix()
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            names = [a.arg for a in node.args.posonlyargs + node.args.args + node.args.kwonlyargs]
            count = len(names) - (names[:1] in (["self"], ["cls"]))
            if count > MAX_PARAMETERS and not _is_triton_kernel(node):
                problems.append(f"{where}:{node.lineno} {node.name} takes {count}")
    assert not problems, problems
