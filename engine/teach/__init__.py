"""What the demo teaches with: the hazard lab (``hazard_lab.py``: remove one safeguard, let the
checks find the fault) and the workloads the CLI and the app run (``workload.py``).

May import: ``engine.engine`` and everything below it, ``record``.
"""
