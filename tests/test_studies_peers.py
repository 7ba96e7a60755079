"""The peer benchmark's CPU side (no GPU, no peer's process): its rows, tables and JSON, the
configurations it tries, its argument handling, the model folder and prompts it gives each peer,
the orchestration (with a stand-in peer), what a peer's runner does with its runs, and the
peers' recorded runs as the page reads, lists and draws them."""

from __future__ import annotations

import json
import statistics
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from studies.peers import benchmark as peer  # noqa: E402
from studies.peers import processes as peer_processes  # noqa: E402
from studies.peers import runs as peer_runs  # noqa: E402
from studies.peers import table as peer_table  # noqa: E402
from studies.peers import work as peer_work  # noqa: E402
from studies.peers.benchmark import main  # noqa: E402

RECORD = ROOT / "assets" / "recorded" / "h200-minisglang-qwen05-b16.json"
FIGURES = {"steady_step_us": 2000.0, "t_fwd_us": 1200.0, "t_cpu_us": 700.0,
           "cpu_phases_us": {"receive": 5.0, "schedule": 300.0, "launch": 250.0, "wait": 600.0,
                             "process_last": 145.0}}
MODEL = "qwen2.5-0.5b-shape"
S = peer_table.Setting
_row = peer_table.speed_row


def _peer_out(loop: str, plain_s: list[float], hooked_s: list[float]) -> dict:
    return {"loop": loop, "batches": [{"batch": 4, "tokens": 400, "plain_s": plain_s,
                                       "hooked_s": hooked_s, "figures": FIGURES}]}


def _rows() -> list[dict]:
    rows = peer_table.peer_rows("Mini-SGLang", "pages of 16", MODEL,
                                _peer_out("normal", [0.5, 0.4, 0.8], [0.5, 0.5, 1.0]))
    rows += peer_table.peer_rows("Mini-SGLang", "pages of 16", MODEL,
                                 _peer_out("overlap", [0.25, 0.2, 0.4], [0.2, 0.25, 0.4]))
    # a slower configuration, tried and reported, never the one a ratio takes
    rows += peer_table.peer_rows("Mini-SGLang", "pages of 1", MODEL,
                                 _peer_out("normal", [1.0, 1.0, 1.0], [1.0, 1.0, 1.0]))
    rows += peer_table.peer_rows("SGLang", "tuned", MODEL,
                                 _peer_out("normal", [0.25, 0.25, 0.25], [0.3, 0.3, 0.3]))
    rows.append(_row(S("ours", "defaults", MODEL, "normal", 4, "on"), [1.0, 0.8, 1.6], 400,
                     FIGURES, "these runs"))
    rows.append(_row(S("ours", "defaults", MODEL, "overlap", 4, "off"), [0.5, 0.5, 0.5], 400))
    for row in rows:
        row["where"] = {"call": "c1", "gpu": "NVIDIA H100", "gpu_uuid": "GPU-a"}
    return peer_table.add_ratios(rows)


def test_rows_report_the_median_and_range_and_ratios_to_each_peers_best():
    rows = {(r["engine"], r["config"], r["loop"], r["recording"]): r for r in _rows()}
    base = rows[("Mini-SGLang", "pages of 16", "normal", "off")]
    assert (base["tok_s_min"], base["tok_s_median"], base["tok_s_max"]) == (500, 800, 1000)
    assert base["tok_s_runs"] == [800, 1000, 500]                  # in the order they ran
    assert base["step_ms"] == 2.0 and base["forward_ms"] == 1.2 and base["cpu_ms"] == 0.7
    assert base["vs"]["Mini-SGLang"] == 1.0
    ours = rows[("ours", "defaults", "normal", "on")]
    assert ours["tok_s_median"] == 400
    # against each peer's fastest configuration (Mini-SGLang's pages of 16, not of 1)
    assert ours["vs"] == pytest.approx({"Mini-SGLang": 400 / 800, "SGLang": 400 / 1600})
    off = rows[("ours", "defaults", "overlap", "off")]
    assert off["vs"] == pytest.approx({"Mini-SGLang": 800 / 1600})   # SGLang ran no overlap here
    assert off["step_ms"] is None and off["figures_from"] is None   # recording off: no spans


