"""The GPU math below the model: sampling (``sampler.py``, greedy's two-pass argmax in
``argmax_triton.py``), paged decode attention in PyTorch (``paged_attention.py``) and as Triton
kernels (``attention_triton.py``, ``gemv_triton.py``).

May import: torch and triton only (nothing else of this repository).
"""
