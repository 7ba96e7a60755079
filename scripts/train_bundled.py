"""Train the bundled tiny Llama from scratch: tokenizer, model, samples and model card in one run.

Learnt from ``data/corpus.txt`` (``scripts/make_corpus.py``): ``train_tokenizer``,
``encode_corpus``, ``train`` (the best validation weights kept), ``save_bundle``. The defaults
reproduce ``assets/bundled``, whose ``train_log.json`` has the exact command. Runs stop at
``--max-epochs``, ``--steps`` or ``--time-budget-s``, whichever comes first::

    python3 scripts/train_bundled.py --device cuda --corpus data/corpus.txt \
        --out assets/bundled --time-budget-s 300"""

from __future__ import annotations

import argparse
import csv
import json
import math
import platform
import re
import shlex
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import tokenizers
import torch
import torch.nn.functional as F
import transformers
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

sys.path.insert(0, str(Path(__file__).resolve().parent))
from model_card import SAMPLE_PROMPTS, render_model_card  # noqa: E402  (sibling script, not a package)

END_OF_TEXT = "<|endoftext|>"
MAX_BUNDLE_BYTES = 25_000_000  # the 25 MB budget, in decimal megabytes to be strict
VAL_EVERY_NTH_DOC = 50
RECORDS = ("README.md", "train_log.json", "loss_curve.csv", "samples.txt")


# --- data ------------------------------------------------------------------------------------


def read_documents(corpus: Path) -> list[str]:
    """Documents are separated by two blank lines (see make_corpus.py)."""
    text = corpus.read_text(encoding="utf-8")
    return [doc.strip() for doc in re.split(r"\n{3,}", text) if doc.strip()]


def train_tokenizer(documents: list[str], vocab_size: int) -> PreTrainedTokenizerFast:
    """Byte-level BPE: any UTF-8 text round-trips; <|endoftext|> is prepended to every encoding."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2,
                                  special_tokens=[END_OF_TEXT],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(documents, trainer)
    eot = tokenizer.token_to_id(END_OF_TEXT)
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{END_OF_TEXT} $A", pair=f"{END_OF_TEXT} $A {END_OF_TEXT} $B:1",
        special_tokens=[(END_OF_TEXT, eot)])
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token=END_OF_TEXT,
                                   eos_token=END_OF_TEXT, pad_token=END_OF_TEXT,
                                   model_max_length=1024)


def encode_corpus(tokenizer: PreTrainedTokenizerFast, documents: list[str],
                  ) -> tuple[torch.Tensor, torch.Tensor]:
    """Token streams ``<eos> doc <eos> doc ...`` for train and validation (1-D int64, on CPU)."""
    encodings = tokenizer.backend_tokenizer.encode_batch(documents)  # adds the leading <eos>
    train_ids: list[int] = []
    val_ids: list[int] = []
    for index, encoding in enumerate(encodings):
        (val_ids if index % VAL_EVERY_NTH_DOC == 0 else train_ids).extend(encoding.ids)
    return torch.tensor(train_ids, dtype=torch.long), torch.tensor(val_ids, dtype=torch.long)


def random_windows(tokens: torch.Tensor, batch_size: int, seq_len: int,
                   generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs and next-token targets from random offsets, gathered on the tokens' device."""
    starts = torch.randint(0, tokens.numel() - seq_len - 1, (batch_size, 1),
                           device=tokens.device, generator=generator)
    window = tokens[starts + torch.arange(seq_len + 1, device=tokens.device)]  # [B, T+1]
    return window[:, :-1], window[:, 1:]  # [B, T], [B, T]


# --- model and schedule ----------------------------------------------------------------------


def build_model(args: argparse.Namespace, tokenizer: PreTrainedTokenizerFast) -> LlamaForCausalLM:
    eot = tokenizer.eos_token_id
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=args.hidden_size,
        intermediate_size=args.intermediate_size, num_hidden_layers=args.layers,
        num_attention_heads=args.heads, num_key_value_heads=args.kv_heads,
        max_position_embeddings=1024, rms_norm_eps=1e-5,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        tie_word_embeddings=args.tie_embeddings, bos_token_id=eot, eos_token_id=eot,
        pad_token_id=eot)
    return LlamaForCausalLM(config)


def add_residual_dropout(model: LlamaForCausalLM, p: float) -> None:
    """Dropout on the embeddings and each attention and MLP output, in training only: forward
    hooks, so what is saved stays a plain Llama checkpoint."""
    if p <= 0:
        return

    def drop(module: torch.nn.Module, _inputs: tuple, output):
        if isinstance(output, tuple):  # attention returns (output, weights)
            return (F.dropout(output[0], p, module.training), *output[1:])
        return F.dropout(output, p, module.training)

    model.model.embed_tokens.register_forward_hook(drop)
    for layer in model.model.layers:
        layer.self_attn.register_forward_hook(drop)
        layer.mlp.register_forward_hook(drop)


