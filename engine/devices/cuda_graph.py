"""Decode CUDA graphs, one per batch-size bucket: the whole step (forward, sample, token_pool
write) captured once and replayed with a single launch.

Graphs and overlap fix different gaps. An eager forward of a small model is *launch-bound*: the
GPU waits between its own kernels while Python issues the next one. A graph removes those gaps
*inside* a forward. Overlap removes the gap *between* forwards (the CPU's per-step work). They
compose: graphs make the forward short and dense, overlap hides the CPU behind it.

A graph reads fixed addresses, so each replay first copies the step's metadata into static
buffers (on the engine stream, after ``wait_stream``), and the sampled tokens are copied out of the
static output before the next replay can overwrite them.
"""

from __future__ import annotations

import torch

from engine.config import EngineConfig
from engine.devices.runner import ModelRunner
from engine.scheduler.request import DECODE_BUCKETS, NUM_INT_COLS, StepMeta


class _Graph:
    def __init__(self, graph: torch.cuda.CUDAGraph, ints: torch.Tensor, floats: torch.Tensor,
                 out: torch.Tensor, greedy: bool) -> None:
        self.graph, self.ints, self.floats, self.out = graph, ints, floats, out
        self.greedy = greedy

    def replay(self, ints: torch.Tensor, floats: torch.Tensor, keep: bool = True) -> torch.Tensor:
        """One decode step. The sampled tokens stay in the graph's static ``out``, which the next
        replay overwrites: ``keep=True`` copies them out first (a kernel and an allocation). A
        caller may pass ``keep=False`` only where something already orders the next replay after
        every read of ``out`` (the next forward's ``wait_stream`` on the stream that copies it)."""
        self.ints.copy_(ints)            # step metadata -> the graph's static input buffers
        if not self.greedy:              # greedy decoding never reads temperature / top_p
            self.floats.copy_(floats)
        self.graph.replay()
        return self.out.clone() if keep else self.out


class DecodeGraphs:
    def __init__(self, runner: ModelRunner, cfg: EngineConfig, warmup: int = 2) -> None:
        self.runner = runner
        self.kv_pages = cfg.pages_per_seq
        sizes = sorted({min(b, cfg.max_batch_size) for b in DECODE_BUCKETS})
        width = NUM_INT_COLS + cfg.pages_per_seq
        self.graphs: dict[tuple[int, bool], _Graph] = {}
        pool = torch.cuda.graph_pool_handle()
        for size in reversed(sizes):     # largest first, so smaller graphs reuse its memory pool
            for greedy in (True, False):
                self.graphs[(size, greedy)] = self._capture(size, width, greedy, pool, warmup)
        torch.cuda.synchronize()

    def _capture(self, size: int, width: int, greedy: bool, pool, warmup: int) -> _Graph:
        ints, floats = self.runner.padding_meta(size, width)   # replays copy real rows over it
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):    # warm up allocator and kernels outside the capture
            for _ in range(warmup):
                self.runner.step(ints, floats, 1, self.kv_pages, greedy)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=pool):
            out = self.runner.step(ints, floats, 1, self.kv_pages, greedy)
        return _Graph(graph, ints, floats, out, greedy)

    def lookup(self, meta: StepMeta) -> _Graph | None:
        if meta.kind != "decode" or meta.kv_pages != self.kv_pages:
            return None
        return self.graphs.get((meta.ints.shape[0], meta.all_greedy))
