"""Bad input fails with a clear error that names the problem."""

from __future__ import annotations

import json

import pytest
from conftest import cuda_available

from engine import Engine, EngineConfig, SamplingParams
from engine.models.loader import ModelLoadError


@pytest.fixture(scope="module")
def engine(make_checkpoint):
    with Engine(EngineConfig(model=str(make_checkpoint("llama")), device="cpu",
                             max_seq_len=64, cpu_device_process=False)) as eng:
        yield eng


@pytest.mark.parametrize("prompts, words", [
    ([], "empty"), ([[]], "empty"), ("abc", "list"), ([[5] * 70], "max_seq_len"),
    ([[5, 99999]], "vocabulary"), ([[-1, 5]], "vocabulary"), ([[5, 2.0]], "integers, got float"),
    ([[5, True]], "integers, got bool"), ([["5"]], "integers, got str"),
])
def test_bad_prompts(engine, prompts, words):
    with pytest.raises(ValueError, match=words):
        engine.generate(prompts, SamplingParams(max_new_tokens=4))


@pytest.mark.parametrize("kwargs, field", [
    ({"max_new_tokens": 0}, "max_new_tokens"), ({"max_new_tokens": -3}, "max_new_tokens"),
    ({"temperature": -1.0}, "temperature"), ({"top_p": 0.0}, "top_p"), ({"top_k": -1}, "top_k"),
])
def test_bad_sampling_params(kwargs, field):
    with pytest.raises(ValueError, match=field):
        SamplingParams(**kwargs)


@pytest.mark.parametrize("kwargs, field", [
    ({"device": "tpu"}, "device"), ({"max_batch_size": 0}, "max_batch_size"),
    ({"page_size": 0}, "page_size"), ({"dtype": "int8"}, "dtype"), ({"model": ""}, "model"),
])
def test_bad_engine_config(kwargs, field):
    with pytest.raises(ValueError, match=field):
        EngineConfig(**kwargs)


def test_unknown_model_path():
    with pytest.raises(ModelLoadError, match="unknown model|not a local directory"):
        Engine(EngineConfig(model="/no/such/model_dir", device="cpu"))


def test_unsupported_architecture(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["GPT2LMHeadModel"],
                                                       "model_type": "gpt2"}))
    with pytest.raises(ModelLoadError, match="unsupported architecture"):
        Engine(EngineConfig(model=str(tmp_path), device="cpu"))


def test_trust_remote_code_refused(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({
        "architectures": ["LlamaForCausalLM"], "auto_map": {"AutoModel": "modeling_x.Model"}}))
    with pytest.raises(ModelLoadError, match="trust_remote_code"):
        Engine(EngineConfig(model=str(tmp_path), device="cpu"))


@pytest.mark.skipif(cuda_available(), reason="this machine has a GPU")
def test_cuda_without_gpu_is_a_clear_error():
    with pytest.raises(RuntimeError, match="CUDA requested but not available"):
        Engine(EngineConfig(device="cuda"))


def test_failed_run_leaves_clean_pools(make_checkpoint, monkeypatch):
    """A run that dies mid-way must not poison the engine: the error reaches the caller, and the
    next run starts with every page and slot free and still gives the right tokens."""
    from engine.scheduler.scheduler import Scheduler

    cfg = EngineConfig(model=str(make_checkpoint("llama")), device="cpu", max_seq_len=64,
                       max_batch_size=2, cpu_device_process=False)
    with Engine(cfg) as eng:
        params = SamplingParams(max_new_tokens=6, ignore_eos=True)
        good = eng.generate([[5, 6, 7]] * 3, params)
        calls = {"n": 0}
        original = Scheduler._append_token

        def failing(self, *args):
            calls["n"] += 1
            if calls["n"] == 4:
                raise RuntimeError("device lost mid-run")
            return original(self, *args)

        monkeypatch.setattr(Scheduler, "_append_token", failing)
        with pytest.raises(RuntimeError, match="mid-run"):
            eng.generate([[5, 6, 7]] * 3, params)
        monkeypatch.setattr(Scheduler, "_append_token", original)
        s = eng.stats()
        assert s["kv_pages_free"] == s["kv_pages_total"]
        assert s["req_slots_free"] == s["req_slots_total"]
        again = eng.generate([[5, 6, 7]] * 3, params)
        assert [o.token_ids for o in again.outputs] == [o.token_ids for o in good.outputs]


def test_context_longer_than_the_model_is_refused(make_checkpoint):
    with pytest.raises(ValueError, match="longer than the model's context"):
        Engine(EngineConfig(model=str(make_checkpoint("llama")), device="cpu", max_seq_len=4096,
                            cpu_device_process=False))


@pytest.mark.parametrize("text, words", [
    ("{not json", "not valid JSON"),
    ("[1, 2]", "expected a JSON object"),
    ('{"architectures": ["LlamaForCausalLM"], "hidden_size": 64}', "missing 'vocab_size'"),
    ('{"architectures": ["LlamaForCausalLM"], "vocab_size": "320", "hidden_size": 64, '
     '"num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 128}',
     "'vocab_size' must be a positive integer"),
])
def test_a_broken_config_json_is_named_with_its_path(tmp_path, text, words):
    (tmp_path / "config.json").write_text(text)
    with pytest.raises(ModelLoadError, match=words) as caught:
        Engine(EngineConfig(model=str(tmp_path), device="cpu"))
    assert str(tmp_path) in str(caught.value)


def test_a_checkpoint_with_wrong_shapes_fails_once_with_a_clear_message(make_checkpoint, tmp_path):
    """The device process finds the mismatch; the model is not loaded a second time in-process."""
    import json
    import shutil

    src = make_checkpoint("llama")
    for f in src.iterdir():
        shutil.copy(f, tmp_path / f.name)
    config = json.loads((tmp_path / "config.json").read_text())
    config["intermediate_size"] = 96                  # the weights say 128
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelLoadError, match="do not match|size mismatch"):
        Engine(EngineConfig(model=str(tmp_path), device="cpu"))


def test_a_checkpoint_without_a_tokenizer_takes_token_ids_only(make_checkpoint, tmp_path):
    import shutil

    for f in make_checkpoint("llama").iterdir():
        if "token" not in f.name:
            shutil.copy(f, tmp_path / f.name)
    with Engine(EngineConfig(model=str(tmp_path), device="cpu", max_seq_len=64,
                             cpu_device_process=False)) as eng:
        assert eng.tokenizer is None
        with pytest.raises(ValueError, match="no tokenizer"):
            eng.generate(["some text"], SamplingParams(max_new_tokens=2))
        assert eng.generate([[5, 6]], SamplingParams(max_new_tokens=2)).outputs
