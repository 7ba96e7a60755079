"""The CUDA device's reused buffers and events, where a race would be silent (CUDA only).

- Growing the upload ring while the engine stream is busy keeps the upload: the new device
  buffers' zero fill is queued on the current stream behind the work in flight there, while the
  upload writes them at once on the scheduler stream (``CudaDevice._grow_staging`` waits).
- With the recorder on, a step's timing events stand in for its signals (the upload's end, the
  forward's end, the copy's end): the loops still give the tokens of the recorder-off run, and
  the pool never lends an event again while it still marks a slot (the bookkeeping is plain
  Python and is also tested without a GPU, on objects that only count their records).
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import requires_cuda

from engine import Engine, EngineConfig, SamplingParams
from engine.devices.cuda_buffers import EventPool, Marks
from record.timeline import Timeline


class _Counted:
    """Stands for a CUDA event in the pool's bookkeeping: it only counts its records."""

    def __init__(self) -> None:
        self.records = 0

    def record(self, _stream) -> None:
        self.records += 1


def test_pool_never_lends_an_event_that_still_marks_a_slot():
    pool = EventPool()
    first, second = [_Counted(), _Counted()], [_Counted(), _Counted()]
    marks = Marks(1, pool, make=_Counted)
    pool.give_back(first)
    pool.give_back(second)
    assert marks.record(0, None, first[1]) is first[1]      # first[1] marks slot 0 now
    assert pool.take(2) is second, "a group whose event marks a slot was lent"
    pool.give_back(second)
    marks.record(0, None)                         # slot 0's own event replaces the stand-in
    assert pool.live == {}
    assert {id(pool.take(2)), id(pool.take(2))} == {id(first), id(second)}
    marks.record(0, None, first[0])
    marks.release()
    assert pool.live == {} and marks.at == marks.own
    assert marks.own[0].records == 1 and first[0].records == first[1].records == 1


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


@requires_cuda
@pytest.mark.cuda
@pytest.mark.parametrize("cuda_graph", [False, True])
@pytest.mark.parametrize("copy_stream", ["engine", "scheduler"])
def test_cuda_timing_events_stand_in_for_signals(make_checkpoint, cuda_graph, copy_stream):
    with _engine(make_checkpoint, cuda_graph=cuda_graph, result_copy_stream=copy_stream) as eng:
        prompts = [[5 + i, 9, 17 + 3 * i, 2 + i] for i in range(6)]
        params = SamplingParams(max_new_tokens=20, ignore_eos=True)
        want = eng.generate(prompts, params, overlap=False, timeline=Timeline(enabled=False))
        for run in range(3):                      # later runs lend the first run's events again
            for overlap, k in ((False, 1), (True, 1), (True, 3)):
                eng.clear_prefix_cache()
                got = eng.generate(prompts, params, overlap=overlap, decode_steps=k,
                                   timeline=Timeline())
                assert [o.token_ids for o in got.outputs] == \
                       [o.token_ids for o in want.outputs], f"run {run} overlap {overlap} k {k}"
                spans = got.timeline
                assert any(s.lane == "scheduler_stream" and s.phase == "upload" for s in spans)
                copies = [s for s in spans if s.phase == "copy"]
                assert copies and all(s.end_us >= s.start_us for s in copies)
        dev = eng.device
        marks = dev.results.last.at + dev.staging.copied.at + dev.staging.read.at
        held = [e for e in marks if id(e) in dev.events.live]
        assert held, "no signal was a timing event"
        free = {id(e) for groups in dev.events.free.values() for g in groups for e in g}
        assert {id(e) for e in held} <= free, "a held event is not the recorder's"
