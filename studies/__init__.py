"""The lab: measurements behind single figures of docs/benchmarks.md, imported by nothing."""
