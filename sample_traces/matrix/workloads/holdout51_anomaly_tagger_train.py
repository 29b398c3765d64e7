"""holdout51_anomaly_tagger_train: a small transformer token tagger trained with autograd's anomaly detection left on
(`torch.autograd.set_detect_anomaly(True)` at the top of the script, as users leave it after debugging a NaN) -> off.

Fifty-first held-out set (registered before it was recorded; see the matrix README). With anomaly detection on, every
autograd node made in the forward pass stores the Python stack that made it (traceback.format_stack), and in the
backward pass the engine checks each node's outputs for NaN (`isnan(...)._is_any_true().item()`): a device-to-host
read, so a sync, after every backward node, on the autograd engine's thread with no user line. Model: holdout48's
tagger (token embedding, vocabulary 4000, plus positions; nn.TransformerEncoder, pre-norm, no dropout; a linear head),
4 layers of 256, 4 heads; bf16 autocast, fused AdamW; batch 32 x 128 tokens already on the GPU (two batches in turn),
a cross_entropy over every position.
"""

import torch
import torch.nn.functional as F

from ._anomaly import anomaly
from ._util import Step, autocast, is_cuda
from .holdout48_per_seq_loss_train import Tagger

NAME = "holdout51_anomaly_tagger_train"
EXPECTED_KIND = "anomaly_detection"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = "torch.autograd.set_detect_anomaly(False) (anomaly detection off), nothing else"
SIZE = {"batch": 32, "seq": 128, "vocab": 4000, "dim": 256, "heads": 4, "layers": 4}
DESCRIPTION = {
    "before": ("transformer tagger (4 x 256, 4 heads, vocabulary 4000), batch 32 x 128, bf16 autocast, fused AdamW, "
               "torch.autograd.set_detect_anomaly(True)"),
    "after": "same, anomaly detection off",
}


def make(variant, device, size=SIZE):
    cuda = is_cuda(device)
    s = size if cuda else {**size, "batch": 3, "seq": 16, "vocab": 50, "dim": 16, "heads": 2, "layers": 1}
    restore = anomaly(variant == "before")
    torch.manual_seed(0)
    model = Tagger(s["vocab"], s["dim"], s["heads"], s["layers"], s["seq"]).to(device)
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
    return Step(step, close=restore, info={"batch": s["batch"], "seq": s["seq"], "amp": "bf16",
                                           "detect_anomaly": variant == "before"})
