"""The hazard lab (``hazard_lab.py``): remove one safeguard, let the checks find the fault.

May import: ``engine.engine`` and everything below it, ``record``.
"""
