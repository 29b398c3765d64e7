"""holdout_compile_infer: a small transformer encoder's inference, torch.compile default -> reduce-overhead.

Held out (see holdout_compile_train): attention and MLP blocks instead of compile_default_vs_ro's MLP.

before: 3x nn.TransformerEncoderLayer(d_model=256, nhead=4, dim_feedforward=1024, batch_first), batch 8,
        sequence 64, fp16 autocast, no_grad, torch.compile(mode="default").
after:  the same, torch.compile(mode="reduce-overhead").
"""

import torch
import torch.nn as nn

from ._util import Step, autocast, cpu_mode, is_cuda

NAME = "holdout_compile_infer"
EXPECTED_KIND = "launch_overhead"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = 'torch.compile(model, mode="reduce-overhead") instead of mode="default"'
DESCRIPTION = {
    "before": "3 TransformerEncoderLayer(256, 4 heads, ff 1024), batch 8 x 64 tokens, fp16 no_grad, compile default",
    "after": 'same, torch.compile(mode="reduce-overhead")',
}
WARMUP_STEPS = 8
MODES = {"before": "default", "after": "reduce-overhead"}


def make(variant, device):
    cuda = is_cuda(device)
    d, batch, seq = (256, 8, 64) if cuda else (32, 2, 8)
    torch.manual_seed(0)
    layer = lambda: nn.TransformerEncoderLayer(d, 4, 4 * d, dropout=0.0, batch_first=True)  # noqa: E731
    model = nn.Sequential(*[layer() for _ in range(3)]).to(device).eval()
    compiled = not cpu_mode()
    if compiled:
        torch._dynamo.reset()
        fn = torch.compile(model, mode=MODES[variant])
    else:
        fn = model
    xs = [torch.randn(batch, seq, d, device=device) for _ in range(4)]
    st = {"i": 0}

    def step():
        i = st["i"] = st["i"] + 1
        with torch.no_grad(), autocast(device, torch.float16):
            fn(xs[i % 4])

    def close():
        if compiled:
            torch._dynamo.reset()
    return Step(step, close=close, info={"batch": batch, "seq": seq, "compile_mode": MODES[variant],
                                         "compiled": compiled})
