"""fusion_candidates: GPU time spent in chains of small elementwise / reduction kernels.

Each unfused pointwise op reads and writes its tensors through memory; a fused kernel does a chain of
them in one pass. A chain is a run of consecutive elementwise kernels on one stream (a GEMM or a
convolution ends it: a compiler fuses pointwise ops with each other, not into library kernels).

A fused chain costs the longer of two things, in the chain's mean kernels:
- one pass over memory, FUSED_COST (inputs read and outputs written once);
- the chain's arithmetic, which each unfused kernel hid under its own memory traffic and the fused one
  must still do: OP_COSTS per op, by how many instructions an element takes (sin and cos with their range
  reduction > tanh, erf, GELU > sigmoid, SiLU > exp, log, rsqrt > an add or a multiply). The costs are an
  H100's, for fp32; faster memory for the same cores (H200) makes the unfused kernels shorter, not the
  arithmetic, so they scale with the GPU's bandwidth per FLOP (trace/gpu_specs.py; an unknown GPU counts
  as an H100), and a 16-bit chain moves half the bytes per element for the same arithmetic (x2).
  Fitted on twelve fused Triton kernels (six chains of 30-58 ops, fp32, bf16 and fp16, H100 and H200):
  within 11% of each, where one pass would have been 1.0-1.5 mean kernels and they took 1.5-5.0; the
  first two chains (3.3-5.0) had shown that the arithmetic is not free (sample_traces/matrix README).
Some eager kernels run slower than memory allows, held back by their index arithmetic (bytes moved per us, medians
over the committed traces' shapes): the generic, non-vectorized elementwise kernel on 16-bit data (a broadcast
operand) 1.5-1.6 TB/s on both GPUs, the generic cat 1.0 TB/s, the generic fp32 one 3.0 TB/s, where vectorized
kernels reach 2.9 TB/s on an H100 and 4.1 on an H200. Whether a fused kernel reads such operands at memory speed
is not in the trace: at the range's best end each of them counts at a vectorized kernel's time (SLOW), at the
point and the worst end at its own. (Counted so at the point, it halved the error on the thirty-sixth held-out
set's frozen BatchNorm, -68% to -34%, but lifted the healthy bf16 transformer's chains over the 15% line.)
The range goes from one mean kernel (all arithmetic hidden) to 3 mean kernels or 1.5x the arithmetic; a
chain that is k exact repeats of one kernel sequence (a function called on k tensors, or a loop over one:
the trace cannot tell) pays k passes at that end. Measured on held-out chains (H100): a hand-written
LayerNorm called 3 times and a GELU on 4 activations took 3.4 mean kernels fused (a pass per call), 8-12
times what one pass would.
Attention written out by hand is one such chain with GEMMs at its ends, which a library kernel replaces
whole (analyses/attention.py): where a step has it, that is the finding's fix and estimate.
Only reported when the GPU is the bottleneck (busy most of the step, or of the un-profiled step): when the
CPU is, launch_overhead already says so.
"""
from __future__ import annotations

import math
import re
from collections import Counter

import numpy as np

from ..trace.facts import COMPILE_REGION, host_copies, in_compiled_region, program_facts, program_kind
from ..trace.gpu_specs import bandwidth_to_compute, bandwidth_to_h100
from ..trace.kernel_names import normalize_kernel
from ..trace.profiler_cost import unprofiled_step_us
from . import attention
from .base import KERNELS_GO, Context, Finding, KindSpec, user_frame_row
from .compiler_fixes import FuseChains
from .unfused_optimizer import update_loop_rows

# On a busy GPU a compiler's gain of a few percent is an opportunity, not a problem: ranked as a fix
# (and the step no longer called healthy) only from 15% of the step.
SPEC = KindSpec("fusion_candidates", "slowed by unfused elementwise kernels", min_share=0.15,
                cost_basis="the chains' measured kernel time less what fused kernels are modelled to take",
                beyond_cost=KERNELS_GO)

