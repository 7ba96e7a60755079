"""The GPU math below the model: sampling and paged decode attention, in PyTorch and Triton.

May import: torch and triton only (nothing else of this repository).
"""
