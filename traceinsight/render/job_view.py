"""The job block (traceinsight.job's dict) as terminal text, Markdown, and an HTML fragment.

The HTML fragment is self-contained: inline SVG and inline styles, no script, no external resource;
every string that came from a trace (file names, host names, op and kernel names) is escaped.
It reads only the block, so a report can be rendered from a saved JSON file.
"""
from __future__ import annotations

import html as _html

from .format import md_text, terminal_safe

MAX_TEXT_RANKS = 32          # rows of the per-rank table in text outputs (the chart shows all)
COLORS = {"wait": "#d9534f", "comm": "#f0ad4e", "rest": "#5b8fd6"}   # (rest: the step less both, not GPU busy)


def _f(x, nd=2) -> str:
    return "-" if x is None else f"{x:.{nd}f}"


def _segments(r: dict) -> tuple[float, float, float]:
    """Wait, exposed communication beyond the wait, and the rest of the median step (ms)."""
    step = r.get("step_ms_median") or 0.0
    wait = min(r.get("collective_wait_ms_per_step") or 0.0, step)
    comm = max(0.0, min((r.get("exposed_comm_ms_per_step") or 0.0), step) - wait)
    return wait, comm, max(0.0, step - wait - comm)


def _shown_ranks(block: dict) -> list[dict]:
    """All ranks when few; else the straggler, the median rank, and those that wait most."""
    ranks = block.get("ranks", [])
    if len(ranks) <= MAX_TEXT_RANKS:
        return ranks
    st = block.get("straggler", {})
    keep = {st.get("rank"), st.get("paceless_rank"), st.get("median_rank")}
    by_wait = sorted(ranks, key=lambda r: -(r.get("collective_wait_ms_per_step") or 0.0))
    keep |= {r["rank"] for r in by_wait[:MAX_TEXT_RANKS - 2]}
    return [r for r in ranks if r["rank"] in keep]


def headline(block: dict) -> list[str]:
    st = block.get("straggler", {})
    steps = block.get("steps") or []
    span = f"steps {steps[0]}-{steps[-1]}" if steps else "no common step"
    lines = [f"Job: {block.get('ranks_present')} of {block.get('world_size')} ranks ({block.get('backend') or '?'}), "
             f"{span}, median step {_f(block.get('median_step_ms'))} ms (profiled)"
             + (f"; about {_f(block['unprofiled_step_ms'])} ms without the profiler ({block.get('unprofiled_step_method')})"
                if block.get("unprofiled_step_ms") else "")]
    if st.get("rank") is not None:
        lines.append(f"Straggler: rank {st['rank']} ({st.get('cause')}) arrives at the collectives "
                     f"{_f(st.get('lag_ms_per_step'))} ms per step after the others ({_f(st.get('lag_pct_of_step'), 1)}% "
                     "of a step, profiled): the others wait that long for it; fixing that rank saves at most that, "
                     "less where the others' own work or the profiler's cost fills part of it"
                     + (f"; replayed with it in time, rank {st['median_rank']}'s step is about "
                        f"{_f(st['median_rank_saves_ms'])} ms shorter (an estimate, un-profiled: the share of its "
                        "step the replay frees, of the job's step, and no more than the straggler's own work outlasts the "
                        "others')"
                        if st.get("median_rank_saves_ms") is not None else ""))
        lines.append(f"  why: {st.get('cause_text')}")
        for d in (st.get("evidence") or {}).get("top_differences", [])[:3]:
            lines.append(f"  differs: {d['name'][:100]} {d['input_dims'][:60]} ({d['where']}): "
                         f"{_f(d['straggler_ms_per_step'], 3)} vs {_f(d['median_rank_ms_per_step'], 3)} ms per step "
                         f"(rank {st['rank']} vs rank {st.get('median_rank')}; ops matched by name)")
        if st.get("fix"):
            lines.append(f"  fix: {st['fix']}")
    else:
        lines.append(f"Straggler: none ({st.get('cause_text') or st.get('cause')})")
    clk = block.get("clock", {})
    offs = [v for v in (clk.get("offsets_us") or {}).values() if v]
    lines.append(f"Clock: {clk.get('method')}, {clk.get('hosts', 1)} host(s)" +
                 (f", offsets up to {max(abs(v) for v in offs) / 1000:.2f} ms" if offs else ", no correction"))
    return lines


def _rank_rows(block: dict) -> list[list[str]]:
    of = block.get("matched_collectives")
    return [[str(r["rank"]), _f(r.get("step_ms_median")), _f(r.get("collective_wait_ms_per_step")),
             _f(r.get("exposed_comm_ms_per_step")), _f(r.get("overlap_pct"), 0),
             f"{r.get('last_arrivals', 0)}" + (f" of {of}" if of else "")]
            for r in _shown_ranks(block)]


# Per rank: medians per step; "arrived last": of the matched collectives in the window, how many it was the
# last rank to reach. Per collective shape: how many in the window, and their median time.
RANK_HEAD = ["rank", "step ms (median, profiled)", "wait ms/step", "exposed comm ms/step (wait included)", "overlap %",
             "arrived last (collectives)"]
COLL_HEAD = ["op", "dtype", "bytes", "ranks", "count (window)", "time us (median)", "algbw GB/s", "busbw GB/s"]