ELEMENTWISE = r"elementwise_kernel|vectorized_elementwise|unrolled_elementwise|reduce_kernel|" \
              r"CatArrayBatchedCopy|index_elementwise"
# BatchNorm's normalising pass is pointwise once its statistics are known (the running ones in eval): Inductor fuses it
# with the ReLU and the residual add after it (set 43's ResNet-18 served 110 -> 41 kernels a step compiled). Counted in
# the compile estimate of a launch-bound step only: in fusion_candidates' chains it put 52 of the matrix's 98 healthy
# GPU-bound convnet traces over the bar, a saving no one has measured there.
POINTWISE_NORM = r"|batch_norm_transform_input|bn_fw_inf"
# Inductor also fuses a GroupNorm's or LayerNorm's statistics and normalising kernels with the pointwise ops around
# them, and its layout optimisation keeps a conv net in channels_last, so cuDNN's NCHW<->NHWC transposes around each
# convolution go (the forty-fifth set's UNet, eager -> compiled: 5,160 -> 2,626 kernels a sampling run, its GPU work
# 12.3 -> 6.2 ms, H200). Counted in the reduce-overhead estimate only: the default mode's was fitted with the chains
# without them (its CPU-per-launch ratio absorbs them; counting them there cost 7 of its 118 rows within 25%).
COMPILED_NORM = r"|RowwiseMoments|ComputeFusedParams|layer_norm_kernel|nchwToNhwcKernel|nhwcToNchwKernel"
MIN_BUSY_SHARE = 0.6      # of the step: the GPU must be the bottleneck
FUSED_COST = 1.5          # a fused chain's memory pass, in its mean kernels
# Arithmetic per op in the fused kernel, in mean kernels (H100, fp32): the first pattern that finds the
# kernel's name; any other elementwise op costs ARITH_COST.
OP_COSTS = (
    (r"(?:sin|cos|tan|atan|asin|acos|sinh|cosh|lgamma|digamma|erfinv)_(?:\w*_)?kernel", 0.25),
    (r"(?:tanh|erfc?|gelu|mish|softplus)_(?:\w*_)?kernel|Gelu\w*Kernel", 0.17),
    (r"(?:sigmoid|silu|pow)_(?:\w*_)?kernel|pow_tensor", 0.08),
    (r"(?:exp|expm1|exp2|log|log1p|log2|log10|rsqrt|sqrt|reciprocal)_(?:\w*_)?kernel", 0.06),
)
ARITH_COST = 0.024         # per other op (an add, a multiply, a clamp per element)
HALF = r"BFloat16|Half|bfloat16|half|bf16|fp16"   # a 16-bit chain: x2 (half the bytes, same arithmetic)
# Eager kernels that run below memory speed: (pattern, time at a vectorized kernel's speed / its time, on an
# H100; inf: no ceiling, as it is on any GPU). Generic (non-vectorized) elementwise kernels match "::elementwise_kernel<": 16-bit the
# second pattern, fp32 the fourth (slow only where the GPU has more bandwidth than an H100). A generic copy is
# generic for a strided operand (a transpose made contiguous), whose access pattern a fused kernel keeps.
SLOW = ((r"direct_copy_kernel", math.inf), (rf"::elementwise_kernel<.*(?:{HALF})", 0.53), (r"CatArrayBatchedCopy<", 0.34),
        (r"::elementwise_kernel<", 1.0))
PASS_COST = 1.0           # each pass of a chain that several calls make (measured 0.9-1.1 mean kernels;
                          # the range: 0.75-1.5)
# (memory pass, arithmetic scale, a pass per repeat, cost per pass, a library kernel's scale, slow kernels at a
# vectorized kernel's time) at the best and the worst end.
COST_RANGE = ((1.0, 0.0, False, 0.75, attention.RANGE[0], True), (3.0, 1.5, True, 1.5, attention.RANGE[1], False))


