"""Where the charts' words go: boxes in viewBox units, and a search for a place where a
label touches no point, no data line and no other label.

A label's box is estimated from its text (no font is measured at build time): the width
is a generous average advance per character, the height the font's ascent and descent.
The charts set each placed label's ``font-size`` on the element itself, so the box holds
at every width the SVG is drawn at (the words scale with the viewBox).
"""

from __future__ import annotations

import math

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

#: Average advance of a character, in ems: generous for the sans-serif faces a browser
#: falls back on (DejaVu Sans, the widest common one, averages about 0.6 em); bold is wider.
ADVANCE = 0.62
ADVANCE_BOLD = 0.7
ASCENT, DESCENT = 0.92, 0.26  # as a browser's text box: the face's whole line, not the glyphs


@dataclass(frozen=True)
class Box:
    x0: float
    y0: float
    x1: float
    y1: float

    def grow(self, pad: float) -> Box:
        return Box(self.x0 - pad, self.y0 - pad, self.x1 + pad, self.y1 + pad)

    def overlaps(self, other: Box) -> bool:
        return (
            self.x0 < other.x1 and other.x0 < self.x1 and self.y0 < other.y1 and other.y0 < self.y1
        )

    def inside(self, other: Box) -> bool:
        return (
            self.x0 >= other.x0
            and self.x1 <= other.x1
            and self.y0 >= other.y0
            and self.y1 <= other.y1
        )

    def crosses(self, a: tuple[float, float], b: tuple[float, float]) -> bool:
        """Whether the segment from ``a`` to ``b`` passes through the box (Liang–Barsky)."""
        (x0, y0), (x1, y1) = a, b
        dx, dy = x1 - x0, y1 - y0
        lo, hi = 0.0, 1.0
        for p, q in (
            (-dx, x0 - self.x0),
            (dx, self.x1 - x0),
            (-dy, y0 - self.y0),
            (dy, self.y1 - y0),
        ):
            if p == 0:
                if q < 0:
                    return False
                continue
            r = q / p
            if p < 0:
                lo = max(lo, r)
            else:
                hi = min(hi, r)
            if lo > hi:
                return False
        return True


def text_width(text: str, size: float, bold: bool = False) -> float:
    return len(text) * size * (ADVANCE_BOLD if bold else ADVANCE)


def text_box(
    x: float, y: float, text: str, size: float, anchor: str = "start", bold: bool = False
) -> Box:
    """The box of ``text`` drawn at (``x``, baseline ``y``) with ``text-anchor`` ``anchor``."""
    w = text_width(text, size, bold)
    x0 = x - {"start": 0.0, "middle": w / 2, "end": w}[anchor]
    return Box(x0, y - ASCENT * size, x0 + w, y + DESCENT * size)


def circle_box(cx: float, cy: float, r: float) -> Box:
    return Box(cx - r, cy - r, cx + r, cy + r)


Segment = tuple[tuple[float, float], tuple[float, float]]


class Layout:
    """What a chart has drawn so far, for labels to keep clear of: boxes (points, placed
    labels) and segments (data lines), inside ``bounds``."""

    def __init__(self, bounds: Box, pad: float = 1.0) -> None:
        self.bounds = bounds
        self.pad = pad
        self.boxes: list[Box] = []
        self.segments: list[Segment] = []

    def add_box(self, box: Box) -> None:
        self.boxes.append(box)

    def add_path(self, points: Sequence[tuple[float, float]]) -> None:
        self.segments += list(zip(points, points[1:], strict=False))

    def free(self, box: Box) -> bool:
        if not box.inside(self.bounds):
            return False
        grown = box.grow(self.pad)
        return not any(grown.overlaps(b) for b in self.boxes) and not any(
            grown.crosses(a, b) for a, b in self.segments
        )

    def place(self, candidates: Iterable[Box]) -> Box | None:
        """The first free candidate, kept (later labels avoid it); None when none is free."""
        for box in candidates:
            if self.free(box):
                self.boxes.append(box)
                return box
        return None


def around(
    cx: float, cy: float, w: float, h: float, gap: float, bounds: Box, step: float = 3.0
) -> list[Box]:
    """Boxes of size ``w`` × ``h`` inside ``bounds``, nearest to the point first (beside it,
    ``gap`` away, before farther out: the caller draws a leader line to a far one)."""
    out = []
    y0 = bounds.y0
    while y0 + h <= bounds.y1:
        x0 = bounds.x0
        while x0 + w <= bounds.x1:
            box = Box(x0, y0, x0 + w, y0 + h)
            ex, ey = nearest_edge(box, cx, cy)
            d = math.hypot(ex - cx, ey - cy)
            if d >= gap:
                # beside the point (right, then left) reads best; then above or below
                out.append(
                    (round(d), 0 if abs(ey - cy) < h / 2 else 1, -x0 if cx > box.x1 else x0, box)
                )
            x0 += step
        y0 += step
    # exact positions next to the point (the grid may miss them)
    exact = [
        Box(cx + gap, cy - h / 2, cx + gap + w, cy + h / 2),
        Box(cx - gap - w, cy - h / 2, cx - gap, cy + h / 2),
        Box(cx - w / 2, cy - gap - h, cx + w / 2, cy - gap),
        Box(cx - w / 2, cy + gap, cx + w / 2, cy + gap + h),
    ]
    out.sort(key=lambda item: item[:3])
    return exact + [item[3] for item in out]


def nearest_edge(box: Box, cx: float, cy: float) -> tuple[float, float]:
    """The point of ``box`` nearest to (cx, cy): where a leader line from the point ends."""
    return min(max(cx, box.x0), box.x1), min(max(cy, box.y0), box.y1)
