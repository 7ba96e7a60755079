"""The engine's contract, as properties over many random workloads.

- normal and overlap loops produce identical tokens and finish reasons (greedy and seeded sampling);
- after every run every KV page and request slot is free again;
- nothing follows a stop token, and no request passes its max_new_tokens;
- greedy output equals transformers' ``generate`` on the same weights;
- all of it also when requests arrive over time (random arrival times: the scheduler receives
  requests while it runs, and idles when nothing is there).

CPU runs use float64 so that no greedy near-tie can flip between batch layouts; the CUDA variants
run the same workloads in float32 and bfloat16 on both streams.
"""

from __future__ import annotations

import random

import pytest
import torch
from conftest import EOS, VOCAB, requires_cuda
from loops import loop_of

from engine import Engine, EngineConfig, LoopSpec, SamplingParams
from engine.config import NORMAL, OVERLAP
from record.schema import Loop


def _workload(rng: random.Random, n: int, max_prompt: int, max_new: int):
    prompts = [[rng.randrange(4, VOCAB) for _ in range(rng.randrange(1, max_prompt + 1))]
               for _ in range(n)]
    params = [SamplingParams(max_new_tokens=rng.randrange(1, max_new + 1)) for _ in range(n)]
    return prompts, params


def _with_stops(eng: Engine, prompts, params, rng: random.Random):
    """Pick stop tokens that really fire: tokens the model emits at varied steps."""
    probe = eng.generate(prompts, [SamplingParams(max_new_tokens=p.max_new_tokens,
                                                  ignore_eos=True) for p in params])
    out = []
    for p, o in zip(params, probe.outputs):
        stops = (o.token_ids[rng.randrange(len(o.token_ids))],) if rng.random() < 0.7 else ()
        out.append(SamplingParams(max_new_tokens=p.max_new_tokens, stop_token_ids=stops,
                                  ignore_eos=rng.random() < 0.5))
    return out


def _check_outputs(result, params, eos=EOS):
    for o, p in zip(result.outputs, params):
        stops = set(p.stop_token_ids) | (set() if p.ignore_eos else {eos})
        assert 1 <= len(o.token_ids) <= p.max_new_tokens
        assert o.finish_reason in ("stop", "length")
        if o.finish_reason == "stop":
            assert o.token_ids[-1] in stops
        else:
            assert len(o.token_ids) == p.max_new_tokens
        assert not any(t in stops for t in o.token_ids[:-1]), "a token followed a stop token"


def _assert_all_free(eng: Engine):
    """Between runs nothing is held but what the prefix cache keeps (and may evict)."""
    s = eng.stats()
    assert s["kv_pages_free"] + s["kv_pages_cached"] == s["kv_pages_total"]
    assert s["req_slots_free"] == s["req_slots_total"]
    assert not eng.memory_problems()


def _same(a, b):
    return [(o.token_ids, o.finish_reason) for o in a.outputs] == \
           [(o.token_ids, o.finish_reason) for o in b.outputs]


def _random_arrivals(rng: random.Random, n: int, span_s: float) -> list[float]:
    """Arrival times in [0, span_s]: some requests together (bursts), some alone, and gaps in
    which nothing runs at all."""
    times = sorted(rng.choice([0.0, rng.uniform(0, span_s)]) for _ in range(n))
    rng.shuffle(times)                     # the prompt order is not the arrival order
    return times


def _check_timing(result, arrivals):
    """Arrivals keep their spacing (the run's start is a moment after the timeline's t0)."""
    start_us = result.outputs[0].arrival_us - arrivals[0] * 1e6
    assert 0 <= start_us < 50_000
    for o, at in zip(result.outputs, arrivals):
        assert abs(o.arrival_us - start_us - at * 1e6) < 1.0
        assert len(o.token_us) == len(o.token_ids)
        assert o.arrival_us <= o.first_token_us == o.token_us[0]
        assert o.token_us == sorted(o.token_us) and o.token_us[-1] == o.finish_us