def test_tables_and_json_say_what_the_rows_hold():
    doc = peer_table.document({"gpu": "NVIDIA H200"}, _rows())
    table = peer_table.format_table(doc["rows"], MODEL)
    assert ("| Mini-SGLang | pages of 16 (best) | c1 | normal | 4 | off | 800 [500-1,000] | "
            "2.000* | 1.200* | – | – |") in table
    assert "| Mini-SGLang | pages of 1 | c1 | normal | 4 | off | 400 [400-400] |" in table
    assert ("| ours | defaults | c1 | normal | 4 | on | 400 [250-500] | 2.000 | 1.200 | 0.50x | "
            "0.25x |") in table
    assert "| ours | defaults | c1 | overlap | 4 | off | 800 [800-800] | – | – | 0.50x | – |" in table
    assert peer_table.format_table(doc["rows"], "llama-3.1-8b-shape").count("\n") == 1
    phases = peer_table.format_phases(doc["rows"], MODEL)
    assert "| ours | defaults | normal | 4 | 2000 | 1200 | 5 | 300 | 250 | 600 | 145 | 700 |" \
        in phases
    assert "overlap | 4 | off" not in phases                   # only runs with spans
    gains = {(g["engine"], g["config"], g["recording"]): g for g in doc["overlap_gains"]}
    assert gains[("Mini-SGLang", "pages of 16", "off")]["end_to_end"] == pytest.approx(2.0)
    assert gains[("Mini-SGLang", "pages of 16", "off")]["per_step"] == pytest.approx(1.0)
    assert ("ours", "defaults", "on") not in gains              # ours ran overlap with it off
    assert "## qwen2.5-0.5b-shape" in peer_table.report(doc)
    assert json.loads(json.dumps(doc, allow_nan=False)) == doc


def _on(rows, call, uuid):
    for row in rows:
        row["where"] = {"call": call, "gpu": "NVIDIA H100", "gpu_uuid": uuid}
    return rows


def test_calls_add_up_and_rows_that_name_no_call_are_dropped():
    # an older layout: no call, no host
    old = _rows() + [_row(S("SGLang", "tuned", MODEL, "overlap", 4, "off"), [1.0], 400)]
    new = _on([_row(S("SGLang", "tuned", MODEL, "normal", 4, "off"), [0.2], 400)],
              "c2", "GPU-a")
    merged = peer_table.merge(old, new)
    assert merged == old[:-1] + new                          # both calls' rows, in call order
    assert peer_table.merge(merged, new) == merged           # a call is merged once


def test_ratios_divide_rows_of_one_gpu_only():
    rows = _rows() + _on([_row(S("SGLang", "tuned", MODEL, "overlap", 4, "off"), [0.1], 400)],
                         "c3", "GPU-b")
    rows += _on([_row(S("ours", "defaults", MODEL, "overlap", 4, "on"), [0.2], 400)],
                "c3", "GPU-b")
    peer_table.add_ratios(rows)
    here, there = rows[-3], rows[-1]
    assert here["engine"] == "ours" and "SGLang" not in here["vs"]    # SGLang ran it elsewhere
    assert there["vs"] == pytest.approx({"SGLang": 0.5})             # its own GPU's SGLang only
    unsaid = _row(S("ours", "defaults", MODEL, "normal", 4, "on"), [0.5], 400)
    assert peer_table.add_ratios([*_rows(), unsaid])[-1]["vs"] == {}   # no GPU said: no ratio


def test_the_summary_pools_ours_over_calls_and_takes_each_peers_best():
    first = _rows()
    ours = next(r for r in first if (r["engine"], r["loop"], r["recording"]) ==
                ("ours", "normal", "on"))
    ours["tok_s_by_timing"] = {"start": 400.0, "end": 390.0}
    again = _on([_row(S("ours", "defaults", MODEL, "normal", 4, "on"), [0.4], 400)],
                "c2", "GPU-a")
    rows = peer_table.add_ratios(first + again)
    pooled = peer_table.pooled(rows, "ours", MODEL, "GPU-a", "normal", 4, "on")
    assert pooled["runs"] == 4 and pooled["calls"] == 2 and pooled["timings"] == [400.0, 390.0]
    assert pooled["median"] == pytest.approx(statistics.median([400, 500, 250, 1000]))
    mini = peer_table.pooled(rows, "Mini-SGLang", MODEL, "GPU-a", "normal", 4, "off")
    assert mini["config"] == "pages of 16" and mini["median"] == 800     # its best, not pages of 1
    table = peer_table.summary_table(rows, MODEL, "GPU-a")
    assert "| this project (recording on) | 450 [250-1,000] (4) | – |" in table
    assert "| Mini-SGLang (pages of 16) | 800 [500-1,000] (3) | 1,600 [1,000-2,000] (3) |" in table
    assert "| this project / Mini-SGLang | 0.56x | – |" in table


def test_a_peer_whose_best_differs_by_cell_has_each_cell_lettered():
    rows = _rows() + _on([_row(S("Mini-SGLang", "pages of 1", MODEL, "overlap", 4, "off"),
                               [0.1], 400)], "c1", "GPU-a")
    table = peer_table.summary_table(peer_table.add_ratios(rows), MODEL, "GPU-a")
    line = next(x for x in table.splitlines() if x.startswith("| Mini-SGLang"))
    assert line.startswith("| Mini-SGLang (a: pages of 1; b: pages of 16) |")
    assert line.endswith("| 800 [500-1,000] (3) b | 4,000 [4,000-4,000] (1) a |")


