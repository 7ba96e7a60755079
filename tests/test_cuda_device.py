"""The CUDA device's reused buffers and its result copy, where a race would be silent (CUDA only).

Growing the upload ring while the engine stream is busy keeps the upload: the new device
buffers' zero fill is queued on the current stream behind the work in flight there, while the
upload writes them at once on the scheduler stream (``CudaDevice._grow_staging`` waits). A
multi-step run grows the ring the first time a group is larger than any before it.

The result copy gives the same tokens wherever it runs (``result_copy_stream``). On a copy
stream of its own it runs beside the next forward, which rewrites the graph's output: the copy
must read the step's own row of the result ring instead, and a copy held back on purpose
(tens of microseconds after the next forward began) still reads the right tokens.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import requires_cuda
from loops import loop_of

from engine import Engine, EngineConfig, SamplingParams
from engine.config import COPY_PLACEMENTS


def _engine(make_checkpoint, **kw) -> Engine:
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    return Engine(EngineConfig(model=str(make_checkpoint("llama")), device="cuda",
                               dtype="float32", max_batch_size=4, max_seq_len=64, **kw))


@requires_cuda
@pytest.mark.cuda
def test_cuda_growing_the_upload_ring_keeps_the_upload(make_checkpoint):
    import torch

    with _engine(make_checkpoint) as eng:
        dev = eng.device
        rows = dev.max_rows * 3                   # more than the ring has room for
        ints = np.arange(rows * dev.int_width, dtype=np.int64).reshape(rows, dev.int_width) + 1
        floats = np.full((rows, 2), 0.5, dtype=np.float32)
        torch.cuda.set_stream(dev.engine_stream)
        torch.cuda._sleep(100_000_000)            # the engine stream busy for tens of ms
        dev._grow_staging(rows)                   # made while the engine stream is current
        staging = dev.staging
        i, n, nw, words = staging.pack([ints], [floats], np.zeros((3, 0), dtype=np.int64))
        torch.cuda.set_stream(dev.scheduler_stream)
        slot = staging.send(i, n, nw, words, dev.scheduler_stream)
        torch.cuda.synchronize()
        torch.cuda.set_stream(torch.cuda.default_stream())
        assert np.array_equal(slot.ints.cpu().numpy(), ints), "the upload was overwritten"
        assert np.array_equal(slot.floats.cpu().numpy(), floats)


def _placement_run(eng: Engine, overlap: bool, k: int = 1):
    prompts = [[5 + i, 6, 7 + 2 * i, 8] * (1 + i % 3) for i in range(4)]
    params = [SamplingParams(max_new_tokens=12 + 3 * i, temperature=0.0 if i % 2 else 0.9,
                             top_k=20, ignore_eos=True) for i in range(4)]
    return eng.generate(prompts, params, loop_of(overlap, k))


@requires_cuda
@pytest.mark.cuda
@pytest.mark.parametrize("cuda_graph", [False, True])
def test_cuda_every_copy_placement_gives_the_same_tokens(make_checkpoint, cuda_graph):
    """Normal, overlap and multi-step runs, greedy and sampled rows, with the copy on each
    stream: the same tokens, and the copy's spans on the lane of the stream it ran on."""
    lanes = {"copy": "copy_stream", "engine": "engine_stream", "scheduler": "scheduler_stream"}
    results = {}
    for placement in COPY_PLACEMENTS:
        with _engine(make_checkpoint, cuda_graph=cuda_graph, result_copy_stream=placement) as eng:
            runs = [_placement_run(eng, overlap, k) for overlap, k in
                    ((False, 1), (True, 1), (True, 3))]
        results[placement] = [[o.token_ids for o in r.outputs] for r in runs]
        for r in runs:
            copies = {s.lane for s in r.timeline if s.phase == "copy"}
            assert copies == {lanes[placement]}, (placement, copies)
            assert ("copy_stream" in r.to_run_dict()["lanes"]) == (placement == "copy")
    assert results["copy"] == results["engine"] == results["scheduler"]
    assert results["copy"][0] == results["copy"][1] == results["copy"][2]


@requires_cuda
@pytest.mark.cuda
def test_cuda_a_late_copy_on_its_own_stream_reads_its_own_step(make_checkpoint, monkeypatch):
    """Each copy is held back on the copy stream (``torch.cuda._sleep`` queued before it) while
    the next forward runs and rewrites the graph's output: the tokens stay right, because the
    copy reads the step's row of the result ring."""
    import torch

    from engine.devices.cuda import CudaDevice

    with _engine(make_checkpoint, cuda_graph=True) as eng:
        expected = [o.token_ids for o in _placement_run(eng, True).outputs]
        original = CudaDevice._copy_result

        def late(self, *args, **kwargs):
            torch.cuda.set_stream(self.copy_stream)
            torch.cuda._sleep(200_000)            # ~0.1 ms: the next forward starts meanwhile
            return original(self, *args, **kwargs)

        monkeypatch.setattr(CudaDevice, "_copy_result", late)
        for overlap, k in ((True, 1), (True, 4), (False, 1)):
            got = [o.token_ids for o in _placement_run(eng, overlap, k).outputs]
            assert got == expected, (overlap, k)
