"""Render the bundled model's card (README.md) from what its training run recorded
(``train_log.json``, ``loss_curve.csv``), so the card cannot drift from its weights::

    python scripts/model_card.py assets/bundled                   # keeps the engine's samples
    python scripts/model_card.py assets/bundled --engine-samples  # and makes them again

Its last section holds greedy continuations from this engine beside transformers' own."""

from __future__ import annotations

import argparse
import csv
import json
import re
import sys
from pathlib import Path

_SOURCE_NOTES = {
    "stdlib-docstrings": ("Python 3.11 standard-library docstrings (ast, nothing imported)",
                          "PSF License"),
    "python-reference-topics": ("Python reference-manual topics (pydoc_data/topics.py)",
                                "PSF License"),
    "common-licenses": ("/usr/share/common-licenses full license texts",
                        "verbatim copying permitted"),
    "debian-copyright": ("license bodies quoted in /usr/share/doc/*/copyright",
                         "the licenses' own texts"),
    "gnu-info-manuals": ("GNU info manuals in /usr/share/info", "mostly GNU FDL"),
    "debian-readmes": ("package READMEs in /usr/share/doc", "each package's free license"),
    "debian-release-notes": ("package NEWS files and changelogs (stricter prose filter)",
                             "each package's free license"),
    "site-packages-docstrings": ("docstrings of installed Python packages whose metadata declares "
                                 "a permissive license (stricter prose filter)",
                                 "MIT, BSD, Apache-2.0, ISC or PSF"),
}


def _architecture(config: dict) -> str:
    rope = config.get("rope_parameters") or {"rope_theta": config.get("rope_theta")}
    tied = "tied" if config.get("tie_word_embeddings") else "untied"
    return (f"`LlamaForCausalLM`: hidden {config['hidden_size']}, "
            f"{config['num_hidden_layers']} layers, {config['num_attention_heads']} query heads / "
            f"{config['num_key_value_heads']} KV heads (GQA), head dim "
            f"{config['hidden_size'] // config['num_attention_heads']}, SwiGLU intermediate "
            f"{config['intermediate_size']}, RoPE theta {rope.get('rope_theta')}, RMSNorm eps "
            f"{config['rms_norm_eps']}, {tied} embeddings, context "
            f"{config['max_position_embeddings']}")


def _data_section(corpus: dict) -> list[str]:
    lines = ["## Data", "",
             f"{corpus['bytes']:,} bytes of English prose in {corpus['documents']:,} documents, "
             "gathered offline on a Debian + Python 3.11 machine by `scripts/make_corpus.py` "
             "(prose paragraphs only: code, doctests and tables dropped; paragraphs deduplicated). "
             f"Validation: {corpus['val_split']} held out ({corpus['val_tokens']:,} tokens; "
             f"{corpus['train_tokens']:,} training tokens).", ""]
    if corpus.get("sources"):
        lines += ["| source | license | bytes | documents |", "|---|---|---:|---:|"]
        for name, stats in corpus["sources"].items():
            what, license_name = _SOURCE_NOTES.get(name, (name, "see make_corpus.py"))
            lines.append(f"| {what} | {license_name} | {stats['bytes']:,} | "
                         f"{stats['documents']:,} |")
        lines.append("")
    if corpus.get("site_packages"):
        names = ", ".join(sorted(corpus["site_packages"]))
        lines += [f"Installed packages whose docstrings were used ({len(corpus['site_packages'])}; "
                  f"licenses in `train_log.json`): {names}.", ""]
    return lines