def _assert_loops_agree(eng: Engine, rng: random.Random, max_requests: int, ks: tuple[int, ...],
                        where: str = "", arrival_span_s: float = 0.0, fresh_cache: bool = False):
    """One random workload with stops that fire: the normal loop, then overlap with each k of
    ``ks``, give the same tokens and finish reasons, valid outputs, and leave every page free.
    With ``arrival_span_s`` the requests arrive at random times in that many seconds, the same
    times for every loop. The prefix cache carries over from loop to loop (a later loop finds
    the earlier one's prompts) unless ``fresh_cache``."""
    prompts, params = _workload(rng, rng.randrange(1, max_requests + 1), 40, 24)
    params = _with_stops(eng, prompts, params, rng)
    arrivals = _random_arrivals(rng, len(prompts), arrival_span_s) if arrival_span_s else None
    if fresh_cache:
        eng.clear_prefix_cache()
    normal = eng.generate(prompts, params, NORMAL, arrivals=arrivals)
    _assert_all_free(eng)
    _check_outputs(normal, params)
    for k in ks:
        if fresh_cache:
            eng.clear_prefix_cache()
        overlap = eng.generate(prompts, params, loop_of(True, k), arrivals=arrivals)
        _assert_all_free(eng)
        _check_outputs(overlap, params)
        assert _same(normal, overlap), f"{where}k={k}"
        if arrivals:
            _check_timing(overlap, arrivals)


@pytest.fixture(scope="module")
def cpu_engine(make_checkpoint):
    # Few slots, a small page pool and a small prefill budget: admission waits, prompts chunk.
    eng = Engine(EngineConfig(model=str(make_checkpoint("llama")), device="cpu", dtype="float64",
                              max_batch_size=4, max_seq_len=96, page_size=4, num_pages=48,
                              max_prefill_tokens=24))
    yield eng
    eng.close()


@pytest.mark.parametrize("seed", range(12))
def test_normal_equals_overlap_random_workloads(cpu_engine, seed):
    # One-step overlap, and multi-step overlap (k steps).
    _assert_loops_agree(cpu_engine, random.Random(seed), 10, (1, 1 + seed % 4))


@pytest.mark.parametrize("seed", range(8))
def test_normal_equals_overlap_with_random_arrivals(cpu_engine, seed):
    # Requests join while others decode (and admission waits: 4 slots), in every loop.
    _assert_loops_agree(cpu_engine, random.Random(100 + seed), 10, (1, 1 + seed % 4),
                        arrival_span_s=0.4)


def test_idle_gaps_are_neither_cpu_work_nor_a_stall(cpu_engine):
    """Two requests 0.6 s apart: the loop idles between them (it must not raise "stalled"),
    the idle time is on no CPU-work span, and the GPU's busy share says it was idle."""
    prompts = [[5, 6, 7], [8, 9, 10]]
    params = SamplingParams(max_new_tokens=4, ignore_eos=True)
    for overlap in (False, True):
        res = cpu_engine.generate(prompts, params, loop_of(overlap), arrivals=[0.0, 0.6])
        _check_timing(res, [0.0, 0.6])
        assert res.wall_s >= 0.6
        first_done, second = res.outputs[0].finish_us, res.outputs[1].arrival_us
        busy_cpu = [s for s in res.timeline if s.lane == "cpu" and s.phase != "wait"
                    and s.start_us < second - 1000 and s.end_us > first_done + 1000]
        assert not busy_cpu, "a CPU span covers the idle gap"
        assert res.metrics["gpu_busy_frac"] < 0.9
        _assert_all_free(cpu_engine)


def test_arrivals_are_checked(cpu_engine):
    with pytest.raises(ValueError, match="one time per prompt"):
        cpu_engine.generate([[5, 6]], arrivals=[0.0, 1.0])
    with pytest.raises(ValueError, match=r"arrivals\[0\]"):
        cpu_engine.generate([[5, 6]], arrivals=[-1.0])
    with pytest.raises(ValueError, match=r"arrivals\[0\]"):
        cpu_engine.generate([[5, 6]], arrivals=[float("nan")])
    _assert_all_free(cpu_engine)


