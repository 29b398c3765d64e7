"""Fit fp32_matmul's per-GEMM TF32 law (analyses/fp32_matmul.py, GEMM_HALF_US) on the matrix's measured fixes.

Each FP32 GEMM op of a before trace (aten::mm / addmm / bmm ..., the kernels it launched) is matched, in order
within a steady step, to the same op in its TF32 after trace (set_float32_matmul_precision("high")); per op the
median over steps of both. The law: a GEMM of d us in FP32 runs d / (1 + (R - 1) * d / (d + h)) us in TF32;
fitted (grid, log error weighted by sqrt(d)) over all programs, then with each program left out, which reads that
program's total GEMM time gain against its measured one. Convolutions are not fitted (their ops' gain did not
follow their length: holdout21_fp32_convnet_notf32).

    python sample_traces/matrix/fit_tf32.py            # ~20 s
"""
from __future__ import annotations

import collections
import re
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from traceinsight.trace.load import load_trace  # noqa: E402
from traceinsight.trace.model import build_model  # noqa: E402
from traceinsight.trace.precision import FP32_GEMM_ONLY  # noqa: E402

MATRIX = Path(__file__).resolve().parent
GEMM_OP = re.compile(r"^aten::(mm|addmm|bmm|baddbmm|_addmm_activation|addbmm)$")
# (workload, its TF32 variant); a program's name without its size suffix groups its sizes.
PAIRS = [("fp32_matmul", "after"), ("holdout8_fp32_encoder", "after"), ("holdout20_fp32_two_tower", "after"),
         ("holdout38_patch_loader_gpu", "after"), ("holdout38_patch_loader_host", "after_tf32")]


def op_times(path: Path) -> list[dict]:
    """Per full step: {GEMM op row: (its kernels' total us, its first kernel's name)} in op order."""
    m = build_model(load_trace(str(path)))
    cpu, gpu = m.cpu, m.gpu
    names, parent, ts = cpu["name"].astype(str).to_numpy(), cpu["parent"].to_numpy(), cpu["ts"].to_numpy()

    def gemm_op(i: int) -> int:
        while i >= 0 and not GEMM_OP.match(names[i]):
            i = parent[i]
        return i
    k = gpu[(gpu["kind"] == "kernel") & (gpu["launcher"] >= 0)]
    k = k.assign(op=[gemm_op(int(parent[i])) for i in k["launcher"].to_numpy()])
    k = k[k["op"] >= 0]
    out = []
    for s in m.steps[~m.steps["partial"]].itertuples():
        t = ts[k["op"].to_numpy()]
        g = k[(t >= s.cpu_start) & (t < s.cpu_end)].groupby("op").agg(dur=("dur", "sum"), name=("name", "first"))
        out.append(g.sort_index())
    return out


def pairs() -> list[tuple]:
    """(gpu, program, fp32 us, tf32 us) per distinct FP32 GEMM op (median over runs and steps)."""
    per = collections.defaultdict(list)
    for run in sorted(MATRIX.glob("h*_clean*")):
        for wl, var in PAIRS:
            for setting in ("default", "stack"):
                b, a = run / f"{wl}__before__{setting}.json.gz", run / f"{wl}__{var}__{setting}.json.gz"
                if not (b.exists() and a.exists()):
                    continue
                sb, sa = op_times(b)[1:], op_times(a)[1:]
                if len({len(x) for x in sb + sa}) != 1:
                    continue                      # ops not matched one to one
                B = np.median([x["dur"].to_numpy() for x in sb], axis=0)
                A = np.median([x["dur"].to_numpy() for x in sa], axis=0)
                fp32 = sb[0]["name"].str.contains(FP32_GEMM_ONLY).to_numpy()
                for i in np.flatnonzero(fp32):
                    per[(run.name[:4], re.sub(r"_(host|gpu)$", "", wl), wl, i)].append((B[i], A[i]))
    return [(k[0], k[1], float(np.median([x[0] for x in v])), float(np.median([x[1] for x in v])))
            for k, v in per.items()]


def gain(p, d):
    return 1 + (p[0] - 1) * d / (d + p[1])


def fit(pts):
    d = np.array([x[2] for x in pts]); a = np.array([x[3] for x in pts])
    grid = [(R, h) for R in np.arange(5, 12.01, 0.25) for h in np.arange(5, 400, 5)]
    return min(grid, key=lambda p: float(np.sum((np.log(d / gain(p, d)) - np.log(a)) ** 2 * np.sqrt(d))))


def main() -> None:
    pts = pairs()
    p = fit(pts)
    print(f"{len(pts)} distinct FP32 GEMM ops; fit R={p[0]:.2f} h={p[1]:.0f} us")
    for d in (15, 50, 100, 200, 400, 800, 1600, 3000):
        print(f"  {d:5d} us: {gain(p, d):.2f}x")
    print("| program | GPU | GEMM time measured gain | left-out fit | one constant (4.4x) |\n|---|---|---|---|---|")
    for prog in sorted({x[1] for x in pts}):
        q = fit([x for x in pts if x[1] != prog])
        for g in ("h100", "h200"):
            t = [x for x in pts if x[1] == prog and x[0] == g]
            if t:
                b, a = sum(x[2] for x in t), sum(x[3] for x in t)
                print(f"| {prog} | {g} | {b / a:.2f}x | {b / sum(x[2] / gain(q, x[2]) for x in t):.2f}x "
                      f"(R={q[0]:.2f}, h={q[1]:.0f}) | 4.44x |")


if __name__ == "__main__":
    main()