def _chains(ctx: Context, pointwise: str = ELEMENTWISE) -> list[np.ndarray]:
    """Runs of >= 2 consecutive elementwise kernels per stream, as GPU row ids, in full steps. A copy
    to or from the host between two kernels ends a run, and so does a wait on the CPU (a sync, host work, a pageable
    copy): a compiler cannot fuse across a device-to-host read, and the step's graph breaks there. So does a
    change of the launching thread (forward on the main thread, backward on autograd's)."""
    m = ctx.model
    # A copy to or from the host is a barrier; a memset or a device-to-device copy is one more pointwise
    # op to a compiler (a fill, a copy_), so it does not end a run, nor does it join one.
    kind = m.gpu["kind"].to_numpy()
    host_copy = host_copies(m)
    g = m.gpu[(kind == "kernel") | host_copy]
    ew = m.gpu_match(pointwise)[g.index.to_numpy()] & (g["kind"] == "kernel").to_numpy()
    lr = g["launcher"].to_numpy()
    # Where the trace links kernels to launches, a kernel with no launch in it was queued before the
    # profiler's window: it ran in the first step's window but belongs to the step before, so its chain
    # is its own (a fix fuses it too, separately).
    linked = bool((lr >= 0).any())
    if linked:
        # The launching thread, and the step whose CPU launched each kernel: one compiled call cannot
        # fuse work of two steps' calls, even where the GPU ran them back to back.
        lsafe = np.maximum(lr, 0)
        thread = np.where(lr >= 0, m.cpu["thread"].to_numpy()[lsafe], "")
        cstep = np.where(lr >= 0, ctx.cpu_step_of(m.cpu["ts"].to_numpy()[lsafe]), -1)
    else:
        thread, cstep = np.full(len(g), "", dtype=object), np.full(len(g), -1)
    g = g.assign(ew=ew, step=ctx.step_of(g["ts"].to_numpy()), thread=thread, cstep=cstep)
    gaps = ctx.gaps
    waited = gaps[(gaps[list(CPU_WAITS)].sum(axis=1) > 0).to_numpy()]["next_gpu"].to_numpy()
    out = []
    for _, s in g.sort_values("ts", kind="stable").groupby(["device", "stream"], sort=False):
        flag, idx, step, th = s["ew"].to_numpy(), s.index.to_numpy(), s["step"].to_numpy(), s["thread"].to_numpy()
        cs = s["cstep"].to_numpy()
        # Run boundaries: where the elementwise flag or the step changes, the CPU waited before it, or the
        # launching thread changes (the forward's last op and the backward's first are not one graph).
        cut = np.flatnonzero((flag[1:] != flag[:-1]) | (step[1:] != step[:-1]) | np.isin(idx[1:], waited)
                             | ((th[1:] != th[:-1]) & (th[1:] != "") & (th[:-1] != ""))
                             | ((cs[1:] != cs[:-1]) & linked)) + 1
        for run in np.split(np.arange(len(s)), cut):
            if len(run) >= 2 and flag[run[0]] and step[run[0]] in ctx.full_steps:
                out.append(idx[run])
    return out


# Idle causes where the CPU, not the launch queue, held the next kernel back.
CPU_WAITS = ("sync_stall", "host_bound", "pageable_memcpy")