def _coll_rows(block: dict) -> list[list[str]]:
    # (gloo's ranges and some NCCL versions record no sizes: 0 bytes there is unknown, not zero)
    return [[c["op"], c["dtype"] or "unknown", f"{c['bytes']:,}" if c["bytes"] else "unknown", str(c["group_size"]),
             str(c["count"]), _f(c["time_us"], 1),
             _f(c.get("algbw_gbps")), _f(c.get("busbw_gbps"))] for c in block.get("collectives", [])]


def terminal(block: dict, width: int = 24) -> str:
    block = terminal_safe(block)
    out = headline(block)
    ranks = _shown_ranks(block)
    top = max((r.get("step_ms_median") or 0.0 for r in ranks), default=0.0) or 1.0
    out.append("")
    out.append("  ".join(f"{h:>10}" for h in RANK_HEAD[:5]) + "  last  wait/comm/rest")
    for r, row in zip(ranks, _rank_rows(block)):
        w, c, b = (round(width * v / top) for v in _segments(r))
        out.append("  ".join(f"{v:>10}" for v in row[:5]) + f"  {row[5]:>4}  " + "#" * w + "=" * c + "." * b)
    if len(ranks) < len(block.get("ranks", [])):
        out.append(f"  ... {len(block['ranks']) - len(ranks)} more ranks (see the JSON)")
    if block.get("collectives"):
        out.append("")
        rows = [COLL_HEAD] + _coll_rows(block)
        widths = [max(len(r[i]) for r in rows) for i in range(len(COLL_HEAD))]
        out += ["  ".join(v.rjust(widths[i]) for i, v in enumerate(r)) for r in rows]
    for w in block.get("warnings", []):
        out.append(f"note: {w}")
    return "\n".join(out) + "\n"


_md_cell = md_text


def markdown(block: dict) -> str:
    out = ["## Job", ""] + [f"- {_md_cell(x.strip())}" for x in headline(block)] + [""]
    out += ["| " + " | ".join(RANK_HEAD) + " |", "|" + "---|" * len(RANK_HEAD)]
    out += ["| " + " | ".join(_md_cell(v) for v in row) + " |" for row in _rank_rows(block)]
    if block.get("collectives"):
        out += ["", "| " + " | ".join(COLL_HEAD) + " |", "|" + "---|" * len(COLL_HEAD)]
        out += ["| " + " | ".join(_md_cell(v) for v in row) + " |" for row in _coll_rows(block)]
    if block.get("warnings"):
        out += [""] + [f"> {_md_cell(w)}" for w in block["warnings"]]
    return "\n".join(out) + "\n"


def strip_chart(block: dict, width: int = 640) -> str:
    """Inline SVG: one bar per rank, its median step split into wait, exposed comm and the rest."""
    ranks = block.get("ranks", [])
    if not ranks:
        return ""
    h = max(1, min(14, 700 // len(ranks)))
    label = 56 if h >= 8 else 0
    top = max((r.get("step_ms_median") or 0.0) for r in ranks) or 1.0
    scale = (width - label - 8) / top
    st = block.get("straggler", {}).get("rank")
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{h * len(ranks) + 4}" '
             f'role="img" aria-label="per rank: collective wait, other exposed communication, rest of the step">']
    for i, r in enumerate(ranks):
        y = 2 + i * h
        x = label
        if label:
            weight = "bold" if r["rank"] == st else "normal"
            parts.append(f'<text x="0" y="{y + h - 2}" font-size="{min(h, 11)}" font-weight="{weight}">'
                         f'rank {int(r["rank"])}</text>')
        for name, v in zip(("wait", "comm", "rest"), _segments(r)):
            w = v * scale
            if w <= 0:
                continue
            what = {"wait": "collective wait", "comm": "other exposed communication", "rest": "rest of the step"}[name]
            tip = _html.escape(f"rank {r['rank']}" + (f" ({r['host']})" if r.get("host") else "")
                               + f": {what} {v:.3f} ms per step (median, profiled)")
            parts.append(f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{max(1, h - 1)}" '
                         f'fill="{COLORS[name]}"><title>{tip}</title></rect>')
            x += w
    parts.append("</svg>")
    return "".join(parts)


def _table(head, rows) -> str:
    esc = _html.escape
    return ("<table><thead><tr>" + "".join(f"<th>{esc(h)}</th>" for h in head) + "</tr></thead><tbody>" +
            "".join("<tr>" + "".join(f"<td>{esc(str(v))}</td>" for v in row) + "</tr>" for row in rows) +
            "</tbody></table>")


def html(block: dict) -> str:
    esc = _html.escape
    lines = headline(block)
    legend = " ".join(f'<span style="color:{c}">&#9632;</span> {esc(n)}' for n, c in
                      (("collective wait", COLORS["wait"]), ("other exposed communication", COLORS["comm"]),
                       ("rest of the step", COLORS["rest"])))
    parts = ['<section class="job">', f"<h2>{esc(lines[0])}</h2>",
             "".join(f"<p>{esc(x.strip())}</p>" for x in lines[1:]),
             f'<figure>{strip_chart(block)}<figcaption>{legend}</figcaption></figure>',
             _table(RANK_HEAD, _rank_rows(block))]
    if block.get("collectives"):
        parts.append(_table(COLL_HEAD, _coll_rows(block)))
    if block.get("warnings"):
        parts.append("<ul>" + "".join(f"<li>{esc(w)}</li>" for w in block["warnings"]) + "</ul>")
    parts.append("</section>")
    return "\n".join(parts)
