"""The device side: model, paged KV cache and ``token_pool``, and what one forward does on them (in
the engine process on CUDA, in the device process on CPU).

``token_pool[slot, position]`` is the heart of overlap scheduling: a forward *gathers* its input ids
from it and *scatters* its sampled tokens back, so the next forward starts without the CPU learning
the values (it reads them later, from a copy). With a ``result_ring`` each forward also writes its
tokens into the ring row its metadata names (``COL_OUT``), which the copy reads."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field

import torch

from engine.config import RESULT_BUFFERS, EngineConfig
from engine.layers import sampler
from engine.layers.paged_attention import (
    BLOCK_N,
    CHUNK_KEYS,
    FIXED_BLOCK_N,
    Chunking,
    PagedDecodeContext,
    by_length,
    fixed_chunking,
)
from engine.models.model import AttentionContext, CausalLM
from engine.scheduler.kv_cache import allocate_kv_tensors
from engine.scheduler.request import (
    COL_LEN,
    COL_OUT,
    COL_SEED,
    COL_SLOT,
    COL_START,
    COL_TOPK,
    COL_WRITE,
    NUM_INT_COLS,
)

ATTENTION = ("auto", "reference", "triton", "emulated")   # emulated: the kernel's math in PyTorch


@dataclass(frozen=True)
class DecodeKernels:
    """The decode step's kernel choices; the defaults are the engine's, ``EARLIER`` what they
    replaced. ``chunk_keys``: one attention chunk per this many keys of a row (0: the fixed
    scheme); ``rope_in_attention``: the attention kernel rotates q and k as it loads them."""

    chunk_keys: int = CHUNK_KEYS
    block_n: int = BLOCK_N
    rope_in_attention: bool = True
    argmax: str = "triton"

    def __post_init__(self) -> None:
        if self.argmax not in ("triton", "torch"):
            raise ValueError(f"argmax must be 'triton' or 'torch', got {self.argmax!r}")
        self.chunking(self.chunk_keys or 1)          # refuses chunks that are not whole blocks

    def chunking(self, max_seq_len: int, row_programs: int = 0, sms: int = 0) -> Chunking:
        """By length, unless a full batch (``row_programs``: its rows times KV heads) would not
        fill the GPU's ``sms`` twice over: then the fixed scheme. From the config, never a batch."""
        if self.chunk_keys and not (sms and row_programs < FILL_WAVES * sms):
            return by_length(max_seq_len, self.chunk_keys, self.block_n)
        return fixed_chunking(max_seq_len)


FILL_WAVES = 2        # programs per multiprocessor a full batch must bring for chunks by length

# What the compiled CUDA engine ran before: every row in a fixed number of chunks of blocks of 64
# keys, always merged; RoPE a kernel of its own after the q/k/v product; torch.argmax.
EARLIER = DecodeKernels(chunk_keys=0, block_n=FIXED_BLOCK_N, rope_in_attention=False,
                        argmax="torch")


def pick_attention(requested: str, device: torch.device, dtype: torch.dtype) -> str:
    """``auto``: the Triton kernel on CUDA (16/32-bit floats), else the plain-PyTorch path."""
    if requested not in ATTENTION:
        raise ValueError(f"attention must be one of {ATTENTION}, got {requested!r}")
    fast_ok = device.type == "cuda" and dtype in (torch.float16, torch.bfloat16, torch.float32)
    if requested == "triton" and not fast_ok:
        raise ValueError(f"the Triton attention kernel needs CUDA and a 16/32-bit float dtype "
                         f"(got {device.type}, {dtype})")
    if requested == "auto":
        return "triton" if fast_ok and importlib.util.find_spec("triton") else "reference"
    return requested


@dataclass(frozen=True)
class RunnerConfig:
    """What a ``ModelRunner`` is built for (``of``: from an engine's config)."""

    max_slots: int
    max_seq_len: int
    num_pages: int
    page_size: int
    dtype: torch.dtype
    device: torch.device
    attention: str = "auto"
    compile: bool = False
    kernels: DecodeKernels = field(default_factory=DecodeKernels)
    result_ring: int = 0                    # rows of the device result ring (0: none)
    # The hazard lab's clamp of every index: without wait_stream metadata may be garbage (wrong
    # tokens then, not a device-side assert that kills the context).
    sanitize: bool = False

    @classmethod
    def of(cls, cfg: EngineConfig, dtype: torch.dtype, device: torch.device) -> RunnerConfig:
        """A CPU always takes the plain PyTorch path; only a copy stream needs a result ring."""
        cuda = device.type == "cuda"
        ring = cuda and cfg.result_copy_stream == "copy"
        return cls(cfg.max_batch_size, cfg.max_seq_len, cfg.total_pages, cfg.page_size, dtype,
                   device, attention=cfg.attention if cuda else "auto",
                   compile=cfg.compiles(device.type),
                   result_ring=RESULT_BUFFERS * cfg.max_batch_size if ring else 0,
                   sanitize=cuda and cfg.hazards.no_wait_stream)


