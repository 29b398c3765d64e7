"""holdout49_thread_postproc_infer: a conv classifier's inference whose per-image post-processing (top-5 classes
and a confidence picked out of each row of probabilities in pure Python, formatted to a string) runs on a
ThreadPoolExecutor(8) of the inference process -> the same function on a ProcessPoolExecutor(8).

Forty-ninth held-out set (registered before it was recorded; see the matrix README). Model: holdout48's conv
classifier, wider (four conv-BN-ReLU stages of 64/128/256/512 channels, pool, a 200-class head), eval, bf16 weights,
channels_last, inference_mode; batch 512 of 3 x 64 x 64 already on the GPU (two batches in turn). Each step: the
forward, softmax, `.cpu().numpy()` (a sync), one executor.submit of the batch's probabilities, and at most 8
batches in flight (the oldest's result awaited). The threads hold the GIL while they loop over the rows, so the
inference loop waits for the interpreter between its launches.
before: concurrent.futures.ThreadPoolExecutor(max_workers=8).
after:  concurrent.futures.ProcessPoolExecutor(max_workers=8, fork context; the workers never touch CUDA).
"""

import collections
import concurrent.futures as cf
import multiprocessing

import torch

from ._util import Step, is_cuda
from .holdout48_per_sample_forward_infer import make_model

NAME = "holdout49_thread_postproc_infer"
EXPECTED_KIND = "host_bound"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = "the post-processing moved from a ThreadPoolExecutor(8) to a ProcessPoolExecutor(8)"
SIZE = {"batch": 512, "hw": 64, "widths": (64, 128, 256, 512), "classes": 200, "workers": 8}
DESCRIPTION = {
    "before": ("conv classifier (4 conv-BN-ReLU stages, 64-512 ch, 200 classes), bf16, channels_last, inference_mode, "
               "batch 512 of 3 x 64 x 64; outputs to numpy each step, per-image top-5 post-processing in pure Python "
               "on a ThreadPoolExecutor(8), at most 8 batches in flight"),
    "after": "same post-processing on a ProcessPoolExecutor(8)",
}
WARMUP_STEPS = 12
LABELS = tuple(f"class_{k:03d}" for k in range(1000))


def sizes(device, size=SIZE):
    return size if is_cuda(device) else {**size, "batch": 3, "hw": 16, "widths": (8, 8, 16, 16), "classes": 10,
                                         "workers": 2}


def postprocess(probs):
    """Each row's top-5 classes and a confidence (sum of squares), found by a scan in Python, as one string."""
    out = []
    for row in probs.tolist():
        top, idx = [-1.0] * 5, [0] * 5
        lo, j_lo, conf = -1.0, 0, 0.0
        for k, p in enumerate(row):
            conf += p * p
            if p > lo:
                top[j_lo], idx[j_lo] = p, k
                lo, j_lo = top[0], 0
                for j in range(1, 5):
                    if top[j] < lo:
                        lo, j_lo = top[j], j
        o = sorted(range(5), key=top.__getitem__, reverse=True)
        out.append(f"{LABELS[idx[o[0]]]}:{top[o[0]]:.3f} {LABELS[idx[o[1]]]}:{top[o[1]]:.3f} {LABELS[idx[o[2]]]} "
                   f"{LABELS[idx[o[3]]]} {LABELS[idx[o[4]]]} conf={conf:.4f}")
    return len(out)


def make(variant, device, size=SIZE):
    s = sizes(device, size)
    torch.manual_seed(0)
    model = make_model(s["widths"], s["classes"]).to(device).eval()
    if is_cuda(device):
        model = model.to(torch.bfloat16).to(memory_format=torch.channels_last)
    dtype = next(model.parameters()).dtype
    g = torch.Generator().manual_seed(1)
    xs = [torch.randn(s["batch"], 3, s["hw"], s["hw"], generator=g).to(device, dtype)
          .contiguous(memory_format=torch.channels_last) for _ in range(2)]
    if variant == "before":
        pool = cf.ThreadPoolExecutor(max_workers=s["workers"])
    else:
        pool = cf.ProcessPoolExecutor(max_workers=s["workers"], mp_context=multiprocessing.get_context("fork"))
    pending = collections.deque()
    st = {"i": 0}

    def step():
        i = st["i"] = st["i"] + 1
        with torch.inference_mode():
            probs = model(xs[i % 2]).float().softmax(-1).cpu().numpy()
        pending.append(pool.submit(postprocess, probs))
        while len(pending) > s["workers"]:
            pending.popleft().result()

    def close():
        for f in pending:
            f.result()
        pending.clear()
        pool.shutdown(wait=True)
    return Step(step, close=close, info={"batch": s["batch"], "classes": s["classes"],
                                         "postprocess": f"{'threads' if variant == 'before' else 'processes'} "
                                                        f"x {s['workers']}"})
