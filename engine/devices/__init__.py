"""The devices that play the article's GPU: ``cuda.py`` (CUDA streams, events, buffer rings),
``cuda_graph.py``, ``cpu_process.py`` (the CPU device process), ``runner.py`` (what one forward does)
and ``kernel_capture.py`` (a torch.profiler window as kernel lanes).

May import: ``engine.scheduler`` (the protocol and ``StepMeta``), ``engine.models``,
``engine.layers``, ``engine.config``, ``engine.proc_watch``, ``record``."""