def test_sampling_is_seeded_and_mode_independent(cpu_engine):
    rng = random.Random(7)
    prompts, _ = _workload(rng, 6, 20, 1)
    params = [SamplingParams(max_new_tokens=16, temperature=0.9, top_k=rng.choice([0, 5, 50]),
                             top_p=rng.choice([1.0, 0.8, 0.5]), seed=100 + i, ignore_eos=True)
              for i in range(6)]
    a = cpu_engine.generate(prompts, params, NORMAL)
    b = cpu_engine.generate(prompts, params, OVERLAP)
    assert _same(a, b)
    greedy = cpu_engine.generate(prompts, [SamplingParams(max_new_tokens=16, ignore_eos=True)] * 6)
    assert not _same(a, greedy), "temperature 0.9 should not reproduce greedy everywhere"
    reseeded = [SamplingParams(**{**p.__dict__, "seed": p.seed + 1}) for p in params]
    c = cpu_engine.generate(prompts, reseeded)
    assert not _same(a, c)


def test_max_new_tokens_one_runs_no_decode_step(cpu_engine):
    prompts = [[5, 6, 7], [8, 9], [10, 11, 12, 13]]
    res = cpu_engine.generate(prompts, SamplingParams(max_new_tokens=1, ignore_eos=True), OVERLAP)
    assert all(len(o.token_ids) == 1 and o.finish_reason == "length" for o in res.outputs)
    forwards = {s.step: s.phase for s in res.timeline if s.lane == "engine_stream"}
    assert "decode" not in forwards.values()
    assert res.metrics["wasted_tokens"] == 0
    _assert_all_free(cpu_engine)


def test_lag_one_extra_step_is_dropped_and_counted(cpu_engine):
    prompts = [[20 + i, 30 + i] for i in range(4)]
    probe = cpu_engine.generate(prompts, SamplingParams(max_new_tokens=12, ignore_eos=True))
    stop = probe.outputs[0].token_ids[2]
    params = SamplingParams(max_new_tokens=12, stop_token_ids=(stop,), ignore_eos=True)
    res = cpu_engine.generate(prompts, params, OVERLAP)
    assert res.outputs[0].finish_reason == "stop" and res.outputs[0].token_ids[-1] == stop
    assert res.outputs[0].wasted_steps == 1
    assert res.metrics["wasted_tokens"] >= 1
    normal = cpu_engine.generate(prompts, params, NORMAL)
    assert normal.metrics["wasted_tokens"] == 0
    assert _same(normal, res)


def test_multistep_lag_k_wastes_at_most_2k_minus_1_steps(cpu_engine):
    prompts = [[20 + i, 30 + i] for i in range(4)]
    probe = cpu_engine.generate(prompts, SamplingParams(max_new_tokens=20, ignore_eos=True))
    stops = [(o.token_ids[3 + i],) for i, o in enumerate(probe.outputs)]
    params = [SamplingParams(max_new_tokens=20, stop_token_ids=s, ignore_eos=True) for s in stops]
    normal = cpu_engine.generate(prompts, params, NORMAL)
    for k in (2, 4):
        res = cpu_engine.generate(prompts, params, loop_of(True, k))
        assert _same(normal, res)
        assert (res.loop, res.decode_steps) == ("multistep", k)
        assert all(o.wasted_steps <= 2 * k - 1 for o in res.outputs)
        assert res.metrics["wasted_tokens"] >= 1
        _assert_all_free(cpu_engine)