class ModelRunner:
    def __init__(self, model: CausalLM, config: RunnerConfig) -> None:
        spec, c = model.spec, config
        self.model, self.device, self.page_size, self.dtype = model, c.device, c.page_size, c.dtype
        self.vocab_size = spec.vocab_size
        self.scratch_page = c.num_pages               # the extra page that padding writes into
        self.dummy_slot = c.max_slots                 # the extra token_pool row padding reads
        self.max_seq_len = c.max_seq_len
        self.sanitize = c.sanitize
        self.kv_caches = allocate_kv_tensors(spec.num_layers, c.num_pages, c.page_size,
                                             spec.num_kv_heads, spec.head_dim, c.dtype, c.device)
        # token_pool: [slots + 1, max_seq_len + 1] token ids, resident on the device.
        self.token_pool = torch.zeros(c.max_slots + 1, c.max_seq_len + 1, dtype=torch.int64,
                                      device=c.device)
        # result_ring: [result_ring + 1] sampled tokens the host's copies read, plus one place
        # padding and capture-time rows may write (COL_OUT = result_ring).
        self.result_ring = (torch.zeros(c.result_ring + 1, dtype=torch.int64, device=c.device)
                            if c.result_ring else None)
        self.attention = pick_attention(c.attention, c.device, c.dtype)
        self.use_kernels(c.kernels)
        self.forward_fn = model
        self.compiled = c.compile
        if c.compile:
            if c.device.type != "cuda":
                raise ValueError("compile=True is for CUDA only (CPU mode never compiles)")
            from engine.models.compiled import CompiledDecode
            self.forward_fn = CompiledDecode(model)

    def use_kernels(self, kernels: DecodeKernels) -> None:
        """Take ``kernels`` for the decode steps from now on (a captured graph keeps its own)."""
        self.kernels = kernels
        sms = (torch.cuda.get_device_properties(self.device).multi_processor_count
               if self.device.type == "cuda" else 0)
        rows = self.dummy_slot * self.model.spec.num_kv_heads    # max batch (slots) x KV heads
        self.chunking = kernels.chunking(self.max_seq_len, rows, sms)
        self.rope_in_attention = kernels.rope_in_attention
        triton_ok = self.device.type == "cuda" and importlib.util.find_spec("triton") is not None
        self.argmax = "triton" if kernels.argmax == "triton" and triton_ok else "torch"

    def write_prompts(self, writes: torch.Tensor) -> None:
        """Scatter prompt tokens ``writes [3, T] = (slot, position, token)`` into token_pool."""
        if writes.shape[1]:
            self.token_pool[writes[0], writes[1]] = writes[2]

    def _clamped(self, ints: torch.Tensor, seq_len: int) -> torch.Tensor:
        ints = ints.clone()
        # A row ends inside the context even where seq_len (a padded bucket) is longer than it.
        longest = min(seq_len, self.max_seq_len - 1)
        ints[:, COL_SLOT].clamp_(0, self.dummy_slot)
        ints[:, COL_LEN].clamp_(0, longest)
        ints[:, COL_START].clamp_(0, self.max_seq_len - 1 - longest)
        ints[:, NUM_INT_COLS:].clamp_(0, self.scratch_page)
        if self.result_ring is not None:
            ints[:, COL_OUT].clamp_(0, self.result_ring.shape[0] - 1)
        return ints

    def _context(self, ints: torch.Tensor, seq_len: int, kv_pages: int):
        slots, starts, lens = ints[:, COL_SLOT], ints[:, COL_START], ints[:, COL_LEN]
        table = ints[:, NUM_INT_COLS:NUM_INT_COLS + kv_pages]               # [B, P] page ids
        ps = self.page_size
        steps = torch.arange(seq_len, device=ints.device)
        valid = steps[None, :] < lens[:, None]                               # [B, S]
        positions = torch.where(valid, starts[:, None] + steps[None, :], 0)  # [B, S]
        page = table.gather(1, positions // ps)
        scratch = self.scratch_page * ps
        write_loc = torch.where(valid, page * ps + positions % ps, scratch)  # [B, S]
        kv_pos = torch.arange(kv_pages * ps, device=ints.device)             # [Lk]
        read_loc = table[:, kv_pos // ps] * ps + kv_pos % ps                 # [B, Lk]
        allowed = kv_pos[None, None, :] <= positions[:, :, None]             # [B, S, Lk] causal
        # Additive mask, built once per forward (every layer would otherwise convert a bool one).
        mask = torch.zeros(allowed.shape, dtype=self.dtype, device=ints.device)
        mask.masked_fill_(~allowed, float("-inf"))
        ctx = AttentionContext(write_loc.reshape(-1), read_loc, mask[:, None])
        input_ids = self.token_pool[slots[:, None], positions]              # gather from the pool
        return input_ids, positions, ctx, (lens - 1).clamp_min(0)

    def _decode_context(self, ints: torch.Tensor, kv_pages: int):
        """One token per row: no read_loc, no mask, just each row's page table and length."""
        slots, starts, lens = ints[:, COL_SLOT], ints[:, COL_START], ints[:, COL_LEN]
        kv_lens = torch.where(lens > 0, starts + lens, 0)   # keys incl. this step's (0: padding)
        positions = torch.where(lens > 0, starts, 0)[:, None]                # [B, 1]
        table = ints[:, NUM_INT_COLS:NUM_INT_COLS + kv_pages]               # [B, P] page ids
        kernel = "emulated" if self.attention == "emulated" else "triton"
        rope = self.model.inv_freq if self.rope_in_attention else None    # RoPE in the kernel
        ctx = PagedDecodeContext(table, kv_lens, self.page_size, self.chunking, kernel,
                                 inv_freq=rope)
        input_ids = self.token_pool[slots[:, None], positions]              # [B, 1]
        last = torch.zeros(ints.shape[0], dtype=torch.int64, device=ints.device)  # the one token
        return input_ids, positions, ctx, last

    @torch.inference_mode()
    def forward_logits(self, ints: torch.Tensor, seq_len: int, kv_pages: int) -> torch.Tensor:
        """The model forward: ``[B, V]`` logits at each row's last token."""
        if self.sanitize:
            ints = self._clamped(ints, seq_len)
        if seq_len == 1 and self.attention != "reference":
            input_ids, positions, ctx, last = self._decode_context(ints, kv_pages)
        else:
            input_ids, positions, ctx, last = self._context(ints, seq_len, kv_pages)
        return self.forward_fn(input_ids, positions, ctx, self.kv_caches, last)

    @torch.inference_mode()
    def sample_and_store(self, logits: torch.Tensor, ints: torch.Tensor, floats: torch.Tensor,
                         all_greedy: bool) -> torch.Tensor:
        """Pick next tokens ``[B]`` and write them into token_pool for the next forward."""
        if self.sanitize:
            ints = self._clamped(ints, 1)
        out_pos = ints[:, COL_START] + ints[:, COL_LEN]                       # position produced
        if all_greedy:
            next_tokens = sampler.greedy(logits, self.argmax)
        else:
            next_tokens = sampler.sample(logits, floats[:, 0], ints[:, COL_TOPK], floats[:, 1],
                                         ints[:, COL_SEED], out_pos)
        # Rows that keep no token (a non-final prefill chunk, padding) write to the dummy slot.
        keep = ints[:, COL_WRITE] == 1
        slot = torch.where(keep, ints[:, COL_SLOT], self.dummy_slot)
        self.token_pool[slot, out_pos.clamp(max=self.max_seq_len)] = next_tokens
        if self.result_ring is not None:
            # And where the host's copy will read them: this step's row of the result ring.
            self.result_ring[ints[:, COL_OUT]] = next_tokens
        return next_tokens

    def step(self, ints, floats, seq_len: int, kv_pages: int, all_greedy: bool) -> torch.Tensor:
        """forward + sample + store: what a CUDA graph captures for decode."""
        return self.sample_and_store(self.forward_logits(ints, seq_len, kv_pages), ints, floats,
                                     all_greedy)

    def padding_meta(self, size: int, width: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Metadata of ``size`` padding rows: they read the dummy slot and write nothing real."""
        ints = torch.zeros(size, width, dtype=torch.int64, device=self.device)
        ints[:, COL_SLOT] = self.dummy_slot
        ints[:, NUM_INT_COLS:] = self.scratch_page
        if self.result_ring is not None:
            ints[:, COL_OUT] = self.result_ring.shape[0] - 1      # the ring's spare place
        floats = torch.ones(size, 2, dtype=torch.float32, device=self.device)
        return ints, floats

    def warm_up(self, sizes: tuple[int, ...], kv_pages: int) -> None:
        """Decode steps of padding rows: compiles kernels (and regions) before the first request."""
        for size in sizes:
            for greedy in (True, False):
                self.step(*self.padding_meta(size, NUM_INT_COLS + kv_pages), 1, kv_pages, greedy)

    def warm_up_prefill(self, sizes: tuple[int, ...], seq_lens: tuple[int, ...],
                        kv_pages: int) -> None:
        """One prefill of every shape a run can meet, so no measured step pays a first use."""
        for size in sizes:
            ints, floats = self.padding_meta(size, NUM_INT_COLS + kv_pages)
            for seq_len in seq_lens:
                # A row is never longer than the context leaves room for (the bucket may be).
                ints[:, COL_LEN] = min(seq_len, self.max_seq_len - 1)
                for greedy in (True, False):
                    self.step(ints, floats, seq_len, kv_pages, greedy)
