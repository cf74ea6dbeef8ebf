"""Small inline-SVG charts for the HTML report.

The report must be one self-contained file that opens anywhere, CI artifact viewers included, so
its charts are drawn here as plain SVG strings: no JavaScript, no CDN, nothing to fetch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from html import escape

WIDTH, HEIGHT = 900, 230
_LEFT, _RIGHT, _TOP, _BOTTOM = 60, 16, 26, 34


@dataclass
class Series:
    label: str
    color: str
    points: list[tuple[float, float]]
    dots: bool = False  # scatter rather than a line


@dataclass
class Band:
    """A shaded span of x, e.g. a fault window, coloured by what it is (its kind of fault)."""

    start: float
    end: float
    label: str
    color: str = "#f4a261"


@dataclass
class Mark:
    """A vertical tick at x, e.g. when an anomaly happened."""

    x: float
    label: str
    color: str


@dataclass
class Chart:
    x_label: str
    y_label: str
    series: list[Series]
    bands: list[Band] = field(default_factory=list)
    marks: list[Mark] = field(default_factory=list)
    y_lines: list[tuple[float, str]] = field(default_factory=list)  # horizontal guides
    zero_based: bool = True  # rates start at zero; offsets are plotted around their data


def _ticks(low: float, high: float, count: int = 6) -> list[tuple[float, str]]:
    """Round values to label an axis with, each with just the decimals its step needs."""
    raw = (high - low or 1.0) / count
    step = 10 ** math.floor(math.log10(raw))
    step *= next(m for m in (1, 2, 5, 10) if raw <= step * m)
    decimals = max(0, -math.floor(math.log10(step)))
    first = math.ceil(low / step) * step
    values = [first + i * step for i in range(int((high - first) / step + 1e-9) + 1)]
    return [(v, f"{v:.{decimals}f}") for v in values]


def render(chart: Chart) -> str:
    xs = [x for s in chart.series for x, _ in s.points]
    xs += [b.start for b in chart.bands] + [b.end for b in chart.bands] + [m.x for m in chart.marks]
    ys = [y for s in chart.series for _, y in s.points] + [y for y, _ in chart.y_lines]
    x0, x1 = (min(xs), max(xs)) if xs else (0.0, 1.0)
    y0, y1 = (min(ys), max(ys)) if ys else (0.0, 1.0)
    if chart.zero_based:
        y0 = min(0.0, y0)
    x1, y1 = (x1 if x1 > x0 else x0 + 1), (y1 if y1 > y0 else y0 + 1)
    plot_w, plot_h = WIDTH - _LEFT - _RIGHT, HEIGHT - _TOP - _BOTTOM

    def px(x: float) -> float:
        return _LEFT + (x - x0) / (x1 - x0) * plot_w

    def py(y: float) -> float:
        return _TOP + plot_h - (y - y0) / (y1 - y0) * plot_h

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" '
        f'width="100%" role="img" class="chart">'
    ]
    for band in chart.bands:
        width = max(1.0, px(band.end) - px(band.start))
        out.append(
            f'<rect x="{px(band.start):.1f}" y="{_TOP}" width="{width:.1f}" height="{plot_h}" '
            f'fill="{escape(band.color)}" opacity="0.25"><title>{escape(band.label)}</title></rect>'
        )
    for y, label in _ticks(y0, y1):
        out.append(
            f'<line x1="{_LEFT}" x2="{WIDTH - _RIGHT}" y1="{py(y):.1f}" y2="{py(y):.1f}" '
            f'stroke="#e5e5e5"/><text x="{_LEFT - 6}" y="{py(y) + 4:.1f}" text-anchor="end" '
            f'class="tick">{label}</text>'
        )
    for x, label in _ticks(x0, x1):
        out.append(
            f'<text x="{px(x):.1f}" y="{HEIGHT - _BOTTOM + 16}" text-anchor="middle" class="tick">'
            f"{label}</text>"
        )
    for y, label in chart.y_lines:
        out.append(
            f'<line x1="{_LEFT}" x2="{WIDTH - _RIGHT}" y1="{py(y):.1f}" y2="{py(y):.1f}" '
            f'stroke="#c1121f" stroke-dasharray="4 3"><title>{escape(label)}</title></line>'
        )
    for s in chart.series:
        if s.dots:
            out += [
                f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3" fill="{s.color}"/>'
                for x, y in s.points
            ]
        elif s.points:
            path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in s.points)
            out.append(
                f'<polyline points="{path}" fill="none" stroke="{s.color}" stroke-width="1.5"/>'
            )
    for mark in chart.marks:
        out.append(
            f'<line x1="{px(mark.x):.1f}" x2="{px(mark.x):.1f}" y1="{_TOP}" y2="{_TOP + plot_h}" '
            f'stroke="{mark.color}" stroke-width="1.5" opacity="0.7">'
            f"<title>{escape(mark.label)}</title></line>"
        )
    out.append(
        f'<line x1="{_LEFT}" x2="{_LEFT}" y1="{_TOP}" y2="{_TOP + plot_h}" stroke="#888"/>'
        f'<line x1="{_LEFT}" x2="{WIDTH - _RIGHT}" y1="{_TOP + plot_h}" y2="{_TOP + plot_h}" '
        f'stroke="#888"/>'
        f'<text x="{_LEFT + plot_w / 2}" y="{HEIGHT - 4}" text-anchor="middle" class="axis">'
        f"{escape(chart.x_label)}</text>"
        f'<text x="14" y="{_TOP + plot_h / 2}" text-anchor="middle" class="axis" '
        f'transform="rotate(-90 14 {_TOP + plot_h / 2})">{escape(chart.y_label)}</text>'
    )
    legend_x = _LEFT + 8
    for s in chart.series:
        out.append(
            f'<rect x="{legend_x}" y="6" width="10" height="10" fill="{s.color}"/>'
            f'<text x="{legend_x + 14}" y="15" class="legend">{escape(s.label)}</text>'
        )
        legend_x += 22 + 7 * len(s.label)
    out.append("</svg>")
    return "".join(out)


@dataclass
class Bar:
    """One span in a lane of a lanes chart, labelled where it starts."""

    lane: int
    start: float
    end: float
    label: str
    color: str
    tooltip: str = ""


_LANE_H, _LANE_LEFT = 24, 120
_CHAR_W = 6.6  # about how wide a character of an 11px label is, to keep labels readable


def render_lanes(lanes: list[str], bars: list[Bar], x_label: str, x_range: tuple[float, float]
                 ) -> str:
    """A chart of spans on labelled lanes (e.g. one lane per kind of fault), so each span is
    seen with its label even where spans of different lanes overlap in time."""
    x0, x1 = x_range
    for bar in bars:
        x0, x1 = min(x0, bar.start), max(x1, bar.end)
    x1 = x1 if x1 > x0 else x0 + 1
    plot_w = WIDTH - _LANE_LEFT - _RIGHT
    height = _TOP + _LANE_H * max(1, len(lanes)) + _BOTTOM

    def px(x: float) -> float:
        return _LANE_LEFT + (x - x0) / (x1 - x0) * plot_w

    bottom = _TOP + _LANE_H * len(lanes)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height}" '
        f'width="100%" role="img" class="chart lanes">'
    ]
    for i, lane in enumerate(lanes):
        y = _TOP + i * _LANE_H
        out.append(
            f'<line x1="{_LANE_LEFT}" x2="{WIDTH - _RIGHT}" y1="{y + _LANE_H}" '
            f'y2="{y + _LANE_H}" stroke="#eee"/>'
            f'<text x="{_LANE_LEFT - 6}" y="{y + _LANE_H / 2 + 4:.1f}" text-anchor="end" '
            f'class="axis">{escape(lane)}</text>'
        )
    for x, label in _ticks(x0, x1):
        out.append(
            f'<line x1="{px(x):.1f}" x2="{px(x):.1f}" y1="{_TOP}" y2="{bottom}" '
            f'stroke="#f0f0f0"/><text x="{px(x):.1f}" y="{bottom + 16}" text-anchor="middle" '
            f'class="tick">{label}</text>'
        )
    for bar in bars:
        y = _TOP + bar.lane * _LANE_H + 3
        left, width = px(bar.start), max(2.0, px(bar.end) - px(bar.start))
        text_w = _CHAR_W * len(bar.label) + 6
        if text_w <= width:  # inside the bar
            label = f'x="{left + 3:.1f}" class="bar-label"'
        elif left + width + text_w <= WIDTH:  # after it
            label = f'x="{left + width + 3:.1f}" class="bar-label-out"'
        else:  # before it, at the chart's right edge
            label = f'x="{left - 3:.1f}" text-anchor="end" class="bar-label-out"'
        out.append(
            f'<g class="bar"><title>{escape(bar.tooltip or bar.label)}</title>'
            f'<rect x="{left:.1f}" y="{y}" width="{width:.1f}" height="{_LANE_H - 6}" '
            f'fill="{escape(bar.color)}" opacity="0.8" rx="2"/>'
            f'<text {label} y="{y + _LANE_H / 2 + 1:.1f}">{escape(bar.label)}</text></g>'
        )
    out.append(
        f'<text x="{_LANE_LEFT + plot_w / 2}" y="{height - 4}" text-anchor="middle" '
        f'class="axis">{escape(x_label)}</text></svg>'
    )
    return "".join(out)