def learning_rate(progress: float, step: int, args: argparse.Namespace) -> float:
    """Linear warmup over ``warmup_steps``, then cosine from ``lr`` to ``lr * min_lr_ratio``."""
    if step < args.warmup_steps:
        return args.lr * (step + 1) / args.warmup_steps
    cosine = 0.5 * (1.0 + math.cos(math.pi * min(progress, 1.0)))
    return args.lr * (args.min_lr_ratio + (1.0 - args.min_lr_ratio) * cosine)


def make_optimizer(model: torch.nn.Module, args: argparse.Namespace) -> torch.optim.AdamW:
    """AdamW; matrices decay, norm gains do not. Fused kernels on CUDA."""
    matrices = [p for p in model.parameters() if p.dim() >= 2]
    vectors = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": matrices, "weight_decay": args.weight_decay},
              {"params": vectors, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=args.lr, betas=(0.9, 0.95),
                             fused=args.device.startswith("cuda"))


# --- training --------------------------------------------------------------------------------


@dataclass
class TrainResult:
    """What the loop measured; the best-validation weights are already loaded into the model."""

    curve: list[dict] = field(default_factory=list)  # rows of loss_curve.csv
    steps: int = 0
    wall_s: float = 0.0
    best_val_loss: float = float("inf")
    best_step: int = 0
    stopped_by: str = "steps"
    prep_s: float = 0.0  # tokenizer training and encoding, before the loop


def next_token_loss(model: torch.nn.Module, inputs: torch.Tensor, targets: torch.Tensor,
                    device: str) -> torch.Tensor:
    cuda = device.startswith("cuda")
    with torch.autocast(device_type="cuda" if cuda else "cpu", dtype=torch.bfloat16, enabled=cuda):
        logits = model(input_ids=inputs).logits  # [B, T, V]
    return F.cross_entropy(logits.float().flatten(0, 1), targets.flatten())


@torch.no_grad()
def validation_loss(model: torch.nn.Module, val: torch.Tensor, args: argparse.Namespace) -> float:
    """Mean loss over the same fixed windows every time, so the curve is comparable."""
    model.eval()
    generator = torch.Generator(device=val.device).manual_seed(1234)
    losses = [next_token_loss(model, *random_windows(val, args.batch_size, args.seq_len,
                                                     generator), args.device)
              for _ in range(args.eval_batches)]
    model.train()
    return torch.stack(losses).mean().item()


def train(model: torch.nn.Module, train_ids: torch.Tensor, val_ids: torch.Tensor,
          args: argparse.Namespace) -> TrainResult:
    """The loop: random windows -> loss -> clipped AdamW step; evaluate every ``eval_every``."""
    optimizer = make_optimizer(model, args)
    forward = torch.compile(model) if args.compile else model
    generator = torch.Generator(device=train_ids.device).manual_seed(args.seed)
    result, best_state = TrainResult(), None
    loss_sum = torch.zeros((), device=train_ids.device)  # summed on device: no sync per step
    losses_in_sum, start = 0, time.perf_counter()
    for step in range(args.steps):
        progress = step / args.steps         # by steps, or by time where that is ahead
        if args.time_budget_s:
            progress = max(progress, (time.perf_counter() - start) / args.time_budget_s)
        if progress >= 1.0:
            result.stopped_by = "time budget"
            break
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(progress, step, args)
        inputs, targets = random_windows(train_ids, args.batch_size, args.seq_len, generator)
        loss = next_token_loss(forward, inputs, targets, args.device)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.grad_clip)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        loss_sum += loss.detach()
        losses_in_sum += 1
        result.steps = step + 1
        if result.steps % args.eval_every == 0 or result.steps == args.steps:
            best_state = _log_point(model, val_ids, args, result, best_state,
                                    (loss_sum / losses_in_sum).item(), start)
            loss_sum.zero_()
            losses_in_sum = 0
    if losses_in_sum:  # the time budget ended the run between log points
        best_state = _log_point(model, val_ids, args, result, best_state,
                                (loss_sum / losses_in_sum).item(), start)
    result.wall_s = time.perf_counter() - start
    if best_state is None:
        raise SystemExit("no training step ran: raise --time-budget-s or --steps")
    model.load_state_dict(best_state)
    return result