def test_a_row_without_timed_runs_is_refused_and_a_failed_hook_gives_no_on_row():
    with pytest.raises(ValueError, match="no timed runs"):
        _row(S("ours", "defaults", MODEL, "normal", 1, "on"), [], 128)
    out = _peer_out("normal", [0.5], [])
    out["batches"][0]["figures"] = None
    assert [r["recording"] for r in peer_table.peer_rows("SGLang", "tuned", MODEL, out)] == ["off"]


def test_the_hooks_cost_is_said_in_both_languages():
    note = peer_table.hook_cost_note("SGLang", "normal", {"plain_s": [0.10, 0.12, 0.11],
                                                          "hooked_s": [0.12, 0.121, 0.13],
                                                          "steps": 64})
    assert note["cost_pct"] == pytest.approx(10.0)
    assert note["per_step_us"] == pytest.approx(0.011 / 64 * 1e6)
    assert "SGLang's serial loop" in note["en"] and "+10.0%" in note["en"]
    assert "3 runs" in note["en"] and "串行" in note["zh"] and "+10.0%" in note["zh"]


def test_file_names_and_graph_sizes():
    assert peer_table.gpu_tag("NVIDIA H200") == "h200" and peer_table.gpu_tag("") == "gpu"
    assert peer_table.gpu_tag("NVIDIA H100 80GB HBM3") == "h100"
    assert peer_table.record_name("NVIDIA H200", "Mini-SGLang", MODEL, 16) == \
        "h200-minisglang-qwen05-b16.json"
    assert peer_table.record_name("NVIDIA H200", "SGLang", "llama-3.1-8b-shape", 1) == \
        "h200-sglang-llama8b-b1.json"
    assert peer_table.record_name("NVIDIA H200", "ours", MODEL, 16) == "h200-ours-qwen05-b16.json"
    assert peer_work.graph_sizes((1, 64, 16)) == [1, 2, 4, 8, 16, 32, 64]
    assert peer_work.graph_sizes((3,)) == [1, 2, 3]


