"""The lab, imported by nothing: one-off measurements behind single figures of the docs."""
