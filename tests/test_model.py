"""Our model against transformers' on the same checkpoint: logits, batched and through pages."""

from __future__ import annotations

import random

import pytest
import torch
from conftest import requires_cuda

from engine.devices.runner import ModelRunner, RunnerConfig
from engine.models.loader import load_model
from engine.scheduler.request import NUM_INT_COLS

ARCHS = ["llama", "qwen2", "qwen3"]


def _hf(path, dtype, device):
    from transformers import AutoModelForCausalLM
    return AutoModelForCausalLM.from_pretrained(path, dtype=dtype).to(device).eval()


def _runner(path, dtype, device, page_size=4, slots=4, seq=64, attention="auto", compile=False):
    loaded = load_model(str(path), device, dtype)
    pages = slots * (seq // page_size)
    return ModelRunner(loaded.model, RunnerConfig(slots, seq, pages, page_size, dtype,
                                                  torch.device(device), attention=attention,
                                                  compile=compile))


def _prefill_logits(runner: ModelRunner, prompts: list[list[int]], chunk: int):
    """Prefill several prompts of different lengths together, ``chunk`` tokens per step, through
    the paged cache; return each prompt's last-token logits."""
    ps, pages_per_seq = runner.page_size, runner.max_seq_len // runner.page_size
    width = NUM_INT_COLS + pages_per_seq
    dev = runner.device
    done = [0] * len(prompts)
    last = [None] * len(prompts)
    while any(d < len(p) for d, p in zip(done, prompts)):
        ints = torch.zeros(len(prompts), width, dtype=torch.int64)
        ints[:, NUM_INT_COLS:] = runner.scratch_page
        writes = []
        for i, p in enumerate(prompts):
            n = min(chunk, len(p) - done[i])
            ints[i, :3] = torch.tensor([i, done[i], n])
            # request i owns pages i*pages_per_seq ... (i+1)*pages_per_seq - 1
            ints[i, NUM_INT_COLS:] = torch.arange(i * pages_per_seq, (i + 1) * pages_per_seq)
            writes += [(i, done[i] + j, p[done[i] + j]) for j in range(n)]
        runner.write_prompts(torch.tensor(writes, dtype=torch.int64).T.to(dev))
        seq_len = int(ints[:, 2].max())
        kv_pages = -(-int((ints[:, 1] + ints[:, 2]).max()) // ps)
        logits = runner.forward_logits(ints.to(dev), seq_len, kv_pages)
        for i, p in enumerate(prompts):
            n = int(ints[i, 2])
            if n:
                done[i] += n
                if done[i] == len(p):
                    last[i] = logits[i].float().cpu()
    return torch.stack(last)


def _reference(hf, prompts, device):
    with torch.no_grad():
        return torch.stack([hf(torch.tensor([p], device=device)).logits[0, -1].float().cpu()
                            for p in prompts])


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("chunk", [1, 5, 64])
@pytest.mark.parametrize("attention", ["reference", "emulated"])
def test_logits_match_transformers_fp32_cpu(make_checkpoint, arch, chunk, attention):
    """``emulated``: every one-token step (all of them at chunk 1) goes through the paged decode
    path, the Triton kernel's split-K arithmetic done in PyTorch, instead of gather + SDPA."""
    if attention == "emulated" and chunk == 64:
        pytest.skip("no one-token steps: nothing takes the decode path")
    path = make_checkpoint(arch)
    rng = random.Random(arch + str(chunk))
    prompts = [[rng.randrange(4, 320) for _ in range(rng.randrange(1, 40))] for _ in range(4)]
    ours = _prefill_logits(_runner(path, torch.float32, "cpu", attention=attention), prompts, chunk)
    ref = _reference(_hf(path, torch.float32, "cpu"), prompts, "cpu")
    assert (ours - ref).abs().max().item() < 1e-4


@requires_cuda
@pytest.mark.cuda
@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("chunk,compile", [(7, False), (1, False), (1, True)])
def test_logits_match_transformers_cuda(make_checkpoint, arch, dtype, chunk, compile):
    """chunk 1: every step is a one-token step through the Triton kernel (and, with compile, the
    compiled regions around it)."""
    torch.backends.cuda.matmul.allow_tf32 = False
    path = make_checkpoint(arch)
    rng = random.Random(arch)
    prompts = [[rng.randrange(4, 320) for _ in range(rng.randrange(1, 40))] for _ in range(4)]
    ours = _prefill_logits(_runner(path, dtype, "cuda", compile=compile), prompts, chunk)
    ref = _reference(_hf(path, dtype, "cuda"), prompts, "cuda")
    scale = ref.abs().max().item()
    tol = 1e-4 if dtype == torch.float32 else 0.05
    assert (ours - ref).abs().max().item() < tol * max(scale, 1.0)


def test_preset_parameter_counts():
    from engine.models.loader import PRESETS
    expected = {"smollm2-135m-shape": 134_515_008, "qwen2.5-0.5b-shape": 494_032_768,
                "qwen2.5-1.5b-shape": 1_543_714_304, "llama-3.1-8b-shape": 8_030_261_248}
    for name, count in expected.items():
        assert PRESETS[name].num_parameters() == count, name


@pytest.mark.parametrize("arch", ARCHS)
def test_stacked_projections_round_trip_through_hf_names(make_checkpoint, arch, tmp_path):
    """q/k/v and gate/up are stacked at load and split again on save: the file we write is an
    ordinary Hugging Face checkpoint that transformers reads to the same weights and logits."""
    from safetensors.torch import load_file

    from engine.models.checkpoint import save_hf_checkpoint
    from engine.models.model import fuse_hf_state_dict, split_to_hf_state_dict

    path = make_checkpoint(arch)
    original = load_file(str(path / "model.safetensors"))
    loaded = load_model(str(path), "cpu", torch.float32)
    assert not any(k.endswith(("q_proj.weight", "gate_proj.weight"))
                   for k in loaded.model.state_dict())
    back = split_to_hf_state_dict(fuse_hf_state_dict(original), loaded.spec)
    assert back.keys() == original.keys()
    assert all(torch.equal(back[k], original[k]) for k in original)
    out = save_hf_checkpoint(loaded.model, tmp_path / "ours")
    saved = load_file(str(out / "model.safetensors"))
    assert set(saved) <= set(original) and set(original) - set(saved) <= {"lm_head.weight"}
    prompts = [[5, 6, 7, 8, 9], [10, 11]]
    ref = _reference(_hf(path, torch.float32, "cpu"), prompts, "cpu")
    again = _reference(_hf(out, torch.float32, "cpu"), prompts, "cpu")
    assert torch.equal(ref, again)
