"""Check that workloads' variants run (two steps each on the CPU and the GPU); nothing is timed.

    python sample_traces/matrix/smoke.py holdout43_hf_gpt2_small_compile holdout43_hf_bert_tagger_compile ...

SMOKE_DEVICES=cuda (or cpu) runs one half. A held-out set's registration runs it on the set's workloads before
recording (the forty-second and forty-third sets named it smoke42.py and smoke43.py, with the names written in)."""
import importlib
import os
import sys

import torch

sys.path.insert(0, "sample_traces")
NAMES = sys.argv[1:]

for device in os.environ.get("SMOKE_DEVICES", "cpu,cuda").split(","):
    os.environ["TI_CPU"] = "1" if device == "cpu" else ""
    for name in NAMES:
        mod = importlib.import_module(f"matrix.workloads.{name}")
        for variant in mod.VARIANTS:
            try:
                st = mod.make(variant, torch.device(device))
                for _ in range(2):
                    st()
                if device == "cuda":
                    torch.cuda.synchronize()
                st.close()
                print("ok", device, name, variant, st.info, flush=True)
            except Exception as e:      # (a smoke test: report and go on)
                print("FAIL", device, name, variant, repr(e)[:400], flush=True)
