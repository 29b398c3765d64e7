"""holdout3_eval_argmax_cpu: an eval loop that moves logits to the CPU for argmax -> argmax on the GPU.

Third held-out set: a per-batch device-to-host copy of the whole logits tensor plus CPU work.

before: a 4-layer MLP classifier (512 wide, 2000 classes) in fp16 no_grad on batches of 2048;
        each batch: preds = logits.float().cpu().argmax(1) and accuracy summed on the CPU.
after:  preds = logits.argmax(1) on the GPU, correct counts accumulated on the GPU, read once per
        100 batches.
"""

import torch

from ._util import Step, autocast, is_cuda, mlp

NAME = "holdout3_eval_argmax_cpu"
EXPECTED_KIND = "sync_stall"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = "argmax and accuracy on the GPU; read the count back once at the end"
DESCRIPTION = {
    "before": "MLP 512 -> 2000 classes, batch 2048, fp16 no_grad; logits.cpu().argmax(1) per batch",
    "after": "argmax and correct counts on the GPU, read once per 100 batches",
}


def make(variant, device):
    cuda = is_cuda(device)
    n, d, classes = (2048, 512, 2000) if cuda else (16, 16, 10)
    torch.manual_seed(0)
    model = mlp(d, d, 2, classes).to(device).eval()
    xs = [torch.randn(n, d, device=device) for _ in range(4)]
    ys = [torch.randint(0, classes, (n,), device=device) for _ in range(4)]
    ys_cpu = [y.cpu() for y in ys]
    st = {"i": 0, "correct": 0, "gpu_correct": torch.zeros((), device=device, dtype=torch.long)}

    def step():
        i = st["i"] = st["i"] + 1
        with torch.no_grad(), autocast(device, torch.float16):
            logits = model(xs[i % 4])
        if variant == "before":
            preds = logits.float().cpu().argmax(1)
            st["correct"] += int((preds == ys_cpu[i % 4]).sum())
        else:
            st["gpu_correct"] += (logits.argmax(1) == ys[i % 4]).sum()
            if i % 100 == 0:
                st["correct"] += int(st["gpu_correct"].item())
                st["gpu_correct"].zero_()
    return Step(step, info={"batch": n, "classes": classes})