def test_the_run_is_the_loop_its_loop_spec_names(cpu_engine):
    """The loop is given one way, a ``LoopSpec``: the run is that loop, with its k and its extra
    CPU work, and the same tokens as every other loop; the engine's default is the overlap loop,
    and anything that is not a ``LoopSpec`` is refused before a run starts."""
    prompts = [[20 + i, 30 + i, 40 + i] for i in range(3)]
    params = SamplingParams(max_new_tokens=9, ignore_eos=True)
    runs = [cpu_engine.generate(prompts, params, spec) for spec in
            (LoopSpec(Loop.NORMAL, 1, 50), LoopSpec(Loop.OVERLAP), LoopSpec(Loop.MULTISTEP, 3))]
    assert [(r.loop, r.decode_steps, r.extra_cpu_us) for r in runs] == [
        ("normal", 1, 50), ("overlap", 1, 0), ("multistep", 3, 0)]
    assert _same(runs[0], runs[1]) and _same(runs[0], runs[2])
    assert cpu_engine.generate(prompts, params).loop == Loop.OVERLAP
    for wrong in ("overlap", True, None):
        with pytest.raises(ValueError, match="LoopSpec"):
            cpu_engine.generate(prompts, params, wrong)
    _assert_all_free(cpu_engine)


def test_generate_many_times_and_more_requests_than_slots(cpu_engine):
    rng = random.Random(3)
    for _ in range(3):
        prompts, params = _workload(rng, 13, 30, 10)
        res = cpu_engine.generate(prompts, params)
        _check_outputs(res, params)
        _assert_all_free(cpu_engine)
    assert cpu_engine.stats()["runs"] >= 3


@pytest.mark.parametrize("arch", ["llama", "qwen2", "qwen3"])
def test_greedy_equals_transformers_generate(make_checkpoint, arch):
    from transformers import AutoModelForCausalLM

    path = make_checkpoint(arch)
    hf = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    rng = random.Random(arch)
    prompts = [[rng.randrange(4, VOCAB) for _ in range(rng.randrange(1, 30))] for _ in range(5)]
    with Engine(EngineConfig(model=str(path), device="cpu", dtype="float32", max_batch_size=3,
                             max_seq_len=64, max_prefill_tokens=16)) as eng:
        res = eng.generate(prompts, SamplingParams(max_new_tokens=16, ignore_eos=True))
    for p, o in zip(prompts, res.outputs):
        ref = hf.generate(torch.tensor([p]), max_new_tokens=16, do_sample=False,
                          eos_token_id=None, pad_token_id=0)[0, len(p):].tolist()
        assert o.token_ids == ref


def test_inline_fallback_matches_process(make_checkpoint):
    path = str(make_checkpoint("llama"))
    prompts = [[5, 6, 7, 8], [9, 10]]
    params = SamplingParams(max_new_tokens=8)
    with Engine(EngineConfig(model=path, device="cpu", dtype="float64",
                             cpu_device_process=False)) as inline:
        assert inline.stats()["device_kind"] == "cpu-inline"
        a = inline.generate(prompts, params)
    with Engine(EngineConfig(model=path, device="cpu", dtype="float64")) as proc:
        assert proc.stats()["device_kind"] == "cpu-process"
        b = proc.generate(prompts, params)
    assert _same(a, b)


# ---- the same properties on CUDA (both streams), float32 and bfloat16 ---------------------------

@requires_cuda
@pytest.mark.cuda
@pytest.mark.parametrize("dtype,cuda_graph,compile", [
    ("float32", False, False), ("float32", True, False), ("bfloat16", False, False),
    ("bfloat16", True, False), ("bfloat16", True, True)])
def test_cuda_normal_equals_overlap(make_checkpoint, dtype, cuda_graph, compile):
    # CUDA decode steps take the Triton paged attention kernel (attention="auto").
    torch.backends.cuda.matmul.allow_tf32 = False
    # float32: a small pool (requests retract and resume) and the prefix cache carried from loop
    # to loop. bfloat16 rounds differently in another batch layout (a resumed prefill, a cached
    # prefix), so there every loop starts from an empty cache and the pool holds everything.
    fp32 = dtype == "float32"
    cfg = EngineConfig(model=str(make_checkpoint("llama")), device="cuda", dtype=dtype,
                       cuda_graph=cuda_graph, max_batch_size=8, max_seq_len=96, page_size=4,
                       num_pages=120 if fp32 else None, max_prefill_tokens=32, compile=compile)
    with Engine(cfg) as eng:
        for seed in range(8):
            # One-step overlap, and multi-step (one upload per group).
            _assert_loops_agree(eng, random.Random(seed), 19, (1, 2 + seed % 4), f"seed {seed}, ",
                                fresh_cache=not fp32)