def _curve_section(curve: list[dict], rows: int = 10) -> list[str]:
    """An evenly spaced subset of the curve (first and last rows always included)."""
    if not curve:
        return []
    stride = max(1, (len(curve) - 1) // (rows - 1))
    picked = curve[::stride]
    if picked[-1] is not curve[-1]:
        picked.append(curve[-1])
    lines = ["## Loss curve", "", "Cross-entropy in nats per token; the full curve is "
             "`loss_curve.csv`.", "", "| step | train loss | val loss | elapsed (s) |",
             "|---:|---:|---:|---:|"]
    lines += [f"| {r['step']} | {float(r['train_loss']):.3f} | {float(r['val_loss']):.3f} | "
              f"{float(r['elapsed_s']):.0f} |" for r in picked]
    return lines + [""]


def _escape(text: str) -> str:
    """Markdown-escape model output so it renders as the text it is."""
    return re.sub(r"([\\`*_<>#|\[\]])", r"\\\1", text)


def _samples_section(samples: list[dict]) -> list[str]:
    lines = ["## Samples", "", "Greedy continuations (`temperature=0`, 40 new tokens) from "
             "transformers' `generate` on the saved weights, in `samples.txt`. Prompt in bold.", ""]
    for sample in samples:
        continuation = re.sub(r"\s+", " ", sample["continuation"])  # keeps its leading space
        lines += [f"- **{_escape(sample['prompt'])}**{_escape(continuation)}"]
    return lines + [""]


def render_model_card(log: dict, curve: list[dict], samples: list[dict]) -> str:
    """The whole README.md as one string."""
    model, training, env = log["model"], log["training"], log["env"]
    lines = [
        "# bundled: a tiny Llama trained from scratch for the overlap-scheduling demo", "",
        "Generated by `scripts/train_bundled.py` at the end of the run that trained these "
        "weights; re-render with `python scripts/model_card.py <dir>`, do not edit by hand.", "",
        "It exists so the demo's first run needs no network and prints English-like text, not "
        "noise. It is far too small to know anything: expect fluent-looking license and "
        "documentation phrases that say nothing true.", "",
        "| | |", "|---|---|",
        f"| files | {log['bundle_bytes'] / 2**20:.1f} MiB (weights stored as "
        f"{model['saved_dtype']} safetensors) |",
        f"| parameters | {model['parameters']:,} |",
        f"| architecture | {_architecture(model['config'])} |",
        f"| tokenizer | {log['tokenizer']['type']}, vocab {log['tokenizer']['vocab_size']:,}; "
        "`<|endoftext|>` is bos, eos and pad and is prepended to every encoded text |",
        f"| final loss | train {training['final_train_loss']:.3f}, validation "
        f"{training['final_val_loss']:.3f} (saved weights: best validation "
        f"{training['best_val_loss']:.3f} at step {training['best_step']}) |", "",
    ]
    lines += _data_section(log["corpus"])
    args = log["args"]
    on_cuda = env["device"].startswith("cuda")
    precision = "bf16 autocast" if on_cuda else "float32 (CPU)"
    dropout = (f"residual dropout {args['dropout']} (training only)" if args.get("dropout")
               else "no dropout")
    lines += [
        "## Training", "", f"    {log['command']}", "",
        f"On {env['device_name']}, torch {env['torch']}, transformers {env['transformers']}: "
        f"{training['steps']:,} steps of {args['batch_size']} x {args['seq_len']} tokens "
        f"(stopped by {training['stopped_by']}), {training['tokens_seen']:,} tokens seen "
        f"({training['epochs']:.1f} epochs), {training['wall_s']:.0f} s of training after "
        f"{training['prep_s']:.0f} s of tokenizer training and encoding. AdamW (betas 0.9/0.95, "
        f"weight decay {args['weight_decay']}), peak learning rate {args['lr']}, "
        f"{args['warmup_steps']} warmup steps then cosine decay, gradient clipping at "
        f"{args['grad_clip']}, {dropout}; {precision}. The weights saved are the ones with the "
        "lowest validation loss. Details: `train_log.json`.", "",
    ]
    lines += _curve_section(curve) + _samples_section(samples)
    lines += ["## Use", "", "```python",
              "from transformers import AutoModelForCausalLM, AutoTokenizer",
              'tok = AutoTokenizer.from_pretrained("assets/bundled")',
              'model = AutoModelForCausalLM.from_pretrained("assets/bundled")',
              'ids = tok("The license grants", return_tensors="pt").input_ids',
              "print(tok.decode(model.generate(ids, max_new_tokens=40, do_sample=False)[0]))",
              "```", ""]
    return "\n".join(lines)


ENGINE_SAMPLES = "## Samples from this project's engine"
SAMPLE_PROMPTS = ("The license grants", "This module provides", "The function returns",
                  "If the file does not exist,", "This program is free software")


def engine_samples_section(bundle: Path) -> str:
    """Greedy continuations of ``SAMPLE_PROMPTS`` by this project's engine, as the card's section."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from engine import Engine, EngineConfig, SamplingParams

    with Engine(EngineConfig(model=str(bundle.resolve()), device="cpu")) as eng:
        res = eng.generate(SAMPLE_PROMPTS, SamplingParams(max_new_tokens=40))
    lines = [ENGINE_SAMPLES, "", "Greedy, 40 new tokens at most, `Engine(EngineConfig(model=\"bundled\", "
             "device=\"cpu\"))` in its default (overlap) loop (made by `python scripts/model_card.py "
             "assets/bundled --engine-samples`). Prompt in bold.", ""]
    for prompt, out in zip(SAMPLE_PROMPTS, res.outputs):
        body = out.text.replace("\n", " ").strip()
        lines.append(f"- **{prompt}**{' ' if not body.startswith((',', '.')) else ''}{body} "
                     f"*({out.finish_reason})*")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("bundle", type=Path, help="directory with train_log.json, loss_curve.csv")
    parser.add_argument("--engine-samples", action="store_true",
                        help="generate the engine's samples again (CPU, a few seconds)")
    args = parser.parse_args()
    bundle, card = args.bundle, args.bundle / "README.md"
    log = json.loads((bundle / "train_log.json").read_text())
    with (bundle / "loss_curve.csv").open() as f:
        curve = list(csv.DictReader(f))
    old = card.read_text() if card.exists() else ""
    section = (engine_samples_section(bundle) if args.engine_samples
               else old[old.index(ENGINE_SAMPLES):] if ENGINE_SAMPLES in old else "")
    text = render_model_card(log, curve, log["samples"])
    card.write_text(text.rstrip() + "\n\n" + section if section else text)


if __name__ == "__main__":
    main()
