"""eval_to_numpy: an evaluation loop that moves every batch's outputs to numpy.

before: per batch ``probs.cpu().numpy()``, argmax and accuracy in numpy: a blocking D2H copy,
        so the host waits for the forward of every batch before it can launch the next.
after:  argmax / correct-count on the GPU, predictions written into a preallocated GPU buffer;
        one transfer per 64 batches ("end of the eval pass"), amortised in the step time.
after_graph_only: the before loop (a blocking copy to numpy every batch) with the forward and
        softmax captured in one CUDA graph: the launch fix alone, the sync kept, measured to check
        how launch_overhead ranks against sync_stall.
after_pinned: the pageable fix as the tool words it: each batch's probabilities copied non_blocking into
        one of two pinned buffers on a side stream, and numpy reads the previous batch's while this one
        runs (added 2026-11-26, h100_clean6: with with_stack the tool ranks pageable_memcpy first on the
        large batch, and that fix had never been measured).
"""

import numpy as np
import torch

from ._util import Step, autocast, capture_graph, is_cuda, mlp, replay_step

NAME = "eval_to_numpy"
EXPECTED_KIND = "sync_stall"
ROLE = "pair"
VARIANTS = ("before", "after", "after_graph_only", "after_pinned")
FIX = "keep predictions/metrics on the GPU; one .cpu() at the end of the eval pass (here every 64 batches)"
DESCRIPTION = {
    "before": ("eval: MLP 1024->2048 (6 hidden)->100, batch 512, bf16 autocast, no_grad; per batch "
               "softmax(...).cpu().numpy() + numpy argmax/accuracy"),
    "after": "same model; argmax/accuracy on the GPU into a preallocated buffer, one D2H per 64 batches",
    "after_graph_only": "the before loop with forward+softmax in one CUDA graph; .cpu().numpy() every batch kept",
    "after_pinned": "the before loop with probabilities copied to two pinned buffers on a side stream, read a batch later",
}
EPOCH = 64


def make(variant, device, pool=8, batch=512):
    cuda = is_cuda(device)
    din, dim, classes = (1024, 2048, 100) if cuda else (32, 64, 10)
    if not cuda:
        batch = 16
    torch.manual_seed(0)
    model = mlp(din, dim, 6, classes).to(device).eval()
    xs = [torch.randn(batch, din, device=device) for _ in range(pool)]
    ys = [torch.randint(0, classes, (batch,), device=device) for _ in range(pool)]
    ys_np = [y.cpu().numpy() for y in ys]
    st = {"i": 0, "correct": 0, "seen": 0, "preds": []}

    def forward(i):
        with torch.no_grad(), autocast(device):
            return model(xs[i % pool]).float()

    if variant == "after_graph_only" and cuda:
        sx = xs[0].clone()

        def body():
            # The autocast weight cache must be off inside a graph (torch.cuda.graph docs).
            with torch.no_grad(), torch.autocast(device_type="cuda", dtype=torch.bfloat16, cache_enabled=False):
                return model(sx).float().softmax(-1)
        warm = {}
        g = capture_graph(lambda: warm.update(out=body()), warmup=3)
        out = warm["out"]

        def score(i):
            pred = out.cpu().numpy().argmax(1)               # the blocking D2H every batch is kept
            st["correct"] += int((pred == ys_np[i % pool]).sum())
            st["seen"] += len(pred)
        return Step(replay_step(g, [(sx, xs)], after=score), info={"batch": batch, "transfers_per_step": 1, "cuda_graph": True})
    if variant == "after_pinned" and cuda:
        hosts = [torch.empty(batch, classes, pin_memory=True) for _ in range(2)]
        side = torch.cuda.Stream()
        ev = [torch.cuda.Event() for _ in range(2)]
        keep = [None, None]

        def step():
            i = st["i"] = st["i"] + 1
            b = i % 2
            keep[b] = forward(i).softmax(-1)
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                hosts[b].copy_(keep[b], non_blocking=True)
                ev[b].record(side)
            if i > 1:                                        # the previous batch, copied while this one ran
                ev[1 - b].synchronize()
                pred = hosts[1 - b].numpy().argmax(1)
                st["correct"] += int((pred == ys_np[(i - 1) % pool]).sum())
                st["seen"] += len(pred)
        return Step(step, info={"batch": batch, "transfers_per_step": 1, "pinned": True})
    if variant != "after":
        def step():
            i = st["i"] = st["i"] + 1
            probs = forward(i).softmax(-1).cpu().numpy()    # blocking D2H every batch
            pred = probs.argmax(1)
            st["correct"] += int((pred == ys_np[i % pool]).sum())
            st["seen"] += len(pred)
            if len(st["preds"]) >= EPOCH:
                st["preds"].clear()
            st["preds"].append(pred)
        return Step(step, info={"batch": batch, "transfers_per_step": 1})

    buf = torch.empty(EPOCH, batch, dtype=torch.long, device=device)
    correct = torch.zeros((), dtype=torch.long, device=device)

    def step():
        i = st["i"] = st["i"] + 1
        k = i % EPOCH
        pred = forward(i).argmax(-1)
        buf[k].copy_(pred)
        correct.add_((pred == ys[i % pool]).sum())
        if k == EPOCH - 1:                                   # end of the eval pass: one transfer
            st["preds"] = buf.cpu().numpy()
            st["correct"] += int(correct.item())
            correct.zero_()
    return Step(step, info={"batch": batch, "transfers_per_step": 1 / EPOCH})
