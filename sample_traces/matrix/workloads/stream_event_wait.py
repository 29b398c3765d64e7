"""stream_event_wait: side-stream work that the main stream waits for too early.

Each step: A = first half of an MLP forward; its bf16 activation h (4096x4096, 32 MiB) is
snapshotted to pinned host memory on a side stream (e.g. activation offload / debugging dump),
then C = second half of the forward runs on h.
before: the main stream waits (cudaStreamWaitEvent) for the side stream's D2H copy right after
        issuing it, although C does not need the copy: copy and C run one after the other.
after:  the main stream only waits for the copy before the host buffer is reused (two steps
        later); the copy runs on the copy engine while C computes.
"""

import torch

from ._util import Step, autocast, is_cuda, mlp

NAME = "stream_event_wait"
EXPECTED_KIND = "dependency_wait"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = "drop the premature main.wait_event(copy_done); wait only where the result is needed (buffer reuse)"
DESCRIPTION = {
    "before": ("no_grad bf16 MLP halves A and C (each 4 Linear(4096,4096)+GELU), batch 4096; bf16 h=A(x) copied "
               "D2H to pinned memory on a side stream; main stream waits for that copy (cudaStreamWaitEvent) before C"),
    "after": "same work; main stream waits for the copy only before reusing the pinned buffer, so copy overlaps C",
}


def make(variant, device, pool=4):
    cuda = is_cuda(device)
    rows, d = (4096, 4096) if cuda else (32, 64)
    torch.manual_seed(0)
    A = mlp(d, d, 2, d).to(device=device, dtype=torch.bfloat16).eval()
    C = mlp(d, d, 2, d).to(device=device, dtype=torch.bfloat16).eval()
    xs = [torch.randn(rows, d, device=device, dtype=torch.bfloat16) for _ in range(pool)]
    st = {"i": 0}

    if not cuda:
        host = torch.empty(rows, d, dtype=torch.bfloat16)

        def step():
            i = st["i"] = st["i"] + 1
            with torch.no_grad(), autocast(device):
                h = A(xs[i % pool])
                host.copy_(h)
                C(h)
        return Step(step, info={"rows": rows})

    main = torch.cuda.current_stream()
    side = torch.cuda.Stream()
    host = [torch.empty(rows, d, dtype=torch.bfloat16).pin_memory() for _ in range(2)]
    h_ready = [torch.cuda.Event() for _ in range(2)]
    copied = [torch.cuda.Event() for _ in range(2)]
    early = variant == "before"

    def step():
        i = st["i"] = st["i"] + 1
        slot = i % 2
        with torch.no_grad(), autocast(device):
            if not early:
                main.wait_event(copied[slot])              # buffer reuse: copy from 2 steps ago done
            h = A(xs[i % pool])
            h_ready[slot].record(main)
            with torch.cuda.stream(side):
                side.wait_event(h_ready[slot])
                host[slot].copy_(h, non_blocking=True)
                copied[slot].record(side)
            h.record_stream(side)
            if early:
                main.wait_event(copied[slot])              # premature: C does not need the copy
            C(h)
    return Step(step, info={"rows": rows, "snapshot_MiB": rows * d * 2 / 2**20,
                            "wait": "right after issuing the copy" if early else "before buffer reuse"})