def test_each_peer_is_tried_in_the_configurations_its_users_would_choose():
    work = peer_work.PeerWork(models=(MODEL, "llama-3.1-8b-shape"), batches=(1, 64),
                              minisgl_pages_256=True)
    mini = peer_work.configs_of("Mini-SGLang", work, MODEL)
    assert [c.args["page_size"] for c in mini] == [16, 1, 256]
    assert all(c.args["num_page_override"] >= 2 * 64 * -(-work.max_seq_len // c.args["page_size"])
               for c in mini if "num_page_override" in c.args)    # the pool holds the work
    assert "num_page_override" not in mini[1].args               # its defaults: by memory ratio
    only = replace(work, only=("defaults", "radix"))
    assert [c.args["page_size"] for c in peer_work.configs_of("Mini-SGLang", only, MODEL)] == [1]
    assert len(peer_work.configs_of("SGLang", only, MODEL)) == 1
    assert [c.args["page_size"] for c in peer_work.configs_of("Mini-SGLang", work,
                                                              "llama-3.1-8b-shape")] == [16, 1]
    (tuned,) = peer_work.configs_of("SGLang", work, MODEL)
    assert tuned.args["page_size"] == 16 and tuned.args["disable_radix_cache"] is True
    assert tuned.args["cuda_graph_max_bs_decode"] == 64 and "enable_torch_compile" not in tuned.args
    compile_work = peer_work.PeerWork(batches=(1, 64), sglang_compile=True)
    compiled = peer_work.configs_of("SGLang", compile_work, MODEL)[1]
    assert compiled.args["enable_torch_compile"] and compiled.args["torch_compile_max_bs"] == 64
    assert all(c.why for c in mini + [tuned, compiled])


@pytest.mark.parametrize("argv, said", [
    (["--batches", "0"], "--batches must be between 1 and 256"),
    (["--models", "bundled"], "is not one of"),
    (["--repeats", "0"], "--repeats and --prompt-len must be at least 1"),
    (["--minisgl", "/nonexistent/peer"], "run studies/peers/minisglang/prepare.sh first"),
])
def test_bad_settings_get_a_message_not_a_traceback(argv, said, capsys):
    assert main(["mini-sglang", *argv]) == 2
    assert said in capsys.readouterr().err


def test_sglang_needs_its_packages(tmp_path, capsys):
    assert main(["sglang", "--sglang-site", str(tmp_path)]) == 2
    assert "--sglang-site" in capsys.readouterr().err


def test_without_a_gpu_it_says_so(tmp_path, monkeypatch, capsys):
    import torch
    (tmp_path / "minisgl").mkdir()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert main(["mini-sglang", "--minisgl", str(tmp_path)]) == 2
    assert "CUDA GPU" in capsys.readouterr().err


def test_an_unknown_peer_is_refused_by_the_parser():
    with pytest.raises(SystemExit):
        main(["vllm"])


def test_the_command_line_reaches_the_workload(monkeypatch):
    seen = {}
    monkeypatch.setattr(peer, "run", lambda *args: seen.setdefault("args", args) and 0)
    main(["mini-sglang", "--batches", "2", "8", "--new-tokens", "16",
          "--prompt-len", "8", "--site", "/tmp/site", "--json", "x.json"])
    name, work, paths, call = seen.pop("args")
    assert name == "mini-sglang" and call.json_path == Path("x.json") and call.record_dir is None
    assert (work.models, work.batches, work.new_tokens, work.prompt_len) == \
        (("qwen2.5-0.5b-shape",), (2, 8), 16, 8)
    assert work.repeats == 10 and work.record_batch == 0       # defaults: 10 runs, no record
    assert paths.site == Path("/tmp/site") and paths.minisgl.name == "python"
    assert call.command.startswith("python -m studies peers mini-sglang --batches 2 8")
    assert (call.budget_s, call.merge, call.with_ours) == (3600.0, False, True)
    main(["all", "--record", "out", "--repeats", "7", "--models",
          "qwen2.5-0.5b-shape", "llama-3.1-8b-shape", "--sglang-site", "/s", "--merge",
          "--skip-ours", "--budget-s", "500", "--warm-also", "smollm2-135m-shape", "--no-warm"])
    name, work, paths, call = seen["args"]
    assert (work.repeats, work.record_batch, work.record_tokens) == (7, 16, 64)
    assert work.models == ("qwen2.5-0.5b-shape", "llama-3.1-8b-shape")
    assert work.warm_also == ("smollm2-135m-shape",) and not work.warm
    assert call.record_dir == Path("out") and paths.sglang_site == Path("/s")
    assert (name, call.budget_s, call.merge, call.with_ours) == ("all", 500.0, True, False)


def test_each_peers_process_gets_its_loop_switch_and_paths(tmp_path):
    paths = peer_processes.PeerPaths(tmp_path / "python", tmp_path / "site", tmp_path / "sgl",
                                     tmp_path / "jit")
    serial = peer_processes.peer_env("Mini-SGLang", "normal", paths)
    overlap = peer_processes.peer_env("Mini-SGLang", "overlap", paths)
    assert serial["MINISGL_DISABLE_OVERLAP_SCHEDULING"] == "1"
    assert "MINISGL_DISABLE_OVERLAP_SCHEDULING" not in overlap
    assert serial["PYTHONPATH"].split(":")[:3] == [str(tmp_path / "site"),
                                                   str(tmp_path / "python"), str(peer_processes.ROOT)]
    assert serial["FLASHINFER_WORKSPACE_BASE"] == str(tmp_path / "jit" / "minisgl" / "flashinfer")
    sglang = peer_processes.peer_env("SGLang", "normal", paths, tmp_path / "plugin")
    assert sglang["PYTHONPATH"].split(":")[:3] == [str(tmp_path / "sgl"), str(tmp_path / "plugin"),
                                                   str(peer_processes.ROOT)]
    assert sglang["SGLANG_PLUGINS"] == "overlapdemo"
    assert "MINISGL_DISABLE_OVERLAP_SCHEDULING" not in sglang
    (tmp_path / "python").mkdir()
    assert paths.commit() == "unknown"
    (tmp_path / "python" / "COMMIT").write_text("20fcd7f\n")
    assert paths.commit() == "20fcd7f"


def test_the_hook_is_a_plugin_sglang_finds_in_its_scheduler_process(tmp_path):
    """SGLang loads the entry points of the group ``sglang.srt.plugins`` (its
    ``plugins/__init__.py``) before it builds its scheduler; a bare .dist-info folder on the
    path is one."""
    import subprocess
    folder = peer_processes.write_hook_plugin(tmp_path)
    found = subprocess.run(
        [sys.executable, "-c", "from importlib.metadata import entry_points; "
         "print([(e.name, e.value) for e in entry_points(group='sglang.srt.plugins')])"],
        env={"PYTHONPATH": str(folder)}, capture_output=True, text=True, check=True).stdout
    assert "('overlapdemo', 'studies.peers.sglang.hook:register')" in found


def test_every_engine_gets_the_same_prompts():
    work = peer_work.PeerWork(batches=(1, 4), record_batch=2, prompt_len=8)
    paths = peer_processes.PeerPaths(Path("/m"), trace_dir=Path("/t"))
    config = peer_work.configs_of("SGLang", work, MODEL)[0]
    spec = peer_processes.peer_spec(peer_processes.Target("SGLang", config, 0, MODEL, Path("/d"),
                                                          "overlap"), work, paths, True)
    assert spec["prompts"] == [peer_work.prompts_for(work, MODEL, b) for b in (1, 4)]
    assert spec["record"]["prompts"] == peer_work.prompts_for(work, MODEL, 2)
    assert all(len(p) == 8 and 0 < min(p) and max(p) < 151936 for p in spec["prompts"][1])
    assert spec["graph_bs"] == [1, 2, 4] and spec["max_seq_len"] == 8 + 128 + 16
    assert spec["config"] == config.args and spec["loop"] == "overlap"
    assert [(len(t["prompts"]), t["new_tokens"]) for t in spec["traces"]] == [(16, 128), (1, 16),
                                                                               (4, 16)]
    best = peer_work.configs_of("Mini-SGLang", work, MODEL)[0]
    mini = peer_processes.peer_spec(peer_processes.Target("Mini-SGLang", best, 0, MODEL, Path("/d"),
                                                          "normal"), work, paths, False)
    assert mini["prompts"] == spec["prompts"] and mini["record"] is None and not mini["traces"]


def test_the_model_folder_minisglang_reads(tmp_path):
    """config.json is the preset's shape; the tokenizer maps "t<i>" to id i, both ways."""
    pytest.importorskip("transformers")
    from transformers import AutoTokenizer

    from engine.models.loader import PRESETS
    out = peer_work.write_model_dir("smollm2-135m-shape", tmp_path / "m")
    config = json.loads((out / "config.json").read_text())
    spec = PRESETS["smollm2-135m-shape"]
    assert (config["vocab_size"], config["hidden_size"], config["num_attention_heads"],
            config["head_dim"]) == (spec.vocab_size, 576, 9, 64)   # 64: Mini-SGLang's RoPE
    tokenizer = AutoTokenizer.from_pretrained(str(out))
    ids = tokenizer("t5 t49151", add_special_tokens=False)["input_ids"]
    assert ids == [5, 49151]


# ---- Mini-SGLang's recorded runs on the page -------------------------------------------------

@pytest.fixture(scope="module")
def record():
    from record.imported.given_file import load_any
    return load_any(RECORD)                 # the page's loading path: validated, upgraded


def test_minisglangs_record_holds_both_loops_with_our_lanes_and_phases(record):
    assert RECORD.stat().st_size < 2 * 2**20
    assert record["env"]["engine"] == "mini-sglang" and record["config"]["cuda_graph"]
    assert [run["loop"] for run in record["runs"]] == ["normal", "overlap"]
    for run in record["runs"]:
        assert "Mini-SGLang" in run["label"]
        phases = {(s["lane"], s["phase"]) for s in run["spans"]}
        assert {("cpu", p) for p in ("schedule", "launch", "wait", "process_last")} <= phases
        assert {("engine_stream", "prefill"), ("engine_stream", "decode")} <= phases
        assert all(len(o["token_ids"]) == record["config"]["max_new_tokens"]
                   for o in run["outputs"])
        assert run["metrics"]["steady_step_us"] > 0 and run["metrics"]["t_fwd_us"] > 0
    serial, overlap = ({(s["lane"], s["phase"]) for s in run["spans"]} for run in record["runs"])
    assert ("scheduler_stream", "upload") in overlap          # its scheduler stream's metadata
    assert not {lane for lane, phase in serial if phase == "upload"}   # on its engine stream
    assert {n.get("loop") for n in record["notes"]} == {"normal", "overlap", None}
    assert all(n["en"] and n["zh"] for n in record["notes"])


def test_minisglangs_record_draws_and_is_labelled_in_both_languages(record):
    import viz
    figure = viz.side_by_side_figure(record["runs"]).to_plotly()      # validated by plotly
    names = {trace.name for trace in figure.data}
    assert len(figure.data) > 5 and {"decode", "schedule"} <= names, names
    zoomed = viz.side_by_side_figure(record["runs"], window=(20, 25)).to_plotly()
    assert len(zoomed.data) > 5
    label = viz.record_label(record)
    assert label.startswith("Mini-SGLang (the article's code) · ") and "NVIDIA H200" in label
    assert viz.record_label(record, "zh").startswith("Mini-SGLang（文章所读的代码）")
    for lang in ("en", "zh"):
        assert "<table" in viz.metrics_html(record["runs"], lang)


def test_the_page_lists_minisglangs_record_among_the_recorded_runs():
    pytest.importorskip("gradio")
    from ui import recorded_runs as records
    choices = dict(records.list_recorded()["choices"])
    label = next(label for label, name in choices.items() if name == RECORD.name)
    assert label.startswith("h200-minisglang-qwen05-b16: Mini-SGLang (the article's code)")
    zh = dict(records.list_recorded("中文", RECORD.name)["choices"])      # a language switch
    assert next(label for label, name in zh.items() if name == RECORD.name).startswith(
        "h200-minisglang-qwen05-b16: Mini-SGLang（文章所读的代码） · 提交 20fcd7f")
    assert records.list_recorded("中文", RECORD.name)["value"] == RECORD.name


# ---- the orchestration, with a stand-in for a peer's process -------------------------------------

STAND_IN = '''
"""A stand-in for a peer's runner: the contract of studies/peers/sglang/runner.py, without SGLang."""
import json, sys
from pathlib import Path
spec = json.loads(Path(sys.argv[1]).read_text())
if spec.get("warm_only"):
    sys.exit(0)
record = json.loads(Path(spec["model_dir"]).parent.joinpath("record.json").read_text())
loop = spec["loop"]
out = {"loop": loop, "config": spec["config"], "config_name": spec["config_name"],
       "start_s": 1.0, "record": None, "traces": [],
       "env": {"device_name": "NVIDIA H200", "torch_version": "2.11.0+cu130",
               "sglang_version": "0.5.17"},
       "batches": [{"batch": len(p), "tokens": 128 * len(p), "plain_s": [0.5] * spec["repeats"],
                    "hooked_s": [0.6] * spec["repeats"], "figures": None}
                   for p in spec["prompts"]]}
if spec["record"]:
    run = next(r for r in record["runs"] if r["loop"] == loop)
    out["record"] = {**run, "label": loop + " (SGLang 0.5.17)"}
    out["hook_cost"] = {"plain_s": [0.1, 0.1], "hooked_s": [0.11, 0.11], "tokens": 1024,
                        "steps": 65}
Path(sys.argv[2]).write_text(json.dumps(out))
'''


def test_the_orchestration_runs_every_loop_writes_rows_and_the_record(tmp_path, monkeypatch):
    import torch
    site = tmp_path / "site"
    (site / "sglang").mkdir(parents=True)
    (site / "stand_in_peer.py").write_text(STAND_IN)
    monkeypatch.setitem(peer_processes.RUNNERS, "SGLang", "stand_in_peer")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *_: "NVIDIA H200")
    made = []

    def model_dir(model, out):           # the stand-in reads Mini-SGLang's record beside it
        made.append(model)
        out.mkdir(parents=True, exist_ok=True)
        (out.parent / "record.json").write_text(RECORD.read_text())
        return out
    monkeypatch.setattr(peer, "write_model_dir", model_dir)
    work = peer_work.PeerWork(models=(MODEL,), batches=(1, 4), repeats=3, prompt_len=8)
    paths = peer_processes.PeerPaths(tmp_path / "python", sglang_site=site, jit_cache=tmp_path / "jit")
    json_path = tmp_path / "peer.json"
    json_path.write_text(json.dumps(peer_table.document({}, _rows())))   # an earlier run
    code = peer.run("sglang", work, paths, peer.Call(json_path, tmp_path / "rec", "cmd", "abc",
                                                     budget_s=600, merge=True, with_ours=False))
    assert code == 0 and made == [MODEL]
    doc = json.loads(json_path.read_text())
    sglang = [r for r in doc["rows"] if r["engine"] == "SGLang" and r["where"]["call"] != "c1"]
    assert {r["where"]["gpu"] for r in sglang} == {"NVIDIA H200"} and len(
        {r["where"]["call"] for r in sglang}) == 1           # this call's, its GPU named
    assert all(r["where"]["commit"] == "abc" and r["where"]["version"] == "release 0.5.17"
               and r["where"]["cpu"] for r in sglang)
    assert sorted((r["loop"], r["batch"], r["recording"]) for r in sglang) == sorted(
        (loop, b, rec) for loop in ("normal", "overlap") for b in (1, 4) for rec in ("off", "on"))
    assert all(r["runs"] == 3 and r["tok_s_median"] == 128 * r["batch"] / (
        0.5 if r["recording"] == "off" else 0.6) for r in sglang)
    assert any(r["engine"] == "Mini-SGLang" for r in doc["rows"])    # kept from the earlier run
    assert doc["header"]["earlier"] == [] and doc["header"]["notes"] == []
    from record.imported.given_file import load_any
    saved = load_any(tmp_path / "rec" / "h200-sglang-qwen05-b16.json")
    assert saved["env"]["engine"] == "sglang" and [r["loop"] for r in saved["runs"]] == [
        "normal", "overlap"]
    assert {n.get("key") for n in saved["notes"]} == {"hook_cost", "serial_metadata_spans"}
    assert all("SGLang" in n["en"] for n in saved["notes"])


