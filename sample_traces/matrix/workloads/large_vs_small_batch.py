"""large_vs_small_batch: launch-bound small-batch training -> a 64x larger batch.

The step does different amounts of work in the two variants: compare the time PER SAMPLE
(the manifest's speed-up for this pair is per sample, see PER_SAMPLE / samples_per_step).
before: MLP 512->1024 (4 hidden)->10, batch 8, bf16 autocast, fused AdamW.
after:  same model and optimizer, batch 512.
"""

import torch
import torch.nn.functional as F

from ._util import Step, autocast, is_cuda, mlp

NAME = "large_vs_small_batch"
EXPECTED_KIND = "launch_overhead"
ROLE = "pair"
PER_SAMPLE = True
VARIANTS = ("before", "after")
FIX = "raise the batch size (8 -> 512) so each launch does more work; compare time per sample"
BATCH = {"before": 8, "after": 512}
DESCRIPTION = {
    "before": "MLP 512->1024 (4 hidden)->10, batch 8, bf16 autocast, fused AdamW training step",
    "after": "same model/optimizer, batch 512 (64x the samples per step: compare per sample)",
}


def make(variant, device, pool=4):
    cuda = is_cuda(device)
    din, dim = (512, 1024) if cuda else (32, 64)
    batch = BATCH[variant] if cuda else BATCH[variant] // 8
    torch.manual_seed(0)
    model = mlp(din, dim, 4, 10).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True if cuda else None)
    xs = [torch.randn(batch, din, device=device) for _ in range(pool)]
    ys = [torch.randint(0, 10, (batch,), device=device) for _ in range(pool)]
    st = {"i": 0}

    def step():
        i = st["i"] = st["i"] + 1
        opt.zero_grad(set_to_none=True)
        with autocast(device):
            logits = model(xs[i % pool])
        F.cross_entropy(logits.float(), ys[i % pool]).backward()
        opt.step()
    return Step(step, info={"samples_per_step": batch})
