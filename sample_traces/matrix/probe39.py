"""Un-profiled timing of the thirty-ninth set's programs at candidate sizes (no trace is recorded)."""
import sys, time, statistics, torch
sys.path.insert(0, "sample_traces")
from matrix.workloads import holdout39_fp32_mlp_infer as A, holdout39_fp32_moe_bmm_train as B


def timed(step, n=40, blocks=7):
    for _ in range(8):
        step()
    torch.cuda.synchronize()
    vals = []
    for _ in range(blocks):
        t = time.perf_counter()
        for _ in range(n):
            step()
        torch.cuda.synchronize()
        vals.append((time.perf_counter() - t) / n * 1e3)
    # CPU issue time of one step (no sync inside): how long the host takes to launch it
    torch.cuda.synchronize()
    t = time.perf_counter(); step(); cpu = (time.perf_counter() - t) * 1e3
    torch.cuda.synchronize()
    return statistics.median(vals), cpu


def gemm_us(m, k, n, batch=1):
    a = torch.randn(batch, m, k, device="cuda"); b = torch.randn(batch, k, n, device="cuda")
    for _ in range(3):
        torch.bmm(a, b)
    torch.cuda.synchronize()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    for _ in range(20):
        torch.bmm(a, b)
    e1.record(); torch.cuda.synchronize()
    return e0.elapsed_time(e1) / 20 * 1e3


for mod, sizes in ((A, [dict(batch=1024), dict(batch=2048), dict(batch=4096)]),
                   (B, [dict(tokens=256), dict(tokens=512)])):
    for extra in sizes:
        saved = dict(mod.SIZE)
        mod.SIZE.update(extra)
        res = {}
        for v in mod.VARIANTS:
            st = mod.make(v, "cuda")
            res[v] = timed(st)
            st.close()
        print(mod.NAME, extra, {v: (round(a, 3), round(c, 3)) for v, (a, c) in res.items()},
              "speed-up %.2fx" % (res["before"][0] / res["after"][0]), flush=True)
        mod.SIZE.clear(); mod.SIZE.update(saved)
for prec in ("highest", "high"):
    torch.set_float32_matmul_precision(prec)
    print(prec, "mlp gemm 2048x512x2048 %.1f us" % gemm_us(2048, 512, 2048), "4096: %.1f" % gemm_us(4096, 512, 2048),
          "moe bmm 8x512x768x3072 %.1f us" % gemm_us(512, 768, 3072, 8), flush=True)