def analyze(ctx: Context) -> list[Finding]:
    m = ctx.model
    steps = m.steps[m.steps["step"].isin(ctx.full_steps)]
    busy = float(steps["gpu_busy"].median()) if len(steps) else 0.0
    if not len(m.gpu):
        return []
    profiled_bound = busy >= MIN_BUSY_SHARE * ctx.median_step_us
    if not profiled_bound:
        # For written-out attention, GPU-bound without the profiler is enough: its CPU cost can hide that (a
        # training step profiled at 34 ms ran in 19 ms, 18.5 of them GPU work; holdout25_attention_train).
        # Not for the other chains: so gated, they headlined sync-bound steps (item_logging_large,
        # sync_mask_loss) and read +26..+56% high against their compiled steps (20 more top misses).
        unprofiled = unprofiled_step_us(m, ctx.full_steps)
        if unprofiled is None or busy < MIN_BUSY_SHARE * unprofiled:
            return []
    # Written-out attention is a chain a library kernel replaces: its elementwise runs are not fused apart,
    # and where there is one, the fix is that call (the other chains are torch.compile's, a later step).
    cores = attention.cores(ctx, ELEMENTWISE)
    module, averages = attention.module_weights(ctx, cores) if cores else (None, {})
    cores = attention.with_averages(cores, averages, m.gpu["dur"].to_numpy())
    # (A per-tensor update loop's chains are unfused_optimizer's: the compiled model does not run them, and two
    # findings must not claim one stretch; holdout28_ema_gpu_bound read +18..+21% with them in.)
    taken = {r for c in cores for r in c.rows} | update_loop_rows(ctx)
    chains = [c for c in _chains(ctx) if not taken.intersection(c.tolist())] if profiled_bound or cores else []
    if not chains and not cores:
        return []
    rest, chains = (chains, []) if cores else ([], chains)
    dur = m.gpu["dur"]
    fx, found, calls = _fuse_fix(m, chains, cores)
    saved, step = [], []
    for k, c in enumerate(fx.chains):
        d = dur.loc[list(c)].to_numpy()
        saved.append(max(0.0, float(d.sum()) - fx.fused_us(k, float(d.sum()), float(d.mean()))))
        step.append(ctx.step_of(np.array([m.gpu.at[c[0], "ts"]]))[0])
    per_step = np.bincount(np.searchsorted(ctx.full_steps, step), weights=saved, minlength=len(ctx.full_steps))
    lost = float(np.median(per_step)) if len(per_step) else 0.0
    lengths = np.array([len(c) for c in chains] or [0])
    names = m.gpu["name"]
    longest = sorted(chains, key=len, reverse=True)[:3]
    ev = {"chains_per_step": round(len(chains) / ctx.n_full, 1),
          "mean_chain_length": round(float(lengths.mean()), 1),
          "elementwise_kernels_in_chains_per_step": round(float(lengths.sum()) / ctx.n_full, 1),
          # Kernel time the fused chains would not spend, before the replay (the headline saving is the
          # replayed one, which also counts the launches and gaps that go with them).
          "kernel_time_saved_ms_per_step": round(lost / 1000, 3),
          "pct_of_gpu_busy": round(100 * lost / busy, 1) if busy else None,
          "longest_chains": [" -> ".join(_short(n) for n in names.loc[c[:4]]) + (" ..." if len(c) > 4 else "")
                             for c in longest]}
    # Which reading of a repeated chain the estimate takes, and what would settle it.
    rep = [(len(c), k, c_) for c, k, c_ in zip(chains, found, calls) if k > 1]
    if rep:
        n, k, how = Counter(rep).most_common(1)[0][0]    # the typical one, not an outlier
        ev["repeated_chains"] = (
            f"{len(rep)} chain(s) repeat one kernel sequence, e.g. {n // k} kernels x {k}: "
            + ("Python stacks show one call (a loop over one tensor), so one memory pass when fused" if how == 0
               else f"Python stacks show {k} calls (on {k} tensors), so {k} memory passes when fused"
               if how == k else
               f"the estimate takes one memory pass (a loop over one tensor), the range's worst end {k} "
               f"({k} calls on {k} tensors); record with_stack=True to tell them apart"))
    title = (f"Chains of small elementwise kernels ({ev['mean_chain_length']} per chain on average) that a "
             f"compiler could fuse: fusing them would cut the GPU's busy time by about {ev['pct_of_gpu_busy']}%")
    fix = "Fuse the pointwise chains: model = torch.compile(model) (inductor generates fused Triton kernels)" + \
        _library_ops(ctx.model.gpu)
    outside = _outside_compiled(ctx, chains)
    if outside:
        # A model already compiled: its regions' pointwise work is fused; these chains are the eager code around it
        # (a diffusion sampler's update around a compiled UNet had been told to torch.compile(model)).
        fix = (f"Fuse the pointwise chains outside the compiled code: the program already runs {outside} and these "
               "chains' kernels are launched outside them, by eager code. Compile that code too (torch.compile the "
               "function that runs it, e.g. the loop body around the compiled model), or remove the graph breaks that "
               "leave it eager (TORCH_LOGS=graph_breaks lists them)" + _library_ops(ctx.model.gpu))
    if program_kind(program_facts(ctx.model)) == "graphed":
        # A step already captured in a CUDA graph keeps its capture: the compiled model is captured instead.
        fix += (" The step already replays as a CUDA graph: compile the model and warm it up before the capture "
                "(compilation cannot run inside one), then capture the compiled step as before; or let "
                "torch.compile(model, mode=\"reduce-overhead\") make the graphs.")
    if cores:
        _attention_evidence(ev, cores, names, ctx)
        ev["chains_left_per_step"] = round(len(rest) / ctx.n_full, 1)
        title = (f"Attention written out by hand (q @ k^T, softmax, @ v; {ev['attention_cores_per_step']:g} a step, "
                 f"{ev['attention_kernel_ms_per_step']} ms of GPU work): one fused kernel instead would cut the "
                 f"GPU's busy time by about {ev['pct_of_gpu_busy']}%")
        if module:
            ev["multihead_attention_weights"] = {
                "native": "the cores run inside torch._native_multi_head_attention, nn.MultiheadAttention's "
                          "inference fast path, which writes the attention out only to return the weights",
                "stack": "Python frames show F.multi_head_attention_forward above the cores",
                "mean": "each forward core is followed by a mean over its output (the weights averaged over heads), "
                        "as nn.MultiheadAttention returns them; record with_stack=True to confirm"}[module]
            what = ("nn.MultiheadAttention writes its attention out" if module != "mean" else
                    "Attention written out as nn.MultiheadAttention does it")
            title = (f"{what} to return the attention weights (need_weights=True, its default; "
                     f"{_cores_said(ev)}, {ev['attention_kernel_ms_per_step']} ms of GPU work): without the weights "
                     f"it runs one fused kernel, cutting the GPU's busy time by about {ev['pct_of_gpu_busy']}%")
        call = ("F.scaled_dot_product_attention(q, k, v, is_causal=True) for a causal mask (attn_mask=mask for "
                "another)" if any(c.masked for c in cores) else
                "F.scaled_dot_product_attention(q, k, v) (attn_mask=mask where the scores get a mask added)")
        fix = (f"Replace the written-out attention with {call}: one fused kernel that keeps the scores on chip and "
               "reads q, k, v as strided views. (If it is nn.MultiheadAttention returning its weights, pass "
               "need_weights=False instead.)" if not module else
               "Pass need_weights=False to the nn.MultiheadAttention call where its weights are dropped "
               "(out, _ = attn(q, k, v, need_weights=False)): the module then calls F.scaled_dot_product_attention, "
               "one fused kernel that keeps the scores on chip, and computes no weights. Where the weights are read "
               "(attention maps), ask for them only on the pass that reads them."
               + (f" Then torch.compile(model) can fuse the {len(rest) / ctx.n_full:g} chains of elementwise "
                  "kernels a step left beside it (not in this estimate)." if rest else ""))
    return [Finding(kind=SPEC.kind, title=title, lost_per_step_us=lost, lost_total_us=float(sum(saved)), fix=fix,
                    confidence="medium" if cores or lengths.mean() >= 4 else "low", evidence=ev, fixes=(fx,))]