@pytest.mark.parametrize("name, side_by_side", [("Mini-SGLang", False), ("SGLang", True)])
def test_warm_ups_run_side_by_side_only_where_the_peer_allows_two_at_once(
        tmp_path, monkeypatch, name, side_by_side):
    """Mini-SGLang's processes share one rendezvous port, so its second warm-up starts only once
    the first has ended; SGLang's start together. A warm-up that fails is said by shape."""
    events: list[str] = []

    class Proc:
        def __init__(self, argv, **_):
            self.model = json.loads(Path(argv[-2]).read_text())["model"]
            self.pid = -1
            events.append(f"start {self.model}")

        def wait(self, timeout=None):
            assert timeout is not None and timeout > 0     # never waits without a limit
            events.append(f"end {self.model}")
            return 1 if self.model == "b" else 0

    monkeypatch.setattr(peer_processes.subprocess, "Popen", Proc)
    monkeypatch.setattr(peer_processes, "_end_group", lambda _proc: None)
    specs = [{"model": m, "config": {}, "config_index": 0} for m in ("a", "b")]
    paths = peer_processes.PeerPaths(tmp_path / "python", sglang_site=tmp_path)
    failed = peer_processes.warm_up(name, specs, paths, tmp_path, 60)
    assert events == (["start a", "start b", "end a", "end b"] if side_by_side
                      else ["start a", "end a", "start b", "end b"])
    assert failed == [f"{name} warm-up on b: exit 1"]


