"""The CUDA device's reused buffers, where a race would be silent (CUDA only).

Growing the upload ring while the engine stream is busy keeps the upload: the new device
buffers' zero fill is queued on the current stream behind the work in flight there, while the
upload writes them at once on the scheduler stream (``CudaDevice._grow_staging`` waits). A
multi-step run grows the ring the first time a group is larger than any before it.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import requires_cuda

from engine import Engine, EngineConfig


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