def _cores_said(ev: dict) -> str:
    """'6 forward cores a step' / '8 layers' cores a step, forward and backward'."""
    n, back = ev["attention_cores_per_step"], ev["attention_backward_cores_per_step"]
    return (f"{n - back:g} layers a step, forward and backward" if back and back == n - back else
            f"{n:g} cores a step" + (f", {back:g} of them backward" if back else ""))


def _outside_compiled(ctx: Context, chains: list) -> str | None:
    """"N torch.compile regions a step" where the full steps run compiled regions and most of the chains' kernels
    were launched outside them; else None."""
    m = ctx.model
    cpu = m.cpu
    regions = ((cpu["kind"] == "op") | (cpu["kind"] == "annotation")).to_numpy() & m.cpu_match(COMPILE_REGION)
    if not chains or not regions.any():
        return None
    per_step = np.isin(ctx.step_of(cpu["ts"].to_numpy()[regions]), ctx.full_steps).sum() / ctx.n_full
    launcher = m.gpu["launcher"].to_numpy()[m.gpu.index.get_indexer([r for c in chains for r in c])]
    inside = (launcher >= 0) & in_compiled_region(m)[np.maximum(launcher, 0)]
    if per_step < 1 or inside.mean() > 0.5:
        return None
    return f"{per_step:g} torch.compile region{'s' if per_step != 1 else ''} a step"


