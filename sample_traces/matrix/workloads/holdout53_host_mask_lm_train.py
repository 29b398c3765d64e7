"""holdout53_host_mask_lm_train: a decoder LM whose every block builds its causal mask and rotary tables on the CPU and
copies them to the GPU on each call -> the same tensors as buffers made once on the device.

Fifty-third held-out set (registered before it was recorded; see the matrix README). Each of the 6 blocks, each step:
`torch.full((512, 512), -inf).triu(1)` and the cos/sin tables (`torch.outer(torch.arange(512), inv_freq)`) on the CPU,
then `.to(x.device)`: a 1 MB and two 128 KB copies from pageable memory, and the CPU ops that make them. Model: 6 x 512,
8 heads, rotary positions, an additive causal mask into scaled_dot_product_attention, vocabulary 8000; bf16 autocast,
fused AdamW; batch 8 x 512 tokens already on the GPU (two batches in turn).
"""

import torch
import torch.nn.functional as F

from ._host_consts import LM
from ._util import Step, autocast, is_cuda

NAME = "holdout53_host_mask_lm_train"
EXPECTED_KIND = "host_built_tensors"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = "the mask and rotary tables registered as buffers, made once on the device (nothing else)"
SIZE = {"batch": 8, "seq": 512, "vocab": 8000, "dim": 512, "heads": 8, "layers": 6}
DESCRIPTION = {
    "before": ("decoder LM (6 x 512, 8 heads, rotary, vocabulary 8000), batch 8 x 512, bf16 autocast, fused AdamW; "
               "each block builds its causal mask and cos/sin tables on the CPU and copies them every call"),
    "after": "same, the mask and tables as buffers made once on the device",
}


def make(variant, device, size=SIZE):
    cuda = is_cuda(device)
    s = size if cuda else {**size, "batch": 2, "seq": 16, "vocab": 50, "dim": 16, "heads": 2, "layers": 2}
    torch.manual_seed(0)
    model = LM(s["vocab"], s["dim"], s["heads"], s["layers"], s["seq"], host=variant == "before").to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True if cuda else None)
    g = torch.Generator().manual_seed(1)
    xs = [torch.randint(0, s["vocab"], (s["batch"], s["seq"]), generator=g).to(device) for _ in range(2)]
    ys = [torch.randint(0, s["vocab"], (s["batch"], s["seq"]), generator=g).to(device) for _ in range(2)]
    st = {"i": 0}

    def step():
        i = st["i"] = st["i"] + 1
        opt.zero_grad(set_to_none=True)
        with autocast(device):
            logits = model(xs[i % 2])
        F.cross_entropy(logits.float().flatten(0, 1), ys[i % 2].flatten()).backward()
        opt.step()
    return Step(step, info={"batch": s["batch"], "seq": s["seq"], "amp": "bf16", "host_consts": variant == "before"})
