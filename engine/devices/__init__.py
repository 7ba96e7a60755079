"""The devices that play the article's GPU: ``cuda.py`` (real CUDA streams, scheduler, engine and
copy; events, pinned buffer rings, the device result ring), ``cuda_graph.py`` (CUDA graphs),
``process.py`` (on a CPU, a device process), ``runner.py`` (what one forward does: token_pool
gather, model, sample, scatter) and ``kernel_capture.py`` (a torch.profiler window as kernel
lanes).

May import: ``engine.scheduler`` (the protocol and ``StepMeta``), ``engine.models``,
``engine.layers``, ``engine.config``, ``engine.proc_watch``, ``record``.
"""
