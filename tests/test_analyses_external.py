"""Every trace recorded by others gets a sensible diagnosis, spelled out per trace."""
from __future__ import annotations

from pathlib import Path

import pytest

from traceinsight.report.analyze import analyze_file
from traceinsight.report.document import build_report, document as to_dict

EXT = Path(__file__).resolve().parent / "data" / "external" / "hta"


def _doc(name: str) -> dict:
    return to_dict(analyze_file(EXT / name))


def _kinds(d: dict, minor: bool = True) -> set[str]:
    ks = {f["kind"] for f in d["findings"]}
    if minor:
        ks |= {f["kind"] for f in d["minor_findings"]}
    return ks


@pytest.fixture(scope="module")
def docs() -> dict[str, dict]:
    return {p.name: _doc(p.name) for p in sorted(EXT.iterdir()) if p.name.endswith((".json", ".json.gz"))}


def test_every_external_trace_is_diagnosed(docs):
    assert len(docs) == 10
    for name, d in docs.items():
        assert d["schema_version"] == 1
        assert d["verdict"], name
        # Findings are sorted by the estimated saving and carry the fields the JSON promises.
        savings = [f["estimated_savings_ms"] for f in d["findings"]]
        assert savings == sorted(savings, reverse=True), name
        for f in d["findings"]:
            assert f["kind"] and f["title"] and f["fix"] and f["confidence"] in ("high", "medium", "low")
            assert f["estimated_savings_pct"] is not None


def test_cpu_only_traces_have_no_gpu_findings(docs):
    for name in ("cpu_only.pt.trace.json.gz", "rank_non_gpu.json.gz"):
        d = docs[name]
        assert d["findings"] == [] and d["minor_findings"] == []
        assert d["verdict"].startswith("CPU-only trace")
        assert d["healthy"] is False


def test_alexnet_shows_permutes_pageable_copies_and_syncs(docs):
    d = docs["a100_alexnet_memcpy_sync_permute.json.gz"]
    kinds = _kinds(d)
    assert {"layout_permute", "pageable_memcpy", "sync_stall"} <= kinds
    permute = next(f for f in d["findings"] + d["minor_findings"] if f["kind"] == "layout_permute")
    assert any("nchwToNhwc" in k for k in permute["evidence"]["kernels"])


def test_nccl_rank_shows_permutes_and_its_collectives(docs):
    d = docs["a100_rank0_of2_nccl.json.gz"]
    assert "layout_permute" in _kinds(d)
    assert d["trace"]["world_size"] == 2
    assert any("AllReduce" in k["name"] for k in d["top_kernels"][:3])
    # The GPU is idle most of each step in this trace: it is not healthy.
    assert d["healthy"] is False and d["summary"]["gpu_idle_pct"] > 50


def test_v100_resnet_is_healthy(docs):
    d = docs["v100_resnet_ns_timestamps.pt.trace.json.gz"]
    assert d["healthy"] is True
    assert d["findings"] == []
    assert d["summary"]["gpu_idle_pct"] < 5


def test_event_sync_trace_names_the_syncing_op(docs):
    d = docs["a100_cuda_event_sync.json.gz"]
    sync = next(f for f in d["findings"] + d["minor_findings"] if f["kind"] == "sync_stall")
    assert sync["evidence"]["sync_sites"][0]["op"] == "aten::is_nonzero"


def test_amd_and_triton_launches_are_linked():
    for name in ("amd_mi250_minitoy_train.json.gz", "triton_example.json.gz"):
        a = analyze_file(EXT / name)
        kernels = a.model.gpu[a.model.gpu["kind"] == "kernel"]
        assert len(kernels) > 0
        assert (kernels["launcher"] >= 0).all(), name
        names = set(a.model.cpu.loc[kernels["launcher"], "name"])
        assert names & {"hipLaunchKernel", "hipExtLaunchKernel", "cuLaunchKernel"}, names
