"""fusion_candidates' advice knows what the program already does: a model already compiled is not told to
torch.compile(model); the chains left are the eager code around it (a DDIM sampler's update around a compiled DiT,
h200_clean52A), which is what the advice names. An eager model's advice stays the compile of the model."""
from __future__ import annotations

from matrix_runs import doc


def _fusion(d: dict) -> dict:
    return next(f for f in d["findings"] + d["minor_findings"] if f["kind"] == "fusion_candidates")


def test_compiled_model_is_told_to_compile_the_eager_code_around_it():
    fix = _fusion(doc("h200_clean52A", "holdout45_ddim_dit_healthy", "before"))["fix"]
    assert "outside the compiled code" in fix
    assert "torch.compile region" in fix and "a step" in fix
    assert "model = torch.compile(model)" not in fix


def test_eager_model_is_told_to_compile_the_model():
    fix = _fusion(doc("h100_clean2B", "holdout5_fusion_arith", "before"))["fix"]
    assert fix.startswith("Fuse the pointwise chains: model = torch.compile(model)")
    assert "outside the compiled code" not in fix