def _call(engines: dict[str, str], models: list[str], ours: bool = False) -> dict[str, Any]:
    """A call's header: the engines it timed (name: commit) on the shapes given."""
    return {"commits": {name.lower(): commit for name, commit in engines.items()},
            "configurations": {f"{name}: best": {"page_size": 16} for name in engines
                               if name != "ours"},
            "ours": {"run": 1} if ours else {}, "workload": {"models": models}}


def test_a_merged_header_keeps_every_call_that_still_owns_rows():
    """SGLang on the small shape, then Mini-SGLang and ours on both, then SGLang on the large
    shape: each call still owns rows, so each stays (oldest first) with its commits; a fourth
    call that times SGLang on both shapes again leaves the first and third owning nothing."""
    small, large = "qwen2.5-0.5b-shape", "llama-3.1-8b-shape"
    first = _call({"SGLang": "0.5.17"}, [small])
    second = _call({"Mini-SGLang": "20fcd7f", "ours": "f53d0fd"}, [small, large], ours=True)
    third = _call({"SGLang": "0.5.17"}, [large])
    header = peer_table.merge_header(peer_table.merge_header(first, second), third)
    assert [set(c["commits"]) for c in header["earlier"]] == [{"sglang"}, {"mini-sglang", "ours"}]
    assert header["commits"] == {"sglang": "0.5.17", "mini-sglang": "20fcd7f", "ours": "f53d0fd"}
    assert set(header["configurations"]) == {"SGLang: best", "Mini-SGLang: best"}
    fourth = _call({"SGLang": "0.5.18"}, [small, large])
    again = peer_table.merge_header(header, fourth)
    assert [set(c["commits"]) for c in again["earlier"]] == [{"mini-sglang", "ours"}]
    assert again["commits"]["sglang"] == "0.5.18"


