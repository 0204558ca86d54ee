"""A picture of a Grafana dashboard without Grafana: every panel's queries asked of Prometheus over
a time range (query_range) and drawn as small line charts in one SVG, titles and legends as the
dashboard names them. test_metrics.py draws the chart's dashboard after its workload; docs show
one such drawing."""

from __future__ import annotations

import html
import math
import re

COLUMNS = 3
WIDTH, HEIGHT = 380, 190  # one panel
PAD_LEFT, PAD_TOP, PAD_BOTTOM = 62, 28, 44
COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b")


def legend(template: str, labels: dict) -> str:
    return re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: labels.get(m.group(1), ""), template).strip() or "value"


def axis(lo: float, hi: float) -> tuple[str, str]:
    """The two ends of a y axis, with as many digits as it takes to tell them apart."""
    for digits in range(3, 10):
        ends = tuple(f"{v:.{digits}g}" for v in (lo, hi))
        if ends[0] != ends[1]:
            return ends
    return f"{lo:g}", f"{hi:g}"


def panel_svg(x0: int, y0: int, title: str, lines: list[tuple[str, list[tuple[float, float]]]],
              start: float, end: float) -> str:
    out = [f'<g transform="translate({x0},{y0})">',
           f'<rect width="{WIDTH - 8}" height="{HEIGHT - 8}" fill="#fff" stroke="#ccc"/>',
           f'<text x="8" y="17" font-size="12" font-weight="bold">{html.escape(title)}</text>']
    values = [v for _, points in lines for _, v in points if math.isfinite(v)]
    lo, hi = (min(values), max(values)) if values else (0.0, 1.0)
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    w, h = WIDTH - 8 - PAD_LEFT - 10, HEIGHT - 8 - PAD_TOP - PAD_BOTTOM
    low, high = axis(lo, hi)
    out.append(f'<text x="{PAD_LEFT - 4}" y="{PAD_TOP + 8}" font-size="9" text-anchor="end">{high}</text>')
    out.append(f'<text x="{PAD_LEFT - 4}" y="{PAD_TOP + h}" font-size="9" text-anchor="end">{low}</text>')
    out.append(f'<line x1="{PAD_LEFT}" y1="{PAD_TOP + h}" x2="{PAD_LEFT + w}" y2="{PAD_TOP + h}" stroke="#999"/>')
    out.append(f'<line x1="{PAD_LEFT}" y1="{PAD_TOP}" x2="{PAD_LEFT}" y2="{PAD_TOP + h}" stroke="#999"/>')
    span = max(end - start, 1)
    for i, (name, points) in enumerate(lines[:len(COLOURS)]):
        colour = COLOURS[i]
        coords = [(PAD_LEFT + (t - start) / span * w, PAD_TOP + h - (v - lo) / (hi - lo) * h)
                  for t, v in points if math.isfinite(v)]
        if coords:
            path = " ".join(f"{x:.1f},{y:.1f}" for x, y in coords)
            out.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="{path}"/>')
        ly = PAD_TOP + h + 14 + (i // 2) * 11
        lx = PAD_LEFT + (i % 2) * (w // 2)
        out.append(f'<rect x="{lx}" y="{ly - 7}" width="8" height="8" fill="{colour}"/>')
        out.append(f'<text x="{lx + 11}" y="{ly}" font-size="9">{html.escape(name[:34])}</text>')
    if not lines:
        out.append(f'<text x="{PAD_LEFT + 8}" y="{PAD_TOP + h // 2}" font-size="11" fill="#c00">no data</text>')
    out.append("</g>")
    return "\n".join(out)


def render(dashboard: dict, query_range, start: float, end: float, variables: dict[str, str]) -> str:
    """An SVG of `dashboard`'s panels; query_range(expr, start, end) returns Prometheus' matrix."""
    panels = [p for p in dashboard["panels"] if p.get("type") != "row"]
    rows = math.ceil(len(panels) / COLUMNS)
    body = []
    for i, panel in enumerate(panels):
        lines = []
        for target in panel.get("targets", []):
            expr = target["expr"]
            for variable, value in variables.items():
                expr = expr.replace(variable, value)
            for series in query_range(expr, start, end):
                lines.append((legend(target.get("legendFormat", ""), series["metric"]),
                              [(float(t), float(v)) for t, v in series["values"]]))
        body.append(panel_svg((i % COLUMNS) * WIDTH + 4, 40 + (i // COLUMNS) * HEIGHT, panel["title"], lines,
                              start, end))
    total_w, total_h = COLUMNS * WIDTH + 8, 40 + rows * HEIGHT
    title = html.escape(f"{dashboard['title']} ({end - start:.0f} s)")
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{total_w}" height="{total_h}" '
            f'font-family="sans-serif">\n<rect width="100%" height="100%" fill="#f4f5f5"/>\n'
            f'<text x="8" y="26" font-size="16" font-weight="bold">{title}</text>\n'
            + "\n".join(body) + "\n</svg>\n")
