"""How much a prefix cache can shorten TTFT on this GPU, at best: the linear layers alone.

    python -m studies ttft-bound [--model llama-3.1-8b-shape --prefix 512 --prompt-len 32
                                  --batch 16]

Times every layer's matrix products (cuBLAS, bf16) for the uncached prompt, the cached one and one
decode step of ``--batch`` rows; prints the best TTFT ratio (cache off / on),
``(wait + linears(prefix + prompt)) / (wait + linears(prompt))``, with no wait and with half a
decode step's wait (an arrival while the GPU decodes others).
"""

from __future__ import annotations

import statistics

import torch

from bench import cli
from bench.timing import copy_bandwidth_gbs, ms_per_call


def linears(spec) -> list[tuple[int, int]]:
    """(in, out) of every matrix product of one layer."""
    q = spec.num_heads * spec.head_dim
    kv = spec.num_kv_heads * spec.head_dim
    return [(spec.hidden_size, q + 2 * kv), (q, spec.hidden_size),
            (spec.hidden_size, 2 * spec.intermediate_size),
            (spec.intermediate_size, spec.hidden_size)]


def time_chain_ms(weights, head, rows: int, repeats: int = 7, iters: int = 5) -> list[float]:
    """Milliseconds for every layer's products on ``rows`` rows, then the head on one row."""
    dev = head.device
    inputs = {k: torch.randn(rows, k, device=dev, dtype=torch.bfloat16)
              for k in {w.shape[0] for layer in weights for w in layer}}
    last = torch.randn(1, head.shape[0], device=dev, dtype=torch.bfloat16)

    def chain():
        for layer in weights:
            for w in layer:
                torch.mm(inputs[w.shape[0]], w)
        torch.mm(last, head)

    for _ in range(2):
        chain()
    return ms_per_call(chain, iters, repeats)


def run(model: str, prefix: int, prompt: int, batch: int) -> int:
    """Print the linears' times for the uncached prompt, the cached one and a decode step of
    ``batch`` rows, and the best TTFT ratio they allow."""
    from engine.models.loader import PRESETS

    if not torch.cuda.is_available():
        print("python -m studies ttft-bound times matrix products on a CUDA GPU; none is available here")
        return 2
    if model not in PRESETS:
        print(f"python -m studies ttft-bound needs a preset shape "
              f"({', '.join(sorted(PRESETS))}), not {model!r}")
        return 2
    spec = PRESETS[model]
    dev = torch.device("cuda")
    torch.manual_seed(0)
    weights = [[torch.randn(i, o, device=dev, dtype=torch.bfloat16) * 0.02
                for i, o in linears(spec)] for _ in range(spec.num_layers)]
    head = torch.randn(spec.hidden_size, spec.vocab_size, device=dev, dtype=torch.bfloat16) * 0.02
    n_params = sum(w.numel() for layer in weights for w in layer) + head.numel()
    bw = copy_bandwidth_gbs()
    sizes = {"uncached prefill": prefix + prompt, "cached prefill": prompt, "decode step": batch}
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}; {model}: "
          f"{n_params / 1e9:.2f} B parameters in its linear layers and head (bf16), "
          f"{2 * n_params / 1e9:.1f} GB; copy bandwidth {bw:.0f} GB/s (read + write); "
          "median [min-max] of 7 timings\n")
    print("| what | rows | linears ms | weight-read floor ms | TFLOP/s |\n|---|---|---|---|---|")
    med = {}
    for name, rows in sizes.items():
        times = time_chain_ms(weights, head, rows)
        med[name] = statistics.median(times)
        flop = 2 * (n_params - head.numel()) * rows + 2 * head.numel()
        print(f"| {name} | {rows} | {med[name]:.2f} [{min(times):.2f}-{max(times):.2f}] | "
              f"{2 * n_params / (bw * 1e9) * 1e3:.2f} | {flop / med[name] / 1e9:.0f} |")
    off, on = med["uncached prefill"], med["cached prefill"]
    half = med["decode step"] / 2
    print(f"\nbest TTFT ratio, cache off / on, on this GPU (linear layers only):\n"
          f"- an idle GPU (no wait): {off:.2f} / {on:.2f} ms = {off / on:.2f}x\n"
          f"- arriving during a decode step of {batch} rows (half of it, "
          f"{half:.2f} ms, waited): {off + half:.2f} / {on + half:.2f} ms = "
          f"{(off + half) / (on + half):.2f}x")
    return 0


def main(argv: list[str]) -> int:
    p = cli.parser("python -m studies ttft-bound", __doc__)
    p.add_argument("--model", default="llama-3.1-8b-shape", help="a preset shape")
    p.add_argument("--prefix", type=int, default=512, help="tokens of the shared prefix")
    p.add_argument("--prompt-len", type=int, default=32, help="a request's own tokens")
    p.add_argument("--batch", type=int, default=16, help="rows of the decode step")
    args = p.parse_args(argv)
    return run(args.model, args.prefix, args.prompt_len, args.batch)
