from engine import Engine, EngineConfig, SamplingParams
from engine.arrivals import poisson_times
from engine.workload import word_prompts
if __name__ == "__main__":
    with Engine(EngineConfig(model="bundled", device="cpu", max_batch_size=8)) as eng:
        prompts, _ = word_prompts("", 16, 12)
        times = poisson_times(8.0, 16, seed=1)
        sp = SamplingParams(max_new_tokens=32, ignore_eos=True)
        eng.generate(prompts[:4], sp)
        for ov in (False, True):
            r = eng.generate(prompts, sp, overlap=ov, arrivals=times)
            m = r.metrics
            print(ov, f"{m['tokens_per_s']:.0f} tok/s busy {m['gpu_busy_frac']:.2f} ttft {m['ttft_ms_mean']:.1f}/{m['ttft_ms_p99']:.1f} itl {m['itl_ms_mean']:.1f}/{m['itl_ms_p50']:.1f}/{m['itl_ms_p99']:.1f} wall {r.wall_s:.2f} req/s {m['requests_per_s']:.2f}", eng.stats()["kv_pages_free"])
        print(times[-1])
