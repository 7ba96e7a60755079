"""CUDA graphs, one per step shape: forward, sample and token_pool write captured once and replayed
with a single launch. Graphs remove the launch gaps *inside* a forward; overlap removes the gap
*between* forwards. They compose."""

from __future__ import annotations

import torch

from engine.config import EngineConfig
from engine.devices.runner import ModelRunner
from engine.scheduler.request import COL_LEN, NUM_INT_COLS, StepMeta, prefill_shapes
from record.schema import Phase


class _Graph:
    def __init__(self, graph: torch.cuda.CUDAGraph, ints: torch.Tensor, floats: torch.Tensor,
                 out: torch.Tensor, greedy: bool) -> None:
        self.graph, self.ints, self.floats, self.out = graph, ints, floats, out
        self.greedy = greedy

    def replay(self, ints: torch.Tensor, floats: torch.Tensor, keep: bool = True) -> torch.Tensor:
        """One step. The next replay of any graph may rewrite ``out`` (one memory pool): ``keep=False``
        only where something orders the next replay after every read of it."""
        self.ints.copy_(ints)            # step metadata -> the graph's static input buffers
        if not self.greedy:              # greedy decoding never reads temperature / top_p
            self.floats.copy_(floats)
        self.graph.replay()
        return self.out.clone() if keep else self.out


class StepGraphs:
    """Every decode and prefill shape of ``cfg`` as a CUDA graph; ``lookup``: a step's, or None."""

    def __init__(self, runner: ModelRunner, cfg: EngineConfig, warmup: int = 2,
                 prefill: bool = True) -> None:
        self.runner = runner
        self.kv_pages = cfg.pages_per_seq
        width = NUM_INT_COLS + cfg.pages_per_seq
        sizes, seq_lens = prefill_shapes(cfg)                      # the same batch sizes
        shapes = [(size, 1) for size in sizes]                     # (rows, tokens per row)
        if prefill:
            shapes += [(size, seq_len) for size in sizes for seq_len in seq_lens]
        self.graphs: dict[tuple[int, int, bool], _Graph] = {}
        pool = torch.cuda.graph_pool_handle()
        # Largest first, so the smaller graphs reuse its memory in the shared pool.
        for size, seq_len in sorted(shapes, key=lambda s: (s[0] * s[1], s), reverse=True):
            for greedy in (True, False):
                self.graphs[(size, seq_len, greedy)] = self._capture(size, seq_len, width,
                                                                     greedy, pool, warmup)
        torch.cuda.synchronize()

    def _capture(self, size: int, seq_len: int, width: int, greedy: bool, pool,
                 warmup: int) -> _Graph:
        ints, floats = self.runner.padding_meta(size, width)   # replays copy real rows over it
        if seq_len > 1:
            # A padding row as long as the shape (never longer than the context leaves room for).
            ints[:, COL_LEN] = min(seq_len, self.runner.max_seq_len - 1)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):    # warm up allocator and kernels outside the capture
            for _ in range(warmup):
                self.runner.step(ints, floats, seq_len, self.kv_pages, greedy)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=pool):
            out = self.runner.step(ints, floats, seq_len, self.kv_pages, greedy)
        return _Graph(graph, ints, floats, out, greedy)

    def lookup(self, meta: StepMeta) -> _Graph | None:
        if meta.kv_pages != self.kv_pages:
            return None
        seq_len = 1 if meta.kind == Phase.DECODE else meta.seq_len
        return self.graphs.get((meta.ints.shape[0], seq_len, meta.all_greedy))