@requires_cuda
@pytest.mark.cuda
def test_cuda_greedy_equals_transformers(make_checkpoint):
    from transformers import AutoModelForCausalLM

    torch.backends.cuda.matmul.allow_tf32 = False
    path = make_checkpoint("qwen3")
    hf = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).cuda().eval()
    prompts = [[5, 6, 7, 8, 9], [10, 11], [12] * 20]
    with Engine(EngineConfig(model=str(path), device="cuda", dtype="float32")) as eng:
        res = eng.generate(prompts, SamplingParams(max_new_tokens=16, ignore_eos=True))
    for p, o in zip(prompts, res.outputs):
        ref = hf.generate(torch.tensor([p], device="cuda"), max_new_tokens=16, do_sample=False,
                          eos_token_id=None, pad_token_id=0)[0, len(p):].tolist()
        assert o.token_ids == ref


@requires_cuda
@pytest.mark.cuda
@pytest.mark.parametrize("dtype,compile", [("float32", False), ("bfloat16", False),
                                           ("bfloat16", True)])
def test_cuda_graphs_match_eager(make_checkpoint, dtype, compile):
    """Replaying captured decode and prefill graphs gives exactly the eager engine's tokens."""
    rng = random.Random(5)
    prompts, params = _workload(rng, 12, 30, 20)
    outs = []
    for graph in (False, True):
        cfg = EngineConfig(model=str(make_checkpoint("qwen2")), device="cuda", dtype=dtype,
                           cuda_graph=graph, max_batch_size=8, max_seq_len=64, compile=compile)
        with Engine(cfg) as eng:
            outs.append(eng.generate(prompts, params, OVERLAP))
    assert _same(outs[0], outs[1])
    # Every step ran as one graph launch, prefills too: an eager step records its sampling apart.
    eager, graphed = ({s.phase for s in out.timeline if s.lane == "engine_stream"} for out in outs)
    assert {"prefill", "sample"} <= eager and "sample" not in graphed and "prefill" in graphed


# ---- aborts (a client that goes away), through Engine.serve and a scripted source ---------------

class _ScriptedSource:
    """Requests released at their arrival times, and aborts at theirs (a RequestSource)."""

    def __init__(self, reqs, aborts):
        import time

        from engine.scheduler.sources import ScheduledSource
        self.clock = time.perf_counter_ns
        self.requests = ScheduledSource(reqs)
        self.aborts = sorted(aborts)                 # (time_ns, rid)

    def receive(self):
        got = self.requests.receive()
        now = self.clock()
        while self.aborts and self.aborts[0][0] <= now:
            got.aborts.append(self.aborts.pop(0)[1])
        return got

    def wait(self, timeout_s):
        return self.requests.wait(timeout_s) or bool(self.aborts)

    def done(self):
        return self.requests.done() and not self.aborts


@pytest.mark.parametrize("seed", range(6))
def test_aborts_free_everything_and_cut_outputs_short(cpu_engine, seed):
    _assert_aborts_are_clean(cpu_engine, seed)


def _collect_finished(into: list):
    return lambda reqs: into.extend(r for r in reqs if r.finished)


