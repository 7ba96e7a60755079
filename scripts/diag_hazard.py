"""Diagnose the no_deferred_free hazard on CUDA: does the race window open, is a fault seen?"""
import sys
from dataclasses import replace

sys.path.insert(0, "tests")
import conftest  # noqa: E402
import torch  # noqa: E402

from engine import EngineConfig, HazardSwitches  # noqa: E402
from engine.lab.hazard_lab import HAZARDS, run_hazard  # noqa: E402

if __name__ == "__main__":
    cfg, cls = conftest._config("llama")
    torch.manual_seed(1234)
    cls(cfg).save_pretrained("/tmp/fix")
    base = EngineConfig(model="/tmp/fix", device="cuda", dtype="float32", max_seq_len=96)
    for delay in (3000, 20000):
        HAZARDS["no_deferred_free"] = replace(HAZARDS["no_deferred_free"], delay_us=delay)
        for seed in (1, 2):
            r = run_hazard(base, "no_deferred_free", seed=seed)
            print(delay, seed, r.fault_found, r.windows, r.findings, r.note[:60])
    print(HazardSwitches)
