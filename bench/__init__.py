"""The benchmarks a reader runs to see the lesson's numbers: ``python -m bench --help``.

Performance goals live here, never in timed unit tests. The lab's one-off measurements are the
``studies`` package's.
"""
