"""The devices that play the article's GPU: ``cuda.py`` (two real CUDA streams, events, pinned
buffer rings), ``cuda_graph.py`` (decode CUDA graphs), ``process.py`` (on a CPU, a device process),
``runner.py`` (what one forward does: token_pool gather, model, sample, scatter) and
``kernel_capture.py`` (a torch.profiler window as kernel lanes).

May import: ``engine.scheduler`` (the protocol and ``StepMeta``), ``engine.models``,
``engine.layers``, ``engine.config``, ``engine.proc_watch``, ``record``.
"""
