"""The peer benchmark's CPU side (no GPU, no Mini-SGLang process): its rows, tables and JSON, its
argument handling, the model folder and prompts it gives Mini-SGLang, and Mini-SGLang's recorded
runs as the page reads, lists and draws them."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import peer, peer_table  # noqa: E402
from bench.__main__ import main  # noqa: E402

RECORD = ROOT / "assets" / "recorded" / "h200-minisglang-qwen05-b16.json"
FIGURES = {"steady_step_us": 2000.0, "t_fwd_us": 1200.0, "t_cpu_us": 700.0,
           "cpu_phases_us": {"receive": 5.0, "schedule": 300.0, "launch": 250.0, "wait": 600.0,
                             "process_last": 145.0}}


def _minisgl_out(loop: str, plain_s: list[float], hooked_s: list[float]) -> dict:
    return {"loop": loop, "batches": [{"batch": 4, "tokens": 400, "plain_s": plain_s,
                                       "hooked_s": hooked_s, "figures": FIGURES}]}


def _rows() -> list[dict]:
    rows = peer_table.minisgl_rows(_minisgl_out("normal", [0.5, 0.4, 0.8], [0.5, 0.5, 1.0]))
    rows += peer_table.minisgl_rows(_minisgl_out("overlap", [0.25, 0.2, 0.4], [0.2, 0.25, 0.4]))
    rows.append(peer_table.speed_row("ours", "normal", 4, "on", [1.0, 0.8, 1.6], 400, FIGURES,
                                     "these runs"))
    rows.append(peer_table.speed_row("ours", "overlap", 4, "off", [0.5, 0.5, 0.5], 400))
    return peer_table.add_ratios(rows)


def test_rows_report_the_median_and_range_and_the_ratio_to_minisglangs_own_code():
    rows = {(r["engine"], r["loop"], r["recording"]): r for r in _rows()}
    base = rows[("Mini-SGLang", "normal", "off")]
    assert (base["tok_s_min"], base["tok_s_median"], base["tok_s_max"]) == (500, 800, 1000)
    assert base["tok_s_runs"] == [800, 1000, 500]                  # in the order they ran
    assert base["step_ms"] == 2.0 and base["forward_ms"] == 1.2 and base["cpu_ms"] == 0.7
    assert base["vs_minisgl"] == 1.0
    assert rows[("Mini-SGLang", "normal", "on")]["vs_minisgl"] == pytest.approx(800 / 800)
    assert rows[("ours", "normal", "on")]["tok_s_median"] == 400
    assert rows[("ours", "normal", "on")]["vs_minisgl"] == pytest.approx(0.5)
    off = rows[("ours", "overlap", "off")]
    assert off["vs_minisgl"] == pytest.approx(800 / 1600)
    assert off["step_ms"] is None and off["figures_from"] is None   # recording off: no spans


def test_tables_and_json_say_what_the_rows_hold():
    doc = peer_table.document({"gpu": "NVIDIA H200"}, _rows())
    table = peer_table.format_table(doc["rows"])
    assert "| Mini-SGLang | normal | 4 | off | 800 [500-1,000] | 2.000* | 1.200* | 1.00x |" in table
    assert "| ours | normal | 4 | on | 400 [250-500] | 2.000 | 1.200 | 0.50x |" in table
    assert "| ours | overlap | 4 | off | 800 [800-800] | – | – | 0.50x |" in table
    lines = table.splitlines()[2:]
    assert [line.split(" | ")[0:2] for line in lines[:3]] == [
        ["| Mini-SGLang", "normal"], ["| Mini-SGLang", "normal"], ["| ours", "normal"]]
    phases = peer_table.format_phases(doc["rows"])
    assert "| ours | normal | 4 | 2000 | 1200 | 5 | 300 | 250 | 600 | 145 | 700 |" in phases
    assert "overlap | 4 | off" not in phases                   # only runs with spans
    gains = {(g["engine"], g["recording"]): g for g in doc["overlap_gains"]}
    assert gains[("Mini-SGLang", "off")]["end_to_end"] == pytest.approx(2.0)
    assert gains[("Mini-SGLang", "off")]["per_step"] == pytest.approx(1.0)
    assert ("ours", "on") not in gains                          # ours ran overlap with it off
    assert json.loads(json.dumps(doc, allow_nan=False)) == doc


def test_a_row_without_timed_runs_is_refused():
    with pytest.raises(ValueError, match="no timed runs"):
        peer_table.speed_row("ours", "normal", 1, "on", [], 128)


def test_the_hooks_cost_is_said_in_both_languages():
    note = peer_table.hook_cost_note("normal", {"plain_s": [0.10, 0.12, 0.11],
                                                "hooked_s": [0.12, 0.121, 0.13], "steps": 64})
    assert note["cost_pct"] == pytest.approx(10.0)
    assert note["per_step_us"] == pytest.approx(0.011 / 64 * 1e6)
    assert "serial loop" in note["en"] and "+10.0%" in note["en"] and "3 runs" in note["en"]
    assert "串行" in note["zh"] and "+10.0%" in note["zh"]


def test_file_names_and_graph_sizes():
    assert peer_table.gpu_tag("NVIDIA H200") == "h200" and peer_table.gpu_tag("") == "gpu"
    assert peer_table.record_name("NVIDIA H200", "qwen2.5-0.5b-shape", 16) == \
        "h200-minisglang-qwen05-b16.json"
    assert peer.graph_sizes((1, 64, 16)) == [1, 2, 4, 8, 16, 32, 64]
    assert peer.graph_sizes((3,)) == [1, 2, 3]


@pytest.mark.parametrize("argv, said", [
    (["--batches", "0"], "--batches must be between 1 and 256"),
    (["--models", "bundled"], "is not one of"),
    (["--repeats", "0"], "--repeats and --prompt-len must be at least 1"),
    (["--minisgl", "/nonexistent/peer"], "run scripts/prepare_peer.sh first"),
])
def test_bad_settings_get_a_message_not_a_traceback(argv, said, capsys):
    assert main(["--peer", "mini-sglang", *argv]) == 2
    assert said in capsys.readouterr().err


def test_without_a_gpu_it_says_so(tmp_path, monkeypatch, capsys):
    import torch
    (tmp_path / "minisgl").mkdir()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert main(["--peer", "mini-sglang", "--minisgl", str(tmp_path)]) == 2
    assert "CUDA GPU" in capsys.readouterr().err


def test_an_unknown_peer_is_refused_by_the_parser():
    with pytest.raises(SystemExit):
        main(["--peer", "vllm"])


def test_the_command_line_reaches_the_workload(monkeypatch):
    seen = {}
    monkeypatch.setattr(peer, "run", lambda *args: seen.setdefault("args", args) and 0)
    main(["--peer", "mini-sglang", "--batches", "2", "8", "--new-tokens", "16",
          "--prompt-len", "8", "--site", "/tmp/site", "--json", "x.json"])
    name, work, paths, json_path, record_dir, command, commit = seen.pop("args")
    assert name == "mini-sglang" and json_path == Path("x.json") and record_dir is None
    assert (work.model, work.batches, work.new_tokens, work.prompt_len) == \
        ("qwen2.5-0.5b-shape", (2, 8), 16, 8)
    assert work.repeats == 5 and work.record_batch == 0        # defaults: 5 runs, no record
    assert paths.site == Path("/tmp/site") and paths.minisgl.name == "python"
    assert command.startswith("python -m bench --peer mini-sglang --batches 2 8")
    main(["--peer", "mini-sglang", "--peer-record", "out", "--repeats", "7"])
    work, record_dir = seen["args"][1], seen["args"][4]
    assert (work.repeats, work.record_batch, work.record_tokens) == (7, 16, 64)
    assert record_dir == Path("out")


def test_minisglangs_process_gets_its_loop_switch_and_paths(tmp_path):
    paths = peer.PeerPaths(tmp_path / "python", tmp_path / "site", tmp_path / "jit")
    serial, overlap = peer.minisgl_env("normal", paths), peer.minisgl_env("overlap", paths)
    assert serial["MINISGL_DISABLE_OVERLAP_SCHEDULING"] == "1"
    assert "MINISGL_DISABLE_OVERLAP_SCHEDULING" not in overlap
    assert serial["PYTHONPATH"].split(":")[:3] == [str(tmp_path / "site"),
                                                   str(tmp_path / "python"), str(peer.ROOT)]
    assert serial["FLASHINFER_WORKSPACE_BASE"] == str(tmp_path / "jit" / "flashinfer")
    assert serial["TVM_FFI_CACHE_DIR"] == str(tmp_path / "jit" / "tvm-ffi")
    (tmp_path / "python").mkdir()
    assert paths.commit() == "unknown"
    (tmp_path / "python" / "COMMIT").write_text("20fcd7f\n")
    assert paths.commit() == "20fcd7f"


def test_both_engines_get_the_same_prompts():
    work = peer.PeerWork(batches=(1, 4), record_batch=2, prompt_len=8)
    spec = peer.minisgl_spec(work, Path("/m"), "20fcd7f")
    assert spec["prompts"] == [peer.prompts_for(work, 1), peer.prompts_for(work, 4)]
    assert spec["record"]["prompts"] == peer.prompts_for(work, 2)
    assert all(len(p) == 8 and 0 < min(p) and max(p) < 151936 for p in spec["prompts"][1])
    assert spec["graph_bs"] == [1, 2, 4] and spec["max_seq_len"] == 8 + 128 + 16


def test_the_model_folder_minisglang_reads(tmp_path):
    """config.json is the preset's shape; the tokenizer maps "t<i>" to id i, both ways."""
    pytest.importorskip("transformers")
    from transformers import AutoTokenizer

    from engine.models.loader import PRESETS
    out = peer.write_model_dir("smollm2-135m-shape", tmp_path / "m")
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
    from record.any_file import load_any
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
    assert viz.record_label(record).startswith("Mini-SGLang (the article's code) · NVIDIA H200")
    assert viz.record_label(record, "zh").startswith("Mini-SGLang（文章所读的代码）")
    for lang in ("en", "zh"):
        assert "<table" in viz.metrics_html(record["runs"], lang)


def test_the_page_lists_minisglangs_record_among_the_recorded_runs():
    pytest.importorskip("gradio")
    from ui import recorded_runs as records
    choices = dict(records.list_recorded()["choices"])
    label = next(label for label, name in choices.items() if name == RECORD.name)
    assert label.startswith("h200-minisglang-qwen05-b16: Mini-SGLang (the article's code)")
