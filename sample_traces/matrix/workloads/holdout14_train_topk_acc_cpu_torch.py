"""holdout14_train_topk_acc_cpu_torch: a training loop scoring top-1/top-5 accuracy with torch on CPU tensors -> on the GPU.

Fourteenth held-out set (written after the reading of a copied result by torch ops on CPU tensors was
priced as those ops' kernel launches once on the GPU, reads.replacement_launches): a training step this
time, and topk over 1,000-long rows (KERNELS_PER_CALL's topk count was seen on 2,048-long rows).
before: MLP classifier 1024->2048 (2 hidden)->1000 classes, batch 1024, bf16 autocast, fused AdamW, cross
        entropy; per step logits.detach().float().cpu() (4 MB), then on the CPU topk(5), a comparison with
        the labels, top-1 and top-5 hit counts, read with int() every step.
after:  the same counts on the GPU, accumulated in a GPU tensor; one copy per 50 steps.
after_graph: after, with the whole step (and the counts) captured in one CUDA graph (added after the
        held-out run: the tool ranked launch_overhead, which was not measured, above the sync on every row).
after_graph_only: the training step captured in one CUDA graph, the before's per-step copy of the logits
        and CPU scoring kept after each replay (added 2026-11-26 18:00Z, before it was recorded: the copy
        comes after the step's last launch, so the tool no longer calls it what the graph needs first, and
        ranks the graph by what it saves alone; this measures that).
"""

import torch
import torch.nn.functional as F

from ._util import Step, autocast, capture_graph, is_cuda, mlp, replay_step

NAME = "holdout14_train_topk_acc_cpu_torch"
EXPECTED_KIND = "sync_stall"
ROLE = "pair"
VARIANTS = ("before", "after", "after_graph", "after_graph_only")
FIX = "topk and the hit counts on the GPU, accumulated as tensors; one copy every 50 steps"
DESCRIPTION = {
    "before": ("training: MLP 1024->2048 (2 hidden)->1000, batch 1024, bf16, fused AdamW, CE; per step 4 MB of "
               "logits to the CPU, topk(5), top-1/top-5 hits counted with torch on CPU tensors"),
    "after": "same step; the hit counts on the GPU in a tensor, copied once every 50 steps",
    "after_graph": "after, the whole step in one CUDA graph (capturable fused AdamW)",
    "after_graph_only": "before, the training step in one CUDA graph; the per-step 4 MB copy and CPU scoring kept",
}
EVERY = 50


def make(variant, device, pool=4):
    cuda = is_cuda(device)
    batch, din, dim, classes = (1024, 1024, 2048, 1000) if cuda else (16, 16, 32, 10)
    torch.manual_seed(0)
    model = mlp(din, dim, 2, classes).to(device)
    graph = variant in ("after_graph", "after_graph_only") and cuda
    only = variant == "after_graph_only"
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True if cuda else None, capturable=graph)
    xs = [torch.randn(batch, din, device=device) for _ in range(pool)]
    ys = [torch.randint(0, classes, (batch,), device=device) for _ in range(pool)]
    ys_cpu = [y.cpu() for y in ys]
    st = {"i": 0, "top1": 0, "top5": 0}
    counts = torch.zeros(2, dtype=torch.long, device=device)

    def hits(logits, y):
        top = logits.topk(5, dim=1).indices
        match = top == y[:, None]
        return torch.stack([match[:, 0].sum(), match.any(dim=1).sum()])

    def read_counts(i):
        if i % EVERY == 0:
            c = counts.cpu()
            st["top1"] += int(c[0])
            st["top5"] += int(c[1])
            counts.zero_()
    if graph:
        sx, sy = xs[0].clone(), ys[0].clone()

        def body():
            opt.zero_grad(set_to_none=False)
            # The autocast weight cache must be off inside a graph (torch.cuda.graph docs).
            with torch.autocast(device_type="cuda", dtype=torch.bfloat16, cache_enabled=False):
                logits = model(sx)
            F.cross_entropy(logits.float(), sy).backward()
            opt.step()
            if only:
                out.copy_(logits.detach().float())
                return
            with torch.no_grad():
                counts.add_(hits(logits.detach(), sy))
        out = torch.empty(batch, classes, device=device)

        def score_on_cpu(i):
            h = hits(out.cpu(), ys_cpu[i % pool])        # 4 MB, blocking, every step, as before
            st["top1"] += int(h[0])
            st["top5"] += int(h[1])
        g = capture_graph(body, warmup=3, before_capture=counts.zero_)
        return Step(replay_step(g, [(sx, xs), (sy, ys)], after=score_on_cpu if only else read_counts),
                    info={"batch": batch, "classes": classes, "cuda_graph": True})

    def step():
        i = st["i"] = st["i"] + 1
        x, y = xs[i % pool], ys[i % pool]
        opt.zero_grad(set_to_none=True)
        with autocast(device):
            logits = model(x)
        F.cross_entropy(logits.float(), y).backward()
        opt.step()
        if variant in ("before", "after_graph_only"):     # (a graph only on a GPU)
            h = hits(logits.detach().float().cpu(), ys_cpu[i % pool])   # 4 MB, blocking, every step
            st["top1"] += int(h[0])
            st["top5"] += int(h[1])
        else:
            with torch.no_grad():
                counts.add_(hits(logits.detach(), y))
            read_counts(i)
    return Step(step, info={"batch": batch, "classes": classes})
