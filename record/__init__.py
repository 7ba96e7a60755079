"""What a run produced, and nothing that runs it: spans, metrics, run records, traces. The bottom
layer: standard library only.

- ``schema``           the names of lanes, phases and loops, and the record's shapes
- ``recorder``         ``Span`` and the ``Timeline`` recorder: every lane's work on one clock
- ``metrics``          GPU busy (a union of intervals), idle gaps, T_fwd, T_cpu, the formula
- ``run_record``       the schema-1 run record: make, validate, save, load
- ``chrome_trace``     a record as a Chrome / Perfetto trace, and back
- ``window``           a run's GPU lanes, time and step ranges, a run cut to some steps
- ``gpu_time``         a view's idle gaps and busy, apart from time with no request
- ``steps``            one step's spans (forward, upload, copy, the CPU work under the forward)
- ``lag``              the forwards that ran for a request already stopped
- ``host_load``        what else the machine did during a run
- ``latency_rows``     a serving benchmark's rows per loop and request rate
- ``bounded_read``     a given file, read bounded in bytes
- ``imported/``        other engines' traces as runs, apart
- ``kernel_lanes``     a profiler capture's kernel lanes, each matched to our stream that ran it"""
