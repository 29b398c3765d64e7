"""holdout42_timm_effnet_loader_workers0: a timm EfficientNet-B0 fed by per-sample CPU augmentation in
DataLoader(num_workers=0) -> 8 workers.

Forty-second held-out set (pre-registered 2026-12-04 before it was recorded; see holdout42_hf_llama_loss_item_accum).
Model: timm's efficientnet_b0 built without weights, channels_last, bf16 autocast, fused AdamW, batch 64 images
128 x 128, cross entropy. Dataset: per sample, a random 128 x 128 crop of a 144 x 144 uint8 image from a bank, a
random horizontal flip, and a per-channel normalisation to float32, all torch ops on the CPU.
before: DataLoader(num_workers=0): the augmentation runs on the training loop's thread.
after:  DataLoader(num_workers=8, persistent_workers=True, pin_memory=True, prefetch_factor=4), non_blocking copies.
after_graph_only (added once the set was read, 2026-12-04, so not held out: the tool's top finding on 7 of 8 before
        traces was launch_overhead, about 3.9x, unmeasured): before's loader (num_workers=0), the model under
        torch.compile(backend="cudagraphs") (forward and backward replayed as CUDA graphs, no fusion); the loss and
        the fused AdamW step stay eager.
"""

import torch
import torch.nn.functional as F

from ._util import Step, autocast, cpu_mode, is_cuda

NAME = "holdout42_timm_effnet_loader_workers0"
EXPECTED_KIND = "host_bound"
ROLE = "pair"
VARIANTS = ("before", "after", "after_graph_only")
FIX = "DataLoader(num_workers=8, persistent_workers=True, pin_memory=True, prefetch_factor=4)"
SIZE = {"model": "efficientnet_b0", "batch": 64, "img": 128, "src": 144}
DESCRIPTION = {
    "before": "timm efficientnet_b0 (no weights), channels_last, bf16 autocast, batch 64 x 128 x 128, per-sample "
              "torch crop/flip/normalise on the CPU, DataLoader(num_workers=0)",
    "after": "same augmentation in DataLoader(num_workers=8, persistent_workers=True, pin_memory=True, "
             "prefetch_factor=4)",
    "after_graph_only": 'before, the model under torch.compile(backend="cudagraphs")',
}
WARMUP_STEPS = 12


class Augmented(torch.utils.data.Dataset):
    def __init__(self, n=256, src=144, out=128):
        g = torch.Generator().manual_seed(0)
        self.bank = torch.randint(0, 256, (n, 3, src, src), dtype=torch.uint8, generator=g)
        self.out = out
        self.mean = torch.tensor([0.485, 0.456, 0.406]).view(3, 1, 1)
        self.std = torch.tensor([0.229, 0.224, 0.225]).view(3, 1, 1)

    def __len__(self):
        return 1_000_000

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        img = self.bank[i % len(self.bank)]
        top, left = (int(v) for v in torch.randint(0, img.shape[-1] - self.out + 1, (2,), generator=g))
        img = img[:, top:top + self.out, left:left + self.out]
        if torch.rand((), generator=g) < 0.5:
            img = img.flip(-1)
        img = (img.float() / 255.0 - self.mean) / self.std
        return img.contiguous(), i % 1000


def make(variant, device):
    import timm

    cuda = is_cuda(device)
    s = SIZE if cuda else {"model": "efficientnet_b0", "batch": 2, "img": 32, "src": 40}
    torch.manual_seed(0)
    model = timm.create_model(s["model"], pretrained=False, num_classes=1000).to(device).train()
    model = model.to(memory_format=torch.channels_last)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True if cuda else None)
    graphed = variant == "after_graph_only" and cuda and not cpu_mode()
    if graphed:
        torch._dynamo.reset()
    fwd = torch.compile(model, backend="cudagraphs") if graphed else model
    data = Augmented(256 if cuda else 8, s["src"], s["img"])
    workers = (8 if cuda else 1) if variant == "after" else 0
    kw = dict(num_workers=workers, persistent_workers=True, pin_memory=cuda, prefetch_factor=4) if workers else {}
    loader = torch.utils.data.DataLoader(data, batch_size=s["batch"], shuffle=False, **kw)
    st = {"it": iter(loader)}

    def step():
        x, y = next(st["it"])
        x = x.to(device, non_blocking=True).contiguous(memory_format=torch.channels_last)
        y = y.to(device, non_blocking=True)
        opt.zero_grad(set_to_none=True)
        with autocast(device):
            out = fwd(x)
        F.cross_entropy(out.float(), y).backward()
        opt.step()
    def close():
        st.clear()
        if graphed:
            torch._dynamo.reset()
    return Step(step, close=close, info={**s, "num_workers": workers, "cudagraphs_backend": graphed})