def test_what_no_longer_fits_the_budget_is_not_started_and_said(tmp_path, monkeypatch):
    import torch
    site = tmp_path / "site"
    (site / "sglang").mkdir(parents=True)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *_: "NVIDIA H200")
    monkeypatch.setattr(peer, "write_model_dir", lambda _model, out: out)
    monkeypatch.setattr(peer, "warm_up", lambda *_: [])
    work = peer_work.PeerWork(models=(MODEL,), batches=(1,), repeats=1)
    paths = peer_processes.PeerPaths(tmp_path / "python", sglang_site=site)
    code = peer.run("sglang", work, paths, peer.Call(tmp_path / "peer.json", None, "cmd", "abc",
                                                     budget_s=30, with_ours=False))
    doc = json.loads((tmp_path / "peer.json").read_text())
    assert code == 1 and doc["rows"] == []
    assert [n.endswith("not run (out of time)") for n in doc["header"]["notes"]] == [True, True]


# ---- what a peer's runner does with its runs (studies/peers/runs.py) ------------------------------

def _hooked_run(seconds: float, step_us: float, steps: int = 12, batch: int = 4):
    """A serial timeline of ``steps`` decode steps ``step_us`` long (a 60% forward, the rest the
    CPU's), as a peer's hooked run returns it."""
    from record.recorder import Span
    spans = []
    for n in range(steps):
        t, ids = n * step_us, list(range(batch))
        spans += [Span("cpu", "schedule", n, t, t + 0.1 * step_us, batch, batch, ids),
                  Span("engine_stream", "decode", n, t + 0.1 * step_us, t + 0.7 * step_us,
                       batch, batch, ids),
                  Span("cpu", "wait", n, t + 0.1 * step_us, t + 0.7 * step_us, batch, batch, ids),
                  Span("cpu", "process_last", n, t + 0.7 * step_us, t + step_us, batch, batch,
                       ids)]
    outputs = [{"token_ids": list(range(steps)), "text": "", "finish_reason": "length",
                "prompt_tokens": 8, "arrival_us": 0.0, "first_token_us": step_us,
                "finish_us": steps * step_us, "token_us": [(i + 1) * step_us for i in range(steps)]}
               for _ in range(batch)]
    return seconds, batch * steps, spans, outputs, steps * step_us