def _log_point(model: torch.nn.Module, val_ids: torch.Tensor, args: argparse.Namespace,
               result: TrainResult, best_state: dict | None, train_loss: float,
               start: float) -> dict | None:
    """Evaluate, append a curve row, and keep a CPU copy of the weights if validation improved."""
    val_loss = validation_loss(model, val_ids, args)
    elapsed = time.perf_counter() - start
    result.curve.append({"step": result.steps, "train_loss": round(train_loss, 4),
                         "val_loss": round(val_loss, 4), "elapsed_s": round(elapsed, 1)})
    print(f"step {result.steps:6d}  train {train_loss:.4f}  val {val_loss:.4f}  "
          f"{elapsed:7.1f}s", flush=True)
    if val_loss < result.best_val_loss:
        result.best_val_loss, result.best_step = val_loss, result.steps
        return {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}
    return best_state


# --- outputs ---------------------------------------------------------------------------------


def save_bundle(model: LlamaForCausalLM, tokenizer: PreTrainedTokenizerFast, out: Path) -> str:
    """Save weights in float32 if the bundle fits the budget that way, else bfloat16."""
    model = model.to("cpu")
    float32_bytes = 4 * sum(p.numel() for p in model.parameters())
    dtype = torch.float32 if float32_bytes <= MAX_BUNDLE_BYTES - 2**20 else torch.bfloat16
    model.to(dtype).save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    eot = tokenizer.eos_token_id
    GenerationConfig(bos_token_id=eot, eos_token_id=eot, pad_token_id=eot,
                     do_sample=False).save_pretrained(out)
    for path in out.iterdir():
        path.chmod(0o644)  # safetensors writes 0600; the bundle is meant to be read by anyone
    return str(dtype).removeprefix("torch.")


@torch.no_grad()
def greedy_samples(model: LlamaForCausalLM, tokenizer: PreTrainedTokenizerFast,
                   max_new_tokens: int = 40) -> list[dict]:
    """Greedy continuations with transformers' generate, from the saved (reloaded) weights."""
    samples = []
    for prompt in SAMPLE_PROMPTS:
        inputs = tokenizer(prompt, return_tensors="pt")
        output = model.generate(**inputs, max_new_tokens=max_new_tokens, do_sample=False)
        continuation = tokenizer.decode(output[0, inputs.input_ids.shape[1]:],
                                        skip_special_tokens=True)
        samples.append({"prompt": prompt, "continuation": continuation})
    return samples