# Fused library kernels a step may already run: advising them again would be advice the program already follows.
LIBRARY = (("F.scaled_dot_product_attention", re.compile(r"(?i)sdpa|flash|fmha|attention")),
           ("nn.LayerNorm's fused kernel", re.compile(r"(?i)layer_?norm")))


def _library_ops(gpu) -> str:
    """The fix's second way: the fused library ops the step does not run yet, named."""
    kernels = gpu["name"][(gpu["kind"] == "kernel").to_numpy()].astype(str).unique()
    left = [op for op, pat in LIBRARY if not any(pat.search(k) for k in kernels)]
    return (f", or use fused library ops where the model writes them out ({', '.join(left)})." if left else
            "; the step already runs fused attention and LayerNorm kernels.")


def compiler_fix(ctx: Context, norms: bool = False) -> FuseChains | None:
    """torch.compile's fusion of the whole step's chains, whether or not the GPU is the bottleneck (the
    compile estimates of a launch-bound eager step: analyses/launch_overhead.py); None where there are none. `norms`:
    GroupNorm's and LayerNorm's kernels and conv layout transposes join the chains (COMPILED_NORM)."""
    taken = update_loop_rows(ctx)
    chains = [c for c in _chains(ctx, ELEMENTWISE + POINTWISE_NORM + (COMPILED_NORM if norms else ""))
              if not taken.intersection(c.tolist())]
    return _fuse_fix(ctx.model, chains, [])[0] if chains else None


def _fuse_fix(m, chains: list[np.ndarray], cores: list) -> tuple[FuseChains, list[int], list[int]]:
    """(the fix that fuses the chains and replaces the attention cores, each chain's repeats, its calls)."""
    arith = _arithmetic(m, chains)
    repeats = [_repeats(m.gpu["name"].to_numpy()[c]) for c in chains]
    calls = [_calls(m, c, k) if k > 1 else 1 for c, k in zip(chains, repeats)]
    # Stacks that show one call (a loop) settle it: no pass per repeat at either end; stacks that show k
    # calls settle it the other way. Where they cannot tell, the point pays one pass and the range's
    # worst end a pass per repeat. (A pass per repeat at the point fitted the calls we had measured, but
    # the held-out ninth set went the other way, 2/8 within 25% against 4/8: no net gain on 304 rows.)
    passes = tuple(k if c == k else 1 for k, c in zip(repeats, calls))
    fold = tuple(1 if c == 0 else k for k, c in zip(repeats, calls))
    fx = FuseChains(tuple(tuple(int(r) for r in c) for c in chains) + tuple(c.rows for c in cores), FUSED_COST,
                    arith + (0.0,) * len(cores), unit=_units(m, chains) + (1.0,) * len(cores),
                    repeats=fold + (1,) * len(cores),
                    passes=passes + (1,) * len(cores), pass_cost=PASS_COST,
                    library=(0.0,) * len(chains) + tuple(c.fused_us for c in cores), bounds=COST_RANGE)
    return fx, repeats, calls


