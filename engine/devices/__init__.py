"""The devices that play the article's GPU: CUDA streams, or the CPU device process; the runner.

May import: ``engine.scheduler`` (the protocol and ``StepMeta``), ``engine.models``,
``engine.layers``, ``engine.config``, ``engine.proc_watch``, ``record``."""
