"""The paged decode attention kernel alone: splits and block sizes against the plain path (CUDA).

    python -m studies attention-sweep

Each cell is the kernel captured as 24 back-to-back calls (one per layer of a model) in a CUDA
graph and replayed, in microseconds a call, beside the reference path (a gather and masked SDPA),
for two head layouts, two batch sizes and three context lengths.
"""

from __future__ import annotations

import torch

from bench import cli
from bench.timing import ms_per_call

SWEEP_SPLITS, SWEEP_BLOCKS = (1, 2, 4, 8), (32, 64)


def run(iters: int = 20) -> int:
    """The attention kernel alone, captured as 24 back-to-back calls (one per layer), against the
    plain path (gather + masked SDPA): per-call microseconds for splits x block sizes."""
    shapes = {"0.5B (14/2/64)": (14, 2, 64), "1.5B (12/2/128)": (12, 2, 128)}
    print("\n| shape | B | context | plain us | " + " | ".join(
        f"s{s}/n{n}" for s in SWEEP_SPLITS for n in SWEEP_BLOCKS) + " |")
    for label, (nh, nkv, d) in shapes.items():
        for b in (1, 64):
            for ctx in (160, 1024, 4096):
                ps, pages = 16, -(-(ctx + 1) // 16)
                q = torch.randn(b, nh, d, device="cuda", dtype=torch.bfloat16)
                kn, vn = (torch.randn(b, nkv, d, device="cuda", dtype=torch.bfloat16)
                          for _ in range(2))
                kc, vc = (torch.randn((b * pages + 1) * ps, nkv, d, device="cuda",
                                      dtype=torch.bfloat16) for _ in range(2))
                table = torch.arange(b * pages, device="cuda").view(b, pages)
                lens = torch.full((b,), ctx, device="cuda", dtype=torch.int64)
                cells = _sweep_cells((q, kn, vn, kc, vc), table, lens, ps, iters)
                print(f"| {label} | {b} | {ctx} | " + " | ".join(f"{c:.1f}" for c in cells) + " |",
                      flush=True)
    return 0


def _sweep_cells(inputs, table, lens, ps, iters) -> list[float]:
    """Microseconds per call: the plain path, then the kernel at each (splits, block) setting.
    ``inputs``: q, this step's k and v, the two caches."""
    from engine.layers.attention_triton import paged_decode_attention
    from engine.layers.paged_attention import Chunking, PagedDecodeContext
    q, kn, vn, kc, vc = inputs
    plain = _plain_context(table, lens, ps, q.dtype)
    cells = [_time_calls(lambda: plain.attend(q[:, None], kn[:, None], vn[:, None], kc, vc), iters)]
    for s in SWEEP_SPLITS:
        for n in SWEEP_BLOCKS:
            ctx = PagedDecodeContext(table, lens, ps, Chunking(s, 0, n))
            cells.append(_time_calls(lambda ctx=ctx: paged_decode_attention(q, kn, vn, kc, vc, ctx),
                                     iters))
    return cells


def _plain_context(table, lens, ps, dtype):
    """The reference path's context for a decode step (built once per forward, not per layer)."""
    from engine.models.model import AttentionContext
    b, pages = table.shape
    kv_pos = torch.arange(pages * ps, device=table.device)
    read_loc = table[:, kv_pos // ps] * ps + kv_pos % ps
    write_loc = table.gather(1, ((lens - 1) // ps)[:, None])[:, 0] * ps + (lens - 1) % ps
    mask = torch.zeros(b, 1, 1, pages * ps, dtype=dtype, device=table.device)
    mask.masked_fill_(kv_pos[None, None, None, :] >= lens[:, None, None, None], float("-inf"))
    return AttentionContext(write_loc, read_loc, mask)


def _time_calls(fn, iters: int, calls: int = 24) -> float:
    """Microseconds per call: a graph of ``calls`` back-to-back calls, replayed ``iters`` times."""
    fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    return ms_per_call(graph.replay, iters, 1)[0] * 1e3 / calls


def main(argv: list[str]) -> int:
    p = cli.parser("python -m studies attention-sweep", __doc__)
    p.add_argument("--iters", type=int, default=20, help="graph replays a cell")
    return run(p.parse_args(argv).iters)