def _attention_evidence(ev: dict, cores: list, names, ctx: Context) -> None:
    """What the report shows of the written-out attention (medians per full step): how many cores, their
    kernel time, the fused kernels' modelled time, and one core's kernels."""
    step = np.searchsorted(ctx.full_steps, ctx.step_of(ctx.model.gpu.loc[[c.rows[0] for c in cores], "ts"].to_numpy()))

    def per_step(w) -> float:
        return float(np.median(np.bincount(step, weights=w, minlength=len(ctx.full_steps))))
    ev["attention_cores_per_step"] = per_step([1.0] * len(cores))
    ev["attention_backward_cores_per_step"] = per_step([float(c.backward) for c in cores])
    ev["attention_kernel_ms_per_step"] = round(per_step([c.total_us for c in cores]) / 1000, 3)
    ev["attention_fused_ms_per_step"] = round(per_step([c.fused_us for c in cores]) / 1000, 3)
    ev["attention_core"] = " -> ".join(_short(n) for n in names.loc[list(cores[0].rows)])[:600]


def _arithmetic(m, chains: list[np.ndarray]) -> tuple[float, ...]:
    """Each chain's arithmetic in its fused kernel, in the chain's mean kernels (OP_COSTS)."""
    cost = _first_match(m, OP_COSTS, ARITH_COST)
    cost = np.where(m.gpu_match(HALF), 2.0 * cost, cost) * (bandwidth_to_compute(m.device_name()) or 1.0)
    return tuple(float(cost[c].sum()) for c in chains)


def _units(m, chains: list[np.ndarray]) -> tuple[float, ...]:
    """Each chain's mean kernel were its slow kernels as fast as vectorized ones, as a share of its measured mean
    (SLOW: an H100's share, less on a GPU with more bandwidth for the same ceilings)."""
    speed = np.minimum(1.0, _first_match(m, SLOW, math.inf) / (bandwidth_to_h100(m.device_name()) or 1.0))
    dur = m.gpu["dur"].to_numpy()
    return tuple(float((dur[c] * speed[c]).sum() / dur[c].sum()) if dur[c].sum() > 0 else 1.0 for c in chains)


def _first_match(m, table: tuple, default: float) -> np.ndarray:
    """Per GPU row: the value of the first (pattern, value) in the table whose pattern finds its name, else default."""
    out = np.full(len(m.gpu), default, dtype=float)
    seen = np.zeros(len(m.gpu), dtype=bool)
    for pattern, value in table:
        hit = m.gpu_match(pattern) & ~seen
        out[hit] = value
        seen |= hit
    return out


def _calls(m, chain: np.ndarray, k: int) -> int:
    """Of a chain that is k repeats of one sequence: k when Python stacks show each repeat launched from
    its own call of one user function (a pass each), 0 when they show one call throughout (a loop over
    one tensor: one pass), 1 when the trace has no stacks to tell (or they show neither)."""
    cpu = m.cpu
    if not (cpu["kind"] == "python").any():
        return 1
    launchers = m.gpu["launcher"].to_numpy()[chain]
    frames = [user_frame_row(cpu, int(r)) if r >= 0 else None for r in launchers]
    if any(f is None for f in frames):
        return 1
    seg = len(chain) // k
    calls = [set(frames[i * seg:(i + 1) * seg]) for i in range(k)]
    if all(len(c) == 1 for c in calls):
        rows = [next(iter(c)) for c in calls]
        if len(set(rows)) == 1:
            return 0
        names = cpu["name"].to_numpy()
        if len(set(rows)) == k and len({names[r] for r in rows}) == 1:
            return k
    return 1


def _repeats(names: np.ndarray) -> int:
    """k when the kernel names are one sequence (of at least 2) repeated k times exactly, else 1. A run
    of one kernel (x + a + b + c) is one expression, not repeats."""
    n = len(names)
    if n and (names == names[0]).all():
        return 1
    for p in range(2, n // 2 + 1):
        if n % p == 0 and all((names[i:i + p] == names[:p]).all() for i in range(p, n, p)):
            return n // p
    return 1


def _short(name: str) -> str:
    """A kernel's name without its namespace and argument noise, so the op shows: vectorized_elementwise_
    kernel<rsqrt_kernel_cuda>, not 50 characters of template boilerplate."""
    return normalize_kernel(name).replace("at::native::", "")[:90]
