"""load -> model -> graph -> analyses -> what-if -> rank: a trace file in, an Analysis out.

The Analysis holds the tables the document is built from (report/document.py); renderers never see
it. Nothing here prints or writes.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ..analyses import ANALYZERS, Context, Finding, spec
from ..analyses.attribution import attribute_gaps, per_step_causes
from ..estimate.graph import build_graph, step_window
from ..estimate.rank import estimate
from ..trace.host import HostActivity
from ..trace.load import load_trace
from ..trace.model import TraceModel, build_model
from ..trace.steps import USER_RANGES, full_step_mask
from .breakdown import breakdown, unprofiled_ms_read
from .facts import trace_facts
from .verdict import verdict

HEALTHY_MAX_IDLE = 0.25


@dataclass
class Analysis:
    model: TraceModel
    findings: list[Finding]
    per_step: pd.DataFrame          # per step: dur, GPU busy, idle by cause (us)
    gaps: pd.DataFrame              # attributed idle gaps
    whatif: dict
    verdict: str
    facts: dict = field(default_factory=dict)
    graph_stats: dict = field(default_factory=dict)
    # Causes seen in the trace that cost less than rank.MIN_SHARE of a step: shown, not ranked.
    minor_findings: list[Finding] = field(default_factory=list)

    @property
    def healthy(self) -> bool:
        """GPU mostly busy and nothing worth a ticket: no finding, idle under HEALTHY_MAX_IDLE."""
        if not self.model.has_gpu or self.fixes or any(spec(f.kind).headline for f in self.findings):
            return False
        b = breakdown(self)
        if b["step"] <= 0:
            return False
        # The idle that counts is the un-profiled step's: with_stack can stretch a GPU-bound step's CPU past
        # its GPU work (a conv net 40% idle profiled, 5% idle as measured without the profiler). An estimate
        # is read at the top of its band: one that took too much out would otherwise hide real idle.
        u = unprofiled_ms_read(self)
        if u:
            return max(0.0, u * 1000 - b["gpu_busy"]) / (u * 1000) <= HEALTHY_MAX_IDLE
        return b["idle_share"] <= HEALTHY_MAX_IDLE

    @property
    def fixes(self) -> list[Finding]:
        """The findings that are fixes, not notes about the measurement."""
        return [f for f in self.findings if not spec(f.kind).note]

    @property
    def notes(self) -> list[Finding]:
        """Notes about the measurement or about what the trace is (never ranked as fixes)."""
        return [f for f in self.findings if spec(f.kind).note]

    @property
    def full_steps(self) -> pd.DataFrame:
        return self.per_step[full_step_mask(self.per_step["partial"])]

    @property
    def reference_step_us(self) -> float:
        """The step savings are shares of: the un-profiled step when known, else the profiled median."""
        u = (self.whatif or {}).get("unprofiled_step_ms")
        return u * 1000 if u else self.median_step_us

    @property
    def median_step_us(self) -> float:
        return float(self.full_steps["dur"].median())


def analyze_file(path: Path, in_job: bool = False, peer_waits: tuple | None = None,
                 step_ranges: str | None = None) -> Analysis:
    """`peer_waits`: what the job's other ranks say this rank waited for in its collectives (trace/peer_waits.py);
    `step_ranges`: a regex naming the program's own ranges to take as the steps (trace/steps.find_steps)."""
    raw = load_trace(path)
    if step_ranges:
        raw.meta["step_ranges"] = step_ranges
    model = build_model(raw, peer_waits)
    if step_ranges and model.step_source != USER_RANGES:    # (said, not silently ignored)
        model.warnings.append(f"no op or annotation matches --step-ranges '{step_ranges}': the steps are as "
                              "without it")
    return analyze_model(model, in_job)


def analyze_model(model: TraceModel, in_job: bool = False) -> Analysis:
    """`in_job`: the trace is analyzed with the other ranks of its job (their absence is no limit)."""
    host = HostActivity(model)
    gaps = attribute_gaps(model, host)
    causes = per_step_causes(model, gaps)
    steps = model.steps.set_index("step")
    per_step = steps.join(causes)
    full = per_step.index.to_numpy()[full_step_mask(per_step["partial"])]
    ctx = Context(model=model, host=host, gaps=gaps, per_step=causes, full_steps=full)
    findings: list[Finding] = []
    if model.has_gpu:
        for analyze in ANALYZERS.values():
            findings.extend(analyze(ctx))
    G = None
    graph_stats: dict = {}
    if model.has_gpu:
        G = build_graph(model, host, step_window(model))
        kinds: dict[str, int] = {}
        for _, _, k in G.edges(data="kind"):
            kinds[k] = kinds.get(k, 0) + 1
        graph_stats = {"nodes": G.number_of_nodes(), "edges": kinds, "steps": G.graph["steps"]}
    ranked = estimate(ctx, G, findings)
    findings = ranked["findings"]
    if any(spec(f.kind).headline for f in findings):
        # The trace is not a steady-state step (a graph capture): its fixes are listed, never ranked.
        ranked["minor"] = [f for f in findings if not spec(f.kind).note] + ranked["minor"]
        findings = [f for f in findings if spec(f.kind).note]
        ranked["whatif"] = dict(ranked["whatif"], plan=None, combined=None)
    analysis = Analysis(model=model, findings=findings, per_step=per_step.reset_index(), gaps=gaps,
                        whatif=ranked["whatif"], verdict="", graph_stats=graph_stats,
                        minor_findings=ranked["minor"])
    analysis.facts = trace_facts(model, in_job)
    analysis.verdict = verdict(analysis)
    return analysis


def representative_step(a: Analysis) -> int | None:
    """The full step whose duration is closest to the median: the one to draw."""
    fs = a.full_steps
    if fs.empty:
        return None
    return int(fs.iloc[(fs["dur"] - fs["dur"].median()).abs().argmin()]["step"])
