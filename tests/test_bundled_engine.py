"""The bundled model through both stacks: our engine's greedy text equals transformers' generate.

Text prompts are tokenized as transformers does by default: ``tokenizer(text)`` adds the bundled
tokenizer's BOS (``<|endoftext|>``, id 0). The reference call passes the tokenizer's attention
mask, as a transformers user does: ``generate(input_ids, pad_token_id=0)`` without it would read
the BOS (id 0 = the pad id) as left padding and mask it out.
"""

from __future__ import annotations

import torch

from engine import Engine, EngineConfig, SamplingParams
from engine.models.loader import BUNDLED_DIR

PROMPTS = ["The license grants", "This module provides", "If the file does not exist,"]
ENGLISH = ["The license grants", "This module provides", "If the file does not exist,",
           "Once upon a time, in a small village", "The server waits for"]


def test_bundled_greedy_matches_transformers():
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(BUNDLED_DIR)
    hf = AutoModelForCausalLM.from_pretrained(BUNDLED_DIR, dtype=torch.float32).eval()
    ids = [tok.encode(p, add_special_tokens=False) for p in PROMPTS]
    with Engine(EngineConfig(model="bundled", device="cpu", dtype="float32")) as eng:
        res = eng.generate(ids, SamplingParams(max_new_tokens=24, ignore_eos=True))
        text = eng.generate(PROMPTS, SamplingParams(max_new_tokens=8, ignore_eos=True))
    for p, o in zip(ids, res.outputs):
        ref = hf.generate(torch.tensor([p]), max_new_tokens=24, do_sample=False,
                          eos_token_id=None, pad_token_id=0)[0, len(p):].tolist()
        assert o.token_ids == ref
    assert all(len(o.text.split()) >= 2 for o in text.outputs), "continuations should be words"


def test_bundled_text_prompts_match_transformers():
    """Five English prompts as text: the engine's greedy tokens equal transformers' (fp32)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(BUNDLED_DIR)
    hf = AutoModelForCausalLM.from_pretrained(BUNDLED_DIR, dtype=torch.float32).eval()
    with Engine(EngineConfig(model="bundled", device="cpu", dtype="float32")) as eng:
        res = eng.generate(ENGLISH, SamplingParams(max_new_tokens=24, ignore_eos=True))
    for text, out in zip(ENGLISH, res.outputs):
        enc = tok(text, return_tensors="pt")
        assert enc.input_ids[0, 0].item() == tok.bos_token_id
        ref = hf.generate(**enc, max_new_tokens=24, min_new_tokens=24, do_sample=False)
        assert out.token_ids == ref[0, enc.input_ids.shape[1]:].tolist(), text
        assert out.prompt_tokens == enc.input_ids.shape[1]


def test_output_texts_decode_all_requests_at_once_as_one_by_one():
    """``Engine._texts`` (one call of the fast tokenizer's backend for every request) gives
    what ``tokenizer.decode(ids, skip_special_tokens=True)`` gives each request, special tokens,
    ids past the vocabulary (left out) and empty outputs included."""
    from types import SimpleNamespace

    from engine.models.loader import load_tokenizer

    tok = load_tokenizer(str(BUNDLED_DIR))
    gen = torch.Generator().manual_seed(3)
    n = len(tok)
    id_lists = [torch.randint(0, n + 20, (int(k),), generator=gen).tolist()
                for k in torch.randint(0, 40, (30,), generator=gen)] + [[], [n + 1]]
    id_lists.append(list(tok.all_special_ids) + id_lists[0])
    got = Engine._texts(SimpleNamespace(tokenizer=tok), id_lists)
    want = [tok.decode([t for t in ids if t < n], skip_special_tokens=True) for ids in id_lists]
    assert got == want


def test_metrics_are_worked_out_from_the_spans_when_first_read():
    """``generate`` returns the outputs and the resolved spans; the metrics and the host report
    are computed on first read (off the timed call), and equal what the spans give."""
    from record.metrics import compute_metrics
    from record.schema import GPU_LANES

    with Engine(EngineConfig(model="bundled", device="cpu", max_batch_size=4, max_seq_len=64)) as eng:
        res = eng.generate(["a b c", "d e"], SamplingParams(max_new_tokens=6, ignore_eos=True))
        assert res.summarize is not None and "_summary" not in vars(res)   # nothing computed yet
        assert res.metrics["output_tokens"] == 12 == sum(len(o.token_ids) for o in res.outputs)
        assert res.summarize is None                                    # worked out once
        want = compute_metrics(res.timeline, [o.__dict__ for o in res.outputs], GPU_LANES,
                               wall_us=res.wall_s * 1e6)
        assert {k: res.metrics[k] for k in want} == want
        assert "other_cpu_frac" in res.host or res.host == {}
        assert res.to_run_dict()["metrics"] == res.metrics
