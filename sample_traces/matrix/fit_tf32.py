"""What TF32 made of FP32 GEMM time on the matrix's measured fixes: fp32_matmul's central guess (TF32_SHARE).

Each FP32 GEMM op of a before trace (aten::mm / addmm / bmm ..., the kernels it launched) is matched, in order
within a steady step, to the same op in its TF32 after trace (set_float32_matmul_precision("high")); per op the
median over steps of both. Per program and GPU: the gain over its GEMM time, against (a) one constant, the
median of the other programs' gains (each program left out), and (b) a law by each GEMM's length (a GEMM of d us
in FP32 runs d / (1 + (R - 1) * d / (d + h)) us in TF32; fitted, grid, log error weighted by sqrt(d), on the
other programs). The law was registered with the thirty-ninth held-out set and failed there (its inference
MLP's ~95 us GEMMs read 4.0x, measured 5.9x); the constant is what fp32_matmul uses. Convolutions are not
fitted (their ops gained 4.1-4.3x: holdout21_fp32_convnet_notf32).

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
         ("holdout38_patch_loader_gpu", "after"), ("holdout38_patch_loader_host", "after_tf32"),
         ("holdout39_fp32_mlp_infer", "after"), ("holdout39_fp32_moe_bmm_train", "after")]


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


def pairs(settings: tuple = ("default", "stack")) -> list[tuple]:
    """(gpu, program, fp32 us, tf32 us) per distinct FP32 GEMM op (median over runs and steps)."""
    per = collections.defaultdict(list)
    for run in sorted(MATRIX.glob("h*_clean*")):
        for wl, var in PAIRS:
            for setting in settings:
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
    keys = sorted({(x[1], x[0]) for x in pts})

    def gain_of(k):
        t = [x for x in pts if (x[1], x[0]) == k]
        return sum(x[2] for x in t) / sum(x[3] for x in t)
    print(f"{len(pts)} distinct FP32 GEMM ops, {len(keys)} programs x GPU; median gain "
          f"{np.median([gain_of(k) for k in keys]):.2f}x")
    print("| program | GPU | GEMM time measured gain | one constant, program left out | length law, program left out |"
          "\n|---|---|---|---|---|")
    for k in keys:
        c = float(np.median([gain_of(o) for o in keys if o[0] != k[0]]))
        q = fit([x for x in pts if x[1] != k[0]])
        t = [x for x in pts if (x[1], x[0]) == k]
        law = sum(x[2] for x in t) / sum(x[2] / gain(q, x[2]) for x in t)
        m = gain_of(k)
        print(f"| {k[0]} | {k[1]} | {m:.2f}x | {c:.2f}x ({100 * (c / m - 1):+.0f}%) | {law:.2f}x "
              f"({100 * (law / m - 1):+.0f}%; R={q[0]:.2f}, h={q[1]:.0f} us) |")


if __name__ == "__main__":
    main()