def test_a_runner_interleaves_hooked_runs_with_plain_ones_and_reads_their_steps():
    calls = []

    def plain():
        calls.append("plain")
        return 1.0 + len(calls) / 100, 48

    def hooked():
        calls.append("hooked")
        return _hooked_run(1.5, step_us=1000.0 * len(calls))

    row = peer_runs.time_batch(plain, hooked, 4, 4, ("engine_stream",))
    assert calls == ["plain", "plain", "hooked", "plain", "plain", "hooked"]
    assert row["batch"] == 4 and row["tokens"] == 48 and len(row["plain_s"]) == 4
    assert row["hooked_s"] == [1.5, 1.5]
    # the hooked runs' steps were 3000 and 6000 us long: their median, and the forward's 60%
    assert row["figures"]["steady_step_us"] == pytest.approx(4500.0)
    assert row["figures"]["t_fwd_us"] == pytest.approx(2700.0)
    assert set(row["figures"]["cpu_phases_us"]) >= {"schedule", "process_last"}


def test_a_runner_whose_hook_failed_keeps_its_plain_runs():
    row = peer_runs.time_batch(lambda: (1.0, 48), lambda: None, 4, 3, ("engine_stream",))
    assert row["plain_s"] == [1.0, 1.0, 1.0] and row["hooked_s"] == [] and row["figures"] is None


def test_the_record_run_is_the_median_hooked_run_beside_the_plain_runs():
    from record.schema import BASE_LANES
    seconds = iter([9.0, 3.0, 1.0, 2.0])          # a warm-up, then three timed hooked runs
    plains = iter([5.0, 1.1, 1.2, 1.3])

    def hooked():
        took = next(seconds)
        return _hooked_run(took, step_us=1000.0 * took)     # the run's steps tell it apart

    run, cost = peer_runs.record_run(lambda: (next(plains), 48), hooked, 3, "normal",
                                     "normal (a peer)", BASE_LANES, ("engine_stream",))
    assert cost["plain_s"] == [1.1, 1.2, 1.3] and cost["hooked_s"] == [1.0, 2.0, 3.0]
    assert cost["tokens"] == 48 and cost["steps"] == run["metrics"]["steps"]
    assert run["loop"] == "normal" and run["label"] == "normal (a peer)"
    assert run["metrics"]["steady_step_us"] == pytest.approx(2000.0)   # the 2 s run, the median


def test_ours_is_timed_at_the_calls_start_and_end_and_pooled():
    """Our side of a call on the CPU (the same code as on the GPU): one engine per (shape, B),
    every setting timed at both ends, one row per setting holding both timings' runs."""
    from studies.peers.ours import OursTimed
    work = peer_work.PeerWork(models=("smollm2-135m-shape",), batches=(2,), repeats=1,
                              prompt_len=4, new_tokens=3, record_tokens=3)
    with OursTimed(work, device="cpu") as timed:
        timed.time("start")
        timed.time("end")
        rows = timed.rows()
    assert sorted((r["loop"], r["recording"]) for r in rows) == sorted(
        (loop, rec) for loop in ("normal", "overlap") for rec in ("on", "off"))
    for row in rows:
        assert row["runs"] == 2 and set(row["tok_s_by_timing"]) == {"start", "end"}
        assert row["tokens"] == 2 * 3 and row["batch"] == 2
        assert (row["step_ms"] is not None) == (row["recording"] == "on")
    assert timed.summary()["config"]["max_batch_size"] == 2


def test_a_peers_steps_are_numbered_from_one_as_ours_are():
    """SGLang numbers steps by its own counter (on from its warm-up): the record numbers them
    from 1, so one step window picks the same steps in every engine's run."""
    run = {"spans": [{"step": 5057, "lane": "cpu"}, {"step": None, "lane": "cpu"},
                     {"step": 5060, "lane": "engine_stream"}]}
    assert [s["step"] for s in peer_table.steps_from_one(run)["spans"]] == [1, None, 4]
    for stem in ("h200-sglang-qwen05-b16", "h200-minisglang-qwen05-b16"):
        record = json.loads((Path(__file__).resolve().parent.parent / "assets" / "recorded"
                             / f"{stem}.json").read_text())
        for r in record["runs"]:
            assert min(s["step"] for s in r["spans"] if s.get("step") is not None) == 1, stem
