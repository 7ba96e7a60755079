"""What a run produced, and nothing that runs it: spans, metrics, run records, traces.

This package is the bottom layer. ``engine`` writes into it, ``viz`` and ``ui`` read from it, and
it imports only the standard library, never torch, gradio or plotly:

- ``schema``           the names of lanes, phases and loops, and the record's shapes (TypedDicts)
- ``recorder``         ``Span`` and the ``Timeline`` recorder: every lane's work on one clock
- ``metrics``          GPU busy (a union of intervals), idle gaps, T_fwd, T_cpu, the formula
- ``run_record``       the schema-1 run record: make, validate, save, load
- ``chrome_trace``     a record as a Chrome / Perfetto trace, and back
- ``window``           a run's GPU lanes, time range, step range, and a run cut to some steps
- ``gpu_time``         a view's GPU idle gaps and busy two ways, apart from time with no request
- ``steps``            one step's spans (forward, upload, copy, the CPU work under the forward)
- ``lag``              lag one (and lag k): the forwards that ran for a request already stopped
- ``host_load``        what else the machine did during a run, and whether it was quiet enough
- ``latency_rows``     a serving benchmark's rows per loop and request rate
- ``bounded_read``     a file someone gave us, read bounded in bytes (before and after gunzip)
- ``imported/``        other engines' traces (SGLang's, vLLM's, transformers') as runs, apart
- ``kernel_lanes``     a torch.profiler capture's kernel lanes, each matched to our stream that ran it

Each idea has one definition here, so a live run, a recorded GPU run and an imported trace are
measured the same way.
"""
