"""fusion_candidates: GPU time spent in chains of small elementwise / reduction kernels.

Each unfused pointwise op reads and writes its tensors through memory; a fused kernel does a chain of
them in one pass. A chain is a run of consecutive elementwise kernels on one stream (a GEMM or a
convolution ends it: a compiler fuses pointwise ops with each other, not into library kernels).

A fused chain costs the longer of two things, in the chain's mean kernels:
- one pass over memory, FUSED_COST (inputs read and outputs written once);
- the chain's arithmetic, which each unfused kernel hid under its own memory traffic and the fused one
  must still do: TRANSCENDENTAL_COST per transcendental op (sin, exp, sigmoid, rsqrt ...: tens of
  instructions per element) and ARITH_COST per other op, on an H100. Measured on two chains of 55-60 ops
  with 12-17 transcendental ones (fp32 and bf16, 8M-16M elements): the fused Triton kernel took 3.3-3.6
  mean kernels on an H100 and 4.5-5.0 on an H200, compute-bound, where one pass would be about one.
  Faster memory for the same cores makes the unfused kernels shorter, not the arithmetic: the costs
  scale with the GPU's bandwidth per FLOP (trace/gpu_specs.py; an unknown GPU counts as an H100).
The range goes from one mean kernel (all arithmetic hidden) to 3 mean kernels or 1.5x the arithmetic; a
chain that is k exact repeats of one kernel sequence (a function called on k tensors, or a loop over one:
the trace cannot tell) pays k passes at that end. Measured on held-out chains (H100): a hand-written
LayerNorm called 3 times and a GELU on 4 activations took 3.4 mean kernels fused (a pass per call), 8-12
times what one pass would.
Only reported when the GPU is the bottleneck (busy most of the step): when the CPU is, launch_overhead
already says so.
"""
from __future__ import annotations

import numpy as np

from ..trace.gpu_specs import bandwidth_to_compute
from .base import Context, Finding, KindSpec
from .fixes import FuseChains

# On a busy GPU a compiler's gain of a few percent is an opportunity, not a problem: ranked as a fix
# (and the step no longer called healthy) only from 15% of the step.
SPEC = KindSpec("fusion_candidates", "slowed by unfused elementwise kernels", min_share=0.15)

ELEMENTWISE = r"elementwise_kernel|vectorized_elementwise|unrolled_elementwise|reduce_kernel|" \
              r"CatArrayBatchedCopy|index_elementwise"
MIN_BUSY_SHARE = 0.6      # of the step: the GPU must be the bottleneck
FUSED_COST = 1.5          # a fused chain's memory pass, in its mean kernels
TRANSCENDENTAL = r"(?:sin|cos|tan|exp|expm1|log|log1p|log2|sigmoid|tanh|erf|erfc|erfinv|gelu|silu|mish|" \
                 r"softplus|rsqrt|sqrt|pow|atan|asin|acos|sinh|cosh|lgamma|digamma)_(?:\w*_)?kernel|" \
                 r"Gelu\w*Kernel|pow_tensor"
TRANSCENDENTAL_COST = 0.2  # of a mean kernel, per transcendental op in the fused kernel
ARITH_COST = 0.02          # per other op (an add or a multiply per element)
# (memory pass, arithmetic scale, a pass per repeat) at the best and the worst end of the range.
COST_RANGE = ((1.0, 0.0, False), (3.0, 1.5, True))


def _chains(ctx: Context) -> list[np.ndarray]:
    """Runs of >= 2 consecutive elementwise kernels per stream, as GPU row ids, in full steps."""
    m = ctx.model
    g = m.gpu[(m.gpu["kind"] == "kernel").to_numpy()]
    ew = m.gpu_match(ELEMENTWISE)[g.index.to_numpy()]
    g = g.assign(ew=ew, step=ctx.step_of(g["ts"].to_numpy()))
    out = []
    for _, s in g.sort_values("ts", kind="stable").groupby(["device", "stream"], sort=False):
        flag, idx, step = s["ew"].to_numpy(), s.index.to_numpy(), s["step"].to_numpy()
        # Run boundaries: where the elementwise flag or the step changes.
        cut = np.flatnonzero((flag[1:] != flag[:-1]) | (step[1:] != step[:-1])) + 1
        for run in np.split(np.arange(len(s)), cut):
            if len(run) >= 2 and flag[run[0]] and step[run[0]] in ctx.full_steps:
                out.append(idx[run])
    return out


def analyze(ctx: Context) -> list[Finding]:
    m = ctx.model
    steps = m.steps[m.steps["step"].isin(ctx.full_steps)]
    busy = float(steps["gpu_busy"].median()) if len(steps) else 0.0
    if not len(m.gpu) or busy < MIN_BUSY_SHARE * ctx.median_step_us:
        return []
    chains = _chains(ctx)
    if not chains:
        return []
    dur = m.gpu["dur"]
    heavy = m.gpu_match(TRANSCENDENTAL)
    scale = bandwidth_to_compute(m.device_name()) or 1.0
    arith = tuple(scale * float(TRANSCENDENTAL_COST * heavy[c].sum() + ARITH_COST * (~heavy[c]).sum())
                  for c in chains)
    repeats = tuple(_repeats(m.gpu["name"].to_numpy()[c]) for c in chains)
    saved, step = [], []
    for c, a in zip(chains, arith):
        d = dur.loc[c].to_numpy()
        saved.append(max(0.0, float(d.sum()) - max(FUSED_COST, a) * float(d.mean())))
        step.append(ctx.step_of(np.array([m.gpu.at[c[0], "ts"]]))[0])
    per_step = np.bincount(np.searchsorted(ctx.full_steps, step), weights=saved, minlength=len(ctx.full_steps))
    lost = float(np.median(per_step)) if len(per_step) else 0.0
    lengths = np.array([len(c) for c in chains])
    names = m.gpu["name"]
    longest = sorted(chains, key=len, reverse=True)[:3]
    ev = {"chains_per_step": round(len(chains) / ctx.n_full, 1),
          "mean_chain_length": round(float(lengths.mean()), 1),
          "elementwise_kernels_in_chains_per_step": round(float(lengths.sum()) / ctx.n_full, 1),
          "saving_ms_per_step_if_fused": round(lost / 1000, 3),
          "pct_of_gpu_busy": round(100 * lost / busy, 1) if busy else None,
          "longest_chains": [" -> ".join(names.loc[c[:4]].str.slice(0, 50)) + (" ..." if len(c) > 4 else "")
                             for c in longest]}
    return [Finding(
        kind=SPEC.kind,
        title=f"Chains of small elementwise kernels ({ev['mean_chain_length']} per chain on average) that a "
              f"compiler could fuse: about {ev['pct_of_gpu_busy']}% of GPU time",
        lost_per_step_us=lost, lost_total_us=float(sum(saved)),
        fix="Fuse the pointwise chains: model = torch.compile(model) (inductor generates fused Triton "
            "kernels), or use fused library ops (F.scaled_dot_product_attention, fused LayerNorm/GELU).",
        confidence="low" if lengths.mean() < 4 else "medium", evidence=ev,
        fixes=(FuseChains(tuple(tuple(int(r) for r in c) for c in chains), FUSED_COST, arith, repeats=repeats,
                          bounds=COST_RANGE),))]


def _repeats(names: np.ndarray) -> int:
    """k when the kernel names are one sequence (of at least 2) repeated k times exactly, else 1."""
    n = len(names)
    for p in range(2, n // 2 + 1):
        if n % p == 0 and all((names[i:i + p] == names[:p]).all() for i in range(p, n, p)):
            return n // p
    return 1
