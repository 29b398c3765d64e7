"""Published peak figures of the GPUs a trace names (vendor spec sheets, SXM/OAM parts unless named).

A trace says which GPU ran it but not how fast its memory or its cores are; an estimate that weighs
memory traffic against arithmetic needs both. Only the ratio is used: HBM bandwidth (TB/s) per dense
FP32 non-tensor TFLOP/s, relative to an H100 SXM; and the bandwidth alone, relative to an H100 SXM.
"""
from __future__ import annotations

import re

# An AMD GPU by its name, for the traces whose header names no ROCm tracer (HTA's MI250: "AMD Radeon Graphics").
AMD_NAME = re.compile(r"\bAMD\b|Radeon|Instinct")


def rocm_trace(meta: dict, device_names: list) -> bool:
    """A ROCm (AMD) trace: its header names ROCm's tracer or HIP's runtime, or a GPU is AMD's. Its devices'
    computeMajor/Minor are then the gfx architecture's (9.0 for an MI250's gfx90a), no CUDA compute capability
    (a review read it as Hopper's, and the pinned-bandwidth default took it for one)."""
    return bool(meta.get("roctracer_version") or meta.get("hip_runtime_version")
                or any(AMD_NAME.search(n or "") for n in device_names))

# (name substring, HBM TB/s, FP32 TFLOP/s); the first match wins, so specific names come first.
PEAKS = (
    ("H100 PCIe", 2.0, 51.2), ("H100 NVL", 3.9, 60.0), ("H100", 3.35, 67.0), ("GH200", 4.0, 67.0),
    ("H200", 4.8, 67.0), ("B200", 8.0, 80.0), ("B100", 8.0, 60.0),
    ("A100-SXM4-80GB", 2.04, 19.5), ("A100 80GB", 2.04, 19.5), ("A100", 1.56, 19.5),
    ("V100", 0.9, 15.7), ("A10G", 0.6, 31.2), ("A10", 0.6, 31.2), ("L40S", 0.86, 91.6), ("L4", 0.3, 30.3),
    ("MI300X", 5.3, 163.4), ("MI250", 3.2, 47.9), ("MI210", 1.6, 22.6),
)
_H100 = (3.35, 67.0)


def _peak(name: str | None) -> tuple[float, float] | None:
    """(HBM TB/s, FP32 TFLOP/s) of the first PEAKS entry the name holds, or None."""
    return next(((tbs, tflops) for key, tbs, tflops in PEAKS if name and key in name), None)


def bandwidth_to_compute(name: str | None) -> float | None:
    """This GPU's bandwidth per FP32 FLOP relative to an H100's (H200: 1.43; A100 80GB: 2.1), or None
    for a GPU not in the table."""
    p = _peak(name)
    return (p[0] / p[1]) / (_H100[0] / _H100[1]) if p else None


def bandwidth_to_h100(name: str | None) -> float | None:
    """This GPU's HBM bandwidth relative to an H100 SXM's (H200: 1.43), or None for a GPU not in the table."""
    p = _peak(name)
    return p[0] / _H100[0] if p else None
