"""Typed fixes of what a compiler does (analyses/fixes.py has the rest, and the union of all): chains of pointwise
kernels fused into one kernel each, and an eager model's dispatch replaced by torch.compile's generated code. The
replay applies them in estimate/replay_compiler.py."""
from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class FuseChains:
    """Each chain of consecutive elementwise kernels (GPU rows, in stream order) becomes one kernel. It
    makes one pass over memory, `cost` times the chain's mean kernel, and still does every op's
    arithmetic, which the unfused kernels hid under their memory traffic: `arith` per chain (in mean
    kernels) times `arith_scale`. The fused kernel takes the longer of the two.
    A chain that is one kernel sequence repeated is either k calls of one function on k tensors, which
    need a pass each even fused (`pass_cost` each), or a loop over one tensor, which needs one. `passes`
    per chain: the passes the trace shows (k where Python stacks show k calls, else 1); `repeats`: the
    most it may need (1 where the stacks show a loop). With `split` the repeats are paid instead.
    A chain a library kernel replaces (written-out attention -> F.scaled_dot_product_attention) costs
    that kernel instead: `library` per chain, in us (0: not such a chain), times `library_scale`.
    `bounds`, two (cost, arith_scale, split, pass_cost, library_scale, slow_fixed) ends, makes the estimate a
    range. `unit` per chain (default 1): the chain's mean kernel were its slow kernels as fast as vectorized ones,
    as a share of its measured mean; paid instead of the measured mean where `slow_fixed` (the range's best end:
    whether fusing takes their slowness away is not in the trace, see fusion_candidates)."""
    chains: tuple[tuple[int, ...], ...]
    cost: float = 1.5
    arith: tuple[float, ...] = ()
    arith_scale: float = 1.0
    repeats: tuple[int, ...] = ()
    passes: tuple[int, ...] = ()
    pass_cost: float = 1.0
    split: bool = False
    library: tuple[float, ...] = ()
    library_scale: float = 1.0
    unit: tuple[float, ...] = ()
    slow_fixed: bool = False
    bounds: tuple[tuple, tuple] | None = None

    @property
    def RANGE_NOTE(self) -> str:
        if any(r > p for r, p in zip(self.repeats, self.passes)):
            return ("how fast the fused kernel runs, and whether a repeated sequence of kernels is one loop or "
                    "several calls, are not in the trace, hence the range")
        return "how fast the fused kernel runs is not in the trace, hence the range"

    def __post_init__(self):
        if not self.chains or any(len(c) < 2 for c in self.chains):
            raise ValueError("FuseChains needs chains of at least two kernels")
        n = len(self.chains)
        if any(v and len(v) != n for v in (self.arith, self.repeats, self.passes, self.library, self.unit)):
            raise ValueError("FuseChains needs one arithmetic cost, repeat and pass count per chain")
        for f in (self.cost, self.pass_cost, self.library_scale,
                  *(b[i] for b in self.bounds or () for i in (0, 3, 4))):
            if not f > 0:
                raise ValueError(f"FuseChains cost must be > 0, got {f}")
        if any(a < 0 for a in (*self.arith, *self.library, self.arith_scale, *(b[1] for b in self.bounds or ()))):
            raise ValueError("FuseChains arithmetic and library costs must be >= 0")
        if any(r < 1 for r in (*self.repeats, *self.passes)):
            raise ValueError("FuseChains repeat and pass counts must be >= 1")
        if any(not 0 < u <= 1 for u in self.unit):
            raise ValueError("FuseChains units must be in (0, 1]")
        object.__setattr__(self, "chains", tuple(tuple(int(r) for r in c) for c in self.chains))
        object.__setattr__(self, "arith", tuple(float(a) for a in self.arith) or (0.0,) * n)
        object.__setattr__(self, "passes", tuple(int(r) for r in self.passes) or (1,) * n)
        object.__setattr__(self, "library", tuple(float(a) for a in self.library) or (0.0,) * n)
        object.__setattr__(self, "unit", tuple(float(u) for u in self.unit) or (1.0,) * n)
        object.__setattr__(self, "repeats", tuple(max(int(r), p) for r, p in
                                                  zip(self.repeats or (1,) * n, self.passes)))

    def at(self, end: tuple) -> "FuseChains":
        """The same fix at one end of its range."""
        return replace(self, cost=end[0], arith_scale=end[1], split=bool(end[2]), pass_cost=end[3],
                       library_scale=end[4], slow_fixed=bool(end[5]) if len(end) > 5 else False, bounds=None)

    def fused_us(self, k: int, total_us: float, mean_us: float) -> float:
        """Chain k's fused kernel(s) in us, given its kernels' total and mean time: never more than the total."""
        unit = self.unit[k] if self.slow_fixed else 1.0
        fused = self.library[k] * self.library_scale if self.library[k] else self.fused_cost(k) * mean_us * unit
        return min(total_us, fused)

    def fused_cost(self, k: int) -> float:
        """Chain k's fused kernel(s), in its mean kernels."""
        n = self.repeats[k] if self.split else self.passes[k]
        memory = max(self.cost, n * self.pass_cost) if n > 1 else self.cost
        return max(memory, self.arith_scale * self.arith[k])


@dataclass(frozen=True)
class CompiledDispatch:
    """torch.compile (default mode) of an eager model: its generated code launches each kernel left (after
    FuseChains, applied after this) from Python of its own, each for `ratio` times what the eager step's CPU
    spent per kernel launched outside the `eager` regions (its dispatch, the model's Python and the launch calls,
    over its launches), in place of that kernel's own; each step also pays `wrapper_us`. Calls in the `eager`
    regions (t0, t1, thread: the optimizer's step, which torch.compile(model) leaves eager) keep their cost, and so
    does host work that launches nothing. `bounds` (ratio, wrapper_us at the best and the worst end) makes the
    estimate a range."""
    eager: tuple[tuple[float, float, str], ...] = ()
    ratio: float = 1.0
    wrapper_us: float = 0.0
    bounds: tuple[tuple[float, float], tuple[float, float]] | None = None
    RANGE_NOTE = ("how much CPU the compiled code spends per kernel it launches is not in the eager trace, hence "
                  "the range")

    def __post_init__(self):
        for v in (self.ratio, self.wrapper_us, *(x for b in self.bounds or () for x in b)):
            if not v >= 0:
                raise ValueError(f"CompiledDispatch: costs must be >= 0, got {v}")
        object.__setattr__(self, "eager", tuple((float(a), float(b), str(t)) for a, b, t in self.eager))

    def at(self, end: tuple[float, float]) -> "CompiledDispatch":
        """The same fix at one end of its range."""
        return replace(self, ratio=end[0], wrapper_us=end[1], bounds=None)
