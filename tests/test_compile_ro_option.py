"""torch.compile(mode="reduce-overhead") as another way of an eager launch-bound step's launch fix (analyses/
launch_overhead.py, option `torch_compile_reduce_overhead`): the step graphed whole with its pointwise chains fused,
GroupNorm's and LayerNorm's kernels and cuDNN's layout transposes among them (fusion_candidates.COMPILED_NORM).
Checked against the forty-fifth set's measured compiles of a diffusion sampler's denoiser (a UNet and a DiT, eager ->
torch.compile(mode="reduce-overhead"), one H200 process h200_clean52A and three of one H100 host h100_clean52B-D): the
graph of the eager kernels alone had read 2.9-7.2x against 6.8-14.3x measured, as Inductor halved the GPU work."""
from __future__ import annotations

from pathlib import Path

from matrix_runs import measured_speedup
from traceinsight.render.sections import alternatives
from traceinsight.report.analyze import analyze_file
from traceinsight.report.document import document

MATRIX = Path(__file__).resolve().parents[1] / "sample_traces/matrix"
RUNS = sorted(p.name for p in MATRIX.glob("h*_clean52?") if (p / "manifest.json").exists())
WORKLOADS = ("holdout45_ddim_unet_compile", "holdout45_ddim_dit_compile")


def _launch(d: dict) -> dict:
    return next(x for x in d["findings"] if x["kind"] == "launch_overhead")


def _option(f: dict, key: str) -> dict | None:
    return next((a for a in f.get("alternatives") or () if a["option"] == key), None)


def test_the_reduce_overhead_estimate_holds_the_compiled_samplers():
    assert len(RUNS) == 4, RUNS
    within, n = 0, 0
    for run in RUNS:
        for workload in WORKLOADS:
            d = document(analyze_file(MATRIX / run / f"{workload}__before__default.json.gz"))
            f = _launch(d)
            opt = _option(f, "torch_compile_reduce_overhead")
            assert opt is not None, run
            u = d["summary"]["unprofiled_step_ms"]
            meas = measured_speedup(run, workload)
            pred, graph = (u / (u - s) for s in (opt["estimated_savings_ms"], f["estimated_savings_ms"]))
            # The fused graph beats the graph of the eager kernels, and never misses the measured compile by half.
            assert pred > graph, (run, pred, graph)
            assert abs(pred - meas) <= 0.5 * meas, (run, workload, round(pred, 2), round(meas, 2))
            within += abs(pred - meas) <= 0.25 * meas
            n += 1
            # Physics: never past the GPU work the trace shows halved (the fused chains' floor).
            assert u - opt["estimated_savings_ms"] > 0.3 * d["summary"]["median_gpu_busy_ms"]
    # (5 of 8 on 2026-12-05: the UNet on the H100's processes C and D read -39% and -30%, its eager step measured 95 and
    # 64 ms there, 100 on B: the host's own spread)
    assert within >= 5, within


def test_no_reduce_overhead_estimate_for_a_training_step():
    # torch.compile(model, mode="reduce-overhead") leaves a training step's optimizer eager: not what the graph of the
    # whole step replays, so no such estimate is offered (the default mode's is).
    d = document(analyze_file(MATRIX / "h200_clean50B/holdout43_hf_gpt2_small_compile__before__default.json.gz"))
    f = _launch(d)
    assert _option(f, "torch_compile") is not None
    assert _option(f, "torch_compile_reduce_overhead") is None


def test_the_reduce_overhead_option_is_said_as_another_way():
    d = document(analyze_file(MATRIX / f"{RUNS[0]}/holdout45_ddim_unet_compile__before__default.json.gz"))
    line = alternatives(_launch(d))
    assert 'torch.compile(model, mode="reduce-overhead") (fused Triton kernels, each compiled call replayed' in line
    assert "more than the fix as advised" in line