def _write_records(out: Path, log: dict, curve: list[dict], samples: list[dict]) -> None:
    with (out / "loss_curve.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["step", "train_loss", "val_loss", "elapsed_s"])
        writer.writeheader()
        writer.writerows(curve)
    (out / "train_log.json").write_text(json.dumps(log, indent=2) + "\n")
    (out / "samples.txt").write_text("".join(
        f"PROMPT: {s['prompt']}\nGREEDY: {s['prompt']}{s['continuation']}\n\n" for s in samples))
    (out / "README.md").write_text(render_model_card(log, curve, samples))


def _bundle_bytes(out: Path) -> int:
    """Bytes of the model files (weights, configs, tokenizer), not of this run's records."""
    return sum(f.stat().st_size for f in out.iterdir() if f.is_file() and f.name not in RECORDS)


def _device_name(device: str) -> str:
    if device.startswith("cuda"):
        return torch.cuda.get_device_name(torch.device(device))
    threads = torch.get_num_threads()
    return f"CPU ({platform.machine()}, {threads} thread{'s' if threads > 1 else ''})"


def _corpus_stats(corpus: Path, documents: list[str], train_ids: torch.Tensor,
                  val_ids: torch.Tensor) -> dict:
    """Sizes measured here, plus the per-source stats make_corpus.py wrote next to the corpus."""
    sidecar = corpus.with_suffix(".json")
    made = json.loads(sidecar.read_text()) if sidecar.exists() else {}
    return {"path": str(corpus), "bytes": corpus.stat().st_size, "documents": len(documents),
            "train_tokens": train_ids.numel(), "val_tokens": val_ids.numel(),
            "val_split": f"every {VAL_EVERY_NTH_DOC}th document",
            "sources": made.get("sources"), "site_packages": made.get("site_packages")}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--corpus", type=Path, default=Path("data/corpus.txt"))
    p.add_argument("--out", type=Path, default=Path("assets/bundled"))
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--steps", type=int, default=20000, help="upper bound on optimizer steps")
    p.add_argument("--max-epochs", type=float, default=40.0,
                   help="also cap steps at this many passes over the training tokens")
    p.add_argument("--time-budget-s", type=float, default=None, help="stop (and decay) by then")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--seq-len", type=int, default=256)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--min-lr-ratio", type=float, default=0.05)
    p.add_argument("--warmup-steps", type=int, default=200)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--grad-clip", type=float, default=1.0)
    p.add_argument("--dropout", type=float, default=0.0, help="residual dropout, training only")
    p.add_argument("--eval-every", type=int, default=250)
    p.add_argument("--eval-batches", type=int, default=16)
    p.add_argument("--vocab-size", type=int, default=8192)
    p.add_argument("--hidden-size", type=int, default=256)
    p.add_argument("--intermediate-size", type=int, default=704)
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--kv-heads", type=int, default=4)
    p.add_argument("--tie-embeddings", action=argparse.BooleanOptionalAction, default=False,
                   help="share the input embedding with the output head (keeps files small)")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    p.add_argument("--compile", action="store_true", help="torch.compile the training forward")
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def settle_schedule(args: argparse.Namespace, train_tokens: int) -> str:
    """Cap the steps at ``max_epochs`` (the corpus is small: more passes only memorise it) and
    fit warmup and evaluation into short runs. Returns what limits the step count."""
    epoch_steps = math.ceil(args.max_epochs * train_tokens / (args.batch_size * args.seq_len))
    limit = "steps"
    if epoch_steps < args.steps:
        args.steps, limit = epoch_steps, "epoch cap"
    args.warmup_steps = max(1, min(args.warmup_steps, args.steps // 10))
    args.eval_every = max(1, min(args.eval_every, args.steps))
    return limit


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    torch.set_float32_matmul_precision("high")
    t0 = time.perf_counter()
    documents = read_documents(args.corpus)
    tokenizer = train_tokenizer(documents, args.vocab_size)
    train_ids, val_ids = encode_corpus(tokenizer, documents)
    prep_s = time.perf_counter() - t0
    print(f"{len(documents)} documents, {train_ids.numel():,} train / {val_ids.numel():,} val "
          f"tokens, vocab {len(tokenizer)}, prepared in {prep_s:.1f}s", flush=True)
    if min(train_ids.numel(), val_ids.numel()) <= args.seq_len + 1:
        raise SystemExit(f"corpus too small for --seq-len {args.seq_len}")
    step_limit = settle_schedule(args, train_ids.numel())
    print(f"{args.steps} steps at most ({step_limit}), warmup {args.warmup_steps}", flush=True)

    model = build_model(args, tokenizer).to(args.device)
    add_residual_dropout(model, args.dropout)
    n_params = sum(p.numel() for p in model.parameters())
    result = train(model, train_ids.to(args.device), val_ids.to(args.device), args)
    if result.stopped_by == "steps":
        result.stopped_by = step_limit
    result.prep_s = prep_s

    args.out.mkdir(parents=True, exist_ok=True)
    saved_dtype = save_bundle(model, tokenizer, args.out)
    samples = greedy_samples(LlamaForCausalLM.from_pretrained(args.out, dtype=torch.float32),
                             tokenizer)
    log = training_log(args, result, corpus=_corpus_stats(args.corpus, documents, train_ids,
                                                          val_ids),
                       tokenizer=tokenizer, model=model, n_params=n_params,
                       saved_dtype=saved_dtype)
    log["samples"] = samples
    _write_records(args.out, log, result.curve, samples)
    print(f"saved {args.out} ({log['bundle_bytes'] / 2**20:.1f} MiB of model files, "
          f"{saved_dtype}); best val {result.best_val_loss:.4f} at step {result.best_step}")
    for sample in samples:
        print(f"  {sample['prompt']!r} -> {sample['continuation']!r}")


def training_log(args: argparse.Namespace, result: TrainResult, corpus: dict,
                 tokenizer: PreTrainedTokenizerFast, model: LlamaForCausalLM, n_params: int,
                 saved_dtype: str) -> dict:
    """Everything the model card states, as train_log.json."""
    last = result.curve[-1]
    tokens_seen = result.steps * args.batch_size * args.seq_len
    return {
        "command": shlex.join(["python3", *sys.argv]),
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "corpus": corpus,
        "tokenizer": {"type": "byte-level BPE (tokenizers)", "vocab_size": len(tokenizer),
                      "special_tokens": [END_OF_TEXT]},
        "model": {"architecture": "LlamaForCausalLM", "parameters": n_params,
                  "saved_dtype": saved_dtype, "config": model.config.to_diff_dict()},
        "training": {"steps": result.steps, "stopped_by": result.stopped_by,
                     "tokens_seen": tokens_seen, "epochs": tokens_seen / corpus["train_tokens"],
                     "wall_s": round(result.wall_s, 1), "prep_s": round(result.prep_s, 1),
                     "final_train_loss": last["train_loss"], "final_val_loss": last["val_loss"],
                     "best_val_loss": round(result.best_val_loss, 4),
                     "best_step": result.best_step},
        "env": {"torch": torch.__version__, "transformers": transformers.__version__,
                "tokenizers": tokenizers.__version__, "python": platform.python_version(),
                "device": args.device, "device_name": _device_name(args.device)},
        "bundle_bytes": _bundle_bytes(args.out),
    }


if __name__ == "__main__":
    main()
