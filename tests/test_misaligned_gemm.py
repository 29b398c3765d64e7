"""misaligned_gemm: GEMM dimensions not a multiple of 8. Kernel names as real traces spell them; Input Dims as Kineto
writes them; estimates against the fifty-fourth held-out set's measured fixes (two programs on one H100 host, the only
ones: the report calls the kind not validated)."""
from __future__ import annotations

from pathlib import Path

import pytest

from matrix_runs import doc, kinds, measured_speedup, predicted_speedup
from traceinsight.analyses.misaligned_gemm import _culprits
from traceinsight.report.analyze import analyze_file
from traceinsight.report.document import document
from traceinsight.trace.gemm_align import flops, narrow

BERT = Path(__file__).resolve().parent / "data" / "external" / "tracelens" / "h100_gaunernst_bert-small-uncased__1016001.json.gz"


def test_alignment_is_read_from_cutlass_names_by_element_size():
    # 16-bit: 8 elements are 16 bytes; align2 (tracelens' BERT vocabulary head) and align1 are narrow.
    assert narrow("void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_bf16_256x128_64x3_tn_align2>(x)") == 2
    assert narrow("void cutlass::Kernel2<cutlass_75_tensorop_f16_s1688gemm_f16_128x128_nn_align1>(x)") == 1
    assert narrow("void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_align8>(x)") is None
    # TF32 (s1688 without a 16-bit type): 4 elements are 16 bytes.
    assert narrow("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x64_16x4_nn_align4>(x)") is None
    assert narrow("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x64_16x4_nn_align1>(x)") == 1
    # Plain FP32 is fp32_matmul's; convolutions and cuBLAS's sm90 kernels (no alignment in the name) are not this.
    assert narrow("void cutlass::Kernel<cutlass_80_simt_sgemm_128x32_8x5_nn_align1>(x)") is None
    assert narrow("cutlass_tensorop_bf16_s16816fprop_optimized_bf16_128x128_32x5_nhwc_align2") is None
    assert narrow("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x64x64_warpgroupsize1x1x1_execute_segment_k_off"
                  "_kernel__5x_cublas") is None


def test_flops_from_input_dims_as_written():
    assert flops("aten::addmm", b"[[30522], [141, 512], [512, 30522], [], []]") == (2.0 * 141 * 512 * 30522,
                                                                                   (141, 30522, 512))
    assert flops("aten::mm", b"[\n [4096, 768],\n [768, 50257]\n]") == (2.0 * 4096 * 768 * 50257, (4096, 50257, 768))
    assert flops("aten::bmm", b"[[192, 197, 64], [192, 64, 197]]") == (2.0 * 192 * 197 * 64 * 197, (197, 197, 64, 192))
    assert flops("aten::mm", b"[[4, 8], [9, 3]]") is None          # (K disagrees: not a product's dims)
    assert flops("aten::cudnn_convolution", b"[[16, 48, 128, 128], [21, 48, 1, 1]]") is None
    assert flops("aten::mm", b"") is None


def test_bert_vocabulary_head_is_named_and_not_ranked_in_a_launch_bound_window():
    """tracelens' H100 BERT inference runs its 30522-token head on an align2 kernel (41 us of 307 us of kernels). The
    window is launch-bound, so shortening the kernel saves little: a minor finding, naming the dimension."""
    d = document(analyze_file(BERT))
    assert "misaligned_gemm" not in [f["kind"] for f in d["findings"]]
    minor = next(f for f in d["minor_findings"] if f["kind"] == "misaligned_gemm")
    assert "30522" in minor["title"]
    (product,) = minor["evidence"]["products"]
    assert product["op"] == "aten::addmm" and product["align"] == 2
    assert product["shape (M, N, K[, batch])"] == [141, 30522, 512]
    # 141 tokens is M, the output's rows: no one's contiguous dimension, not named.
    assert product["dims not a multiple of 8"] == [30522] and "141" not in minor["title"]
    # Priced without the trace's own aligned speed (no aligned product of 1 GFLOP), and not validated.
    assert minor["confidence"] == "low" and minor["evidence"]["priced_by"].startswith("an assumed")


def test_the_dimension_to_pad_is_an_output_width_before_an_inner_one():
    """Training an LM head of 50257 over 4095 tokens: forward [4095, 768] x [768, 50257], dX [4095, 50257] x
    [50257, 768], dW [50257, 4095] x [4095, 768] (dY transposed: 4095 is K, but no operand is contiguous in it).
    The vocabulary is an N; the token count only ever M or K."""
    fwd = {"odd N": [50257], "odd K": []}
    dx = {"odd N": [], "odd K": [50257]}
    dw = {"odd N": [], "odd K": [4095]}
    assert _culprits([fwd, dx, dw]) == [50257]
    # An inference-only first layer over 429 features: [B, 429] x [429, 4096], 429 only ever K.
    assert _culprits([{"odd N": [], "odd K": [429]}]) == [429]
    assert _culprits([{"odd N": [], "odd K": []}]) == []


# The fifty-fourth held-out set (sample_traces/matrix/h100_clean67*, registered before it was recorded; one H100 host,
# four processes scored as registered, E-F recorded after them). Estimates against its measured un-profiled steps.
RUNS = ("h100_clean67A", "h100_clean67C", "h100_clean67F")
LM, TABULAR, CONTROL = ("holdout54_odd_vocab_lm_train", "holdout54_odd_features_tabular_train",
                        "holdout54_odd_tokens_healthy")


def _finding(d: dict) -> dict:
    return next(f for f in d["findings"] if f["kind"] == "misaligned_gemm")


@pytest.mark.parametrize("run", RUNS)
@pytest.mark.parametrize("wl,dim", ((LM, 50257), (TABULAR, 429)))
@pytest.mark.parametrize("setting", ("default", "stack"))
def test_odd_dimension_is_the_top_finding_and_its_estimate_meets_the_measured_fix(run, wl, dim, setting):
    d = doc(run, wl, "before", setting)
    assert kinds(d)[0] == "misaligned_gemm"
    f = _finding(d)
    predicted, truth = predicted_speedup(d, f), measured_speedup(run, wl)
    assert abs(predicted / truth - 1) <= 0.25, (predicted, truth)
    assert "multiple of 8" in f["fix"] and "Pad" in f["fix"]
    if setting == "stack":                # record_shapes: the dimension is named, the price from FLOPs
        assert str(dim) in f["title"] and f["confidence"] == "medium"
        assert f["evidence"]["priced_by"].startswith("FLOPs")
    else:                                 # no shapes: said so, priced by the kernels' alignment
        assert "record_shapes" in f["title"] and f["confidence"] == "low"
    assert "not validated" in f["likely_basis"]


@pytest.mark.parametrize("run", RUNS)
@pytest.mark.parametrize("setting", ("default", "stack"))
def test_an_odd_token_count_is_no_ones_contiguous_dimension(run, setting):
    """15 x 509 tokens over a vocabulary of 32000: every product takes the aligned kernels, the step is healthy."""
    d = doc(run, CONTROL, "before", setting)
    assert d["healthy"], kinds(d)
    assert "misaligned_gemm" not in [f["kind"] for f in d["findings"] + d["minor_findings"]]