def _assert_aborts_are_clean(eng, seed):
    """Random requests, some aborted at random moments while waiting or running: every loop
    frees every page and slot exactly once, an aborted request's tokens are a prefix of what it
    would have produced, and the others are exactly the normal loop's."""
    import time

    cpu_engine = eng
    rng = random.Random(200 + seed)
    prompts, params = _workload(rng, rng.randrange(2, 10), 40, 24)
    params = [SamplingParams(max_new_tokens=p.max_new_tokens, ignore_eos=True) for p in params]
    full = cpu_engine.generate(prompts, params, NORMAL)
    arrivals = _random_arrivals(rng, len(prompts), 0.2)
    doomed = rng.sample(range(len(prompts)), k=max(1, len(prompts) // 2))
    # Each abort comes soon after its request arrives (while it waits or runs); the first at
    # the very moment it arrives, so at least one abort always finds its request waiting.
    abort_at = {rid: arrivals[rid] + (0.0 if i == 0 else rng.uniform(0.0, 0.02))
                for i, rid in enumerate(doomed)}
    intake = cpu_engine.intake()
    for overlap, k in ((False, 1), (True, 1), (True, 1 + seed % 4)):
        reqs = [intake.request(i, p, sp) for i, (p, sp) in enumerate(zip(prompts, params))]
        t0 = time.perf_counter_ns()
        for req, at in zip(reqs, arrivals):
            req.arrival_ns = t0 + int(at * 1e9)
        source = _ScriptedSource(reqs, [(t0 + int(at * 1e9), rid) for rid, at in abort_at.items()])
        ended: list = []
        cpu_engine.serve(source, _collect_finished(ended), loop_of(overlap, k))
        _assert_all_free(cpu_engine)
        assert sorted(r.rid for r in ended) == list(range(len(reqs))), "each request ends once"
        assert reqs[doomed[0]].finish_reason == "abort" and not reqs[doomed[0]].output_ids
        for req, want in zip(reqs, full.outputs):
            if req.finish_reason == "abort":
                assert req.rid in doomed
                assert req.output_ids == want.token_ids[:len(req.output_ids)]
            else:
                assert req.output_ids == want.token_ids, f"k={k} overlap={overlap}"


@requires_cuda
@pytest.mark.cuda
@pytest.mark.parametrize("cuda_graph", [False, True])
def test_cuda_arrivals_and_aborts(make_checkpoint, cuda_graph):
    """The arrival and abort properties on both CUDA streams (float32, graphs on and off)."""
    torch.backends.cuda.matmul.allow_tf32 = False
    cfg = EngineConfig(model=str(make_checkpoint("llama")), device="cuda", dtype="float32",
                       cuda_graph=cuda_graph, max_batch_size=8, max_seq_len=96, page_size=4,
                       num_pages=120, max_prefill_tokens=32)
    with Engine(cfg) as eng:
        for seed in range(4):
            _assert_loops_agree(eng, random.Random(300 + seed), 19, (1, 2 + seed % 3),
                                f"seed {seed}, ", arrival_span_s=0.2)
            _assert_aborts_are_clean(eng, seed)


@requires_cuda
@pytest.mark.cuda
@pytest.mark.parametrize("arch", ["llama", "qwen3"])
def test_cuda_triton_attention_matches_reference_fp32(make_checkpoint, arch):
    """The fast path changes no token: Triton paged attention (+ compiled regions) against the
    plain-PyTorch path, float32, greedy, on several batch layouts at once."""
    torch.backends.cuda.matmul.allow_tf32 = False
    rng = random.Random(11)
    prompts, _ = _workload(rng, 10, 30, 1)
    params = SamplingParams(max_new_tokens=24, ignore_eos=True)
    outs = []
    for attention, compile in (("reference", False), ("triton", False), ("triton", True)):
        cfg = EngineConfig(model=str(make_checkpoint(arch)), device="cuda", dtype="float32",
                           cuda_graph=True, max_batch_size=4, max_seq_len=64, page_size=4,
                           attention=attention, compile=compile)
        with Engine(cfg) as eng:
            outs.append(eng.generate(prompts, params, OVERLAP))
    assert _same(outs[0], outs[1]) and _same(outs[0], outs[2])


def _decode_step_inputs(runner, lens: list[int], pages: int):
    """Metadata of one decode step (row i at ``lens[i]`` keys, on pages of its own) over random
    KV caches and token_pool, the same for every runner given the same shape."""
    from engine.scheduler.request import COL_LEN, COL_SLOT, COL_START, NUM_INT_COLS
    ints, floats = runner.padding_meta(len(lens), NUM_INT_COLS + pages)
    rows = torch.arange(len(lens), device="cuda")
    ints[:, COL_SLOT], ints[:, COL_LEN] = rows, 1
    ints[:, COL_START] = torch.tensor(lens, device="cuda") - 1
    ints[:, NUM_INT_COLS:] = rows[:, None] * pages + torch.arange(pages, device="cuda")[None, :]
    gen = torch.Generator("cuda").manual_seed(1)
    for k_cache, v_cache in runner.kv_caches:
        k_cache.normal_(generator=gen)
        v_cache.normal_(generator=gen)
    runner.token_pool.random_(4, 300, generator=gen)
    return ints, floats


@requires_cuda
@pytest.mark.cuda
def test_cuda_compiled_decode_leaves_rope_to_the_attention_kernel(make_checkpoint):
    """Compiled, a decode step rotates q and k inside the attention kernel by default: it runs
    at least one kernel a layer fewer than with RoPE outside it (where RoPE follows the cuBLAS
    q/k/v product, which takes no fused epilogue, as a kernel of its own), and the same tokens."""
    from torch.profiler import ProfilerActivity, profile

    from engine.devices.runner import DecodeKernels, ModelRunner, RunnerConfig
    from engine.models.loader import load_model

    loaded = load_model(str(make_checkpoint("llama")), "cuda", torch.float32)
    kernels, tokens = {}, {}
    for rope in (True, False):
        runner = ModelRunner(loaded.model, RunnerConfig(
            4, 64, 64, 4, torch.float32, torch.device("cuda"), compile=True,
            kernels=DecodeKernels(rope_in_attention=rope)))
        assert runner.rope_in_attention == rope
        ints, _ = _decode_step_inputs(runner, [5, 12, 19, 26], 16)
        for _ in range(2):                                   # compile, warm up
            runner.forward_logits(ints, 1, 16)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            logits = runner.forward_logits(ints, 1, 16)
            torch.cuda.synchronize()
        kernels[rope] = sum(e.device_type.name == "CUDA" for e in prof.events())
        tokens[rope] = logits.argmax(-1)
    assert kernels[False] - kernels[True] >= loaded.spec.num_layers, kernels
    assert torch.equal(tokens[True], tokens[False])


@requires_cuda
@pytest.mark.cuda
@pytest.mark.parametrize("compile", [False, True])
def test_cuda_decode_of_many_chunks_matches_the_reference_path(make_checkpoint, compile):
    """Rows of one chunk and of several (chunks of 16 keys here), the merge among them, every
    earlier and present kernel choice: a decode step's logits are the plain path's (float32)."""
    from engine.devices.runner import EARLIER, DecodeKernels, ModelRunner, RunnerConfig
    from engine.models.loader import load_model

    torch.backends.cuda.matmul.allow_tf32 = False
    loaded = load_model(str(make_checkpoint("qwen2")), "cuda", torch.float32)
    lens = [1, 16, 17, 40, 63, 9]
    logits = {}
    for name, kernels in (("reference", None), ("chunks of 16", DecodeKernels(chunk_keys=16,
                                                                            block_n=16)),
                          ("default", DecodeKernels()), ("earlier", EARLIER)):
        runner = ModelRunner(loaded.model, RunnerConfig(
            6, 64, 96, 4, torch.float32, torch.device("cuda"),
            attention="reference" if kernels is None else "triton",
            compile=compile and kernels is not None, kernels=kernels or DecodeKernels()))
        ints, _ = _decode_step_inputs(runner, lens, 16)
        logits[name] = runner.forward_logits(ints, 1, 16).float()
    ref = logits.pop("reference")
    for name, got in logits.items():
        assert (got - ref).abs().max().item() < 1e-4 * max(ref.abs().max().item(), 1.0), name
