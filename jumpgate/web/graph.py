"""The staged networked pipeline drawn as SVG, on the server (no script, no graph library).

A small layered layout: one band per stage, left to right in the order the stages run, and a last
band for the clients. An NCA sits in the band of the last stage it runs in (where its output flows
on: a hash join builds in one stage and probes in the next, and its output leaves in the second);
it says which stages it runs in when there are several. Inside a band, NCAs stand in columns by
their depth along the band's own edges (a scan, then the join it feeds, then the aggregation after
it), and in rows by order: each as near the mean row of what feeds it as the column allows, so a
chain reads as a straight line. Edges are arrows between boxes, spread over a box's side in the
order of the heights they come from (so arrows into a join do not cross), labelled with what
crosses them; an arrow that skips columns gets a free slot in each, as a box would, so it passes
between boxes rather than through them.

`layout` is pure geometry (tested on its own); `render_svg` turns it into markup, every text
escaped (names of NCAs, columns and hosts come from requests and plugins).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from html import escape

NODE_W = 200  # a box's width; its text is clipped to fit (the full text is in its tooltip)
LINE_H = 15  # one line of a box's text
BOX_PAD = 7
GAP_X = 160  # between columns: room for an edge's label
GAP_Y = 26  # between rows
BAND_PAD = 14  # a band's margin around its columns
BAND_HEAD = 30  # a band's title
CHAR_W = {"node": 6.6, "label": 5.7}  # average glyph widths of the two fonts, to clip text
LABEL_H = 13


@dataclass(frozen=True)
class Node:
    """A box: `lines[0]` is its title. `band` is the band's index (0 .. bands-1)."""

    id: str
    lines: tuple[str, ...]
    band: int
    kind: str = "nca"  # "nca", "converter" or "client": the box's CSS class
    tip: str = ""  # the tooltip (an SVG <title>): the full text
    attrs: dict[str, str] = field(default_factory=dict)  # data-* attributes of the node's group


@dataclass(frozen=True)
class Arrow:
    """An edge from `source` to `target` (which ports, the caller says in `attrs` and `tip`)."""

    source: str
    target: str
    lines: tuple[str, ...] = ()
    tip: str = ""
    attrs: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Box:
    x: float
    y: float
    w: float
    h: float

    def overlaps(self, other: Box) -> bool:
        return (self.x < other.x + other.w and other.x < self.x + self.w
                and self.y < other.y + other.h and other.y < self.y + self.h)


@dataclass(frozen=True)
class Band:
    label: str
    x: float
    w: float


@dataclass(frozen=True)
class Route:
    arrow: Arrow
    path: str  # SVG path data
    start: tuple[float, float]
    end: tuple[float, float]
    label_at: tuple[float, float]  # the middle of the curve


@dataclass(frozen=True)
class Layout:
    width: float
    height: float
    columns: dict[str, int]  # node id -> global column
    rows: dict[str, int]
    boxes: dict[str, Box]
    bands: tuple[Band, ...]
    routes: tuple[Route, ...]


def _depths(nodes: list[Node], arrows: list[Arrow]) -> dict[str, int]:
    """Per node, the longest path to it along arrows inside its own band (Kahn's order; a cycle,
    which a pipeline never has, leaves its nodes at depth 0)."""
    band = {n.id: n.band for n in nodes}
    inner = [(a.source, a.target) for a in arrows
             if a.source in band and a.target in band and band[a.source] == band[a.target] and a.source != a.target]
    preds: dict[str, list[str]] = {n.id: [] for n in nodes}
    succs: dict[str, list[str]] = {n.id: [] for n in nodes}
    for s, t in inner:
        preds[t].append(s)
        succs[s].append(t)
    waiting = {nid: len(p) for nid, p in preds.items()}
    ready = [n.id for n in nodes if waiting[n.id] == 0]
    depth = dict.fromkeys(band, 0)
    while ready:
        nid = ready.pop()
        for t in succs[nid]:
            depth[t] = max(depth[t], depth[nid] + 1)
            waiting[t] -= 1
            if waiting[t] == 0:
                ready.append(t)
    return depth


def _columns(nodes: list[Node], arrows: list[Arrow], bands: int) -> tuple[dict[str, int], list[int]]:
    """The global column of every node, and each band's first column (one more entry: the end)."""
    depth = _depths(nodes, arrows)
    width = [1] * bands
    for n in nodes:
        width[n.band] = max(width[n.band], depth[n.id] + 1)
    first = [0]
    for w in width:
        first.append(first[-1] + w)
    return {n.id: first[n.band] + depth[n.id] for n in nodes}, first


def _rows(order: list[str], column: dict[str, int], preds: dict[str, list[str]]) -> dict[str, int]:
    """Column by column, left to right: each node as near the mean row of its predecessors as the
    nodes above it in its column allow; those without any placed predecessor first, in `order`."""
    rank = {nid: i for i, nid in enumerate(order)}
    by_column: dict[int, list[str]] = {}
    for nid in order:
        by_column.setdefault(column[nid], []).append(nid)
    row: dict[str, int] = {}
    for col in sorted(by_column):
        here = by_column[col]

        def wanted(nid: str) -> float:
            placed = [row[p] for p in preds[nid] if p in row]
            return sum(placed) / len(placed) if placed else -1.0
        here.sort(key=lambda nid: (wanted(nid), rank[nid]))
        next_free = 0
        for nid in here:
            row[nid] = max(next_free, int(max(wanted(nid), 0.0) + 0.5))
            next_free = row[nid] + 1
    return row


def _anchors(ends: dict[str, list[tuple[float, int]]], boxes: dict[str, Box]) -> dict[int, float]:
    """Where arrows meet a box's side: spread evenly over it, in the order of the heights they come
    from (or go to), so that arrows into one box do not cross. `ends`: box id -> (the height at the
    arrow's other end, arrow index)."""
    out = {}
    for nid, here in ends.items():
        box = boxes[nid]
        for k, (_, i) in enumerate(sorted(here)):
            out[i] = box.y + box.h * (k + 1) / (len(here) + 1)
    return out


def _s_curve(a: tuple[float, float], b: tuple[float, float]) -> str:
    dx = (b[0] - a[0]) / 2
    return f" C{a[0] + dx:.1f},{a[1]:.1f} {b[0] - dx:.1f},{b[1]:.1f} {b[0]:.1f},{b[1]:.1f}"


def _on_s_curve(a: tuple[float, float], b: tuple[float, float], t: float) -> tuple[float, float]:
    """The point at `t` (0..1) of `_s_curve(a, b)`."""
    dx = (b[0] - a[0]) / 2
    pts = (a, (a[0] + dx, a[1]), (b[0] - dx, b[1]), b)
    k = (1 - t) ** 3, 3 * (1 - t) ** 2 * t, 3 * (1 - t) * t ** 2, t ** 3
    return sum(w * p[0] for w, p in zip(k, pts)), sum(w * p[1] for w, p in zip(k, pts))


def _route(arrow: Arrow, src: Box, dst: Box, y1: float, y2: float, through: list[Box],
           lean: int = 0) -> tuple[str, tuple[float, float], tuple[float, float], list[tuple[float, float]]]:
    """The arrow's path: S-curves across the gaps between columns, straight through the free slots
    (`through`) it was given in the columns it crosses; a loop below both boxes when it goes
    backwards. With its start, its end, and where its label could go, best first: in its first
    gap towards the source when `lean` < 0 (arrows fanning into one box are apart there), in its
    last gap towards the target when `lean` > 0 (arrows fanning out of one box), else mid-gap."""
    x1, x2 = src.x + src.w, dst.x
    if x2 <= x1:  # backwards or within a column (a pipeline rarely has one)
        drop = max(src.y + src.h, dst.y + dst.h) + GAP_Y
        c1, c2 = (x1 + GAP_X / 2, drop + (drop - y1) / 2), (x2 - GAP_X / 2, drop + (drop - y2) / 2)
        mid = ((x1 + 3 * c1[0] + 3 * c2[0] + x2) / 8, (y1 + 3 * c1[1] + 3 * c2[1] + y2) / 8)
        path = f"M{x1:.1f},{y1:.1f} C{c1[0]:.1f},{c1[1]:.1f} {c2[0]:.1f},{c2[1]:.1f} {x2:.1f},{y2:.1f}"
        return path, (x1, y1), (x2, y2), [mid]
    path, at = f"M{x1:.1f},{y1:.1f}", (x1, y1)
    gaps = []
    for slot in through:
        y = slot.y + slot.h / 2
        path += _s_curve(at, (slot.x, y)) + f" L{slot.x + slot.w:.1f},{y:.1f}"
        gaps.append((at, (slot.x, y)))
        at = (slot.x + slot.w, y)
    path += _s_curve(at, (x2, y2))
    gaps.append((at, (x2, y2)))
    first_t = 0.72 if lean > 0 else 0.28 if lean < 0 else 0.5
    order = gaps[::-1] if lean > 0 else gaps
    spots = [_on_s_curve(*g, t) for g in order for t in dict.fromkeys((first_t, 0.5, 0.35, 0.65, 0.25, 0.75))]
    return path, (x1, y1), (x2, y2), spots


def label_size(lines: tuple[str, ...]) -> tuple[float, float]:
    """(width, height) of an arrow's label as drawn (its lines clipped to fit a gap)."""
    if not lines:
        return 0.0, 0.0
    return (max(len(clip(t, GAP_X - 16, "label")) for t in lines) * CHAR_W["label"] + 8,
            LABEL_H * len(lines) + 4)


def _label_box(lines: tuple[str, ...], at: tuple[float, float]) -> Box:
    w, h = label_size(lines)
    return Box(at[0] - w / 2, at[1] - h / 2, w, h)


def _place_labels(candidates: list[tuple[Arrow, list[tuple[float, float]]]], boxes: list[Box]
                  ) -> list[tuple[float, float]]:
    """Each label at its first spot that covers no box and no label placed before it (else at its
    first spot)."""
    taken = list(boxes)
    out = []
    for arrow, spots in candidates:
        free = next((at for at in spots if not any(_label_box(arrow.lines, at).overlaps(b) for b in taken)),
                    spots[0])
        if arrow.lines:
            taken.append(_label_box(arrow.lines, free))
        out.append(free)
    return out


def _slots(kept: list[Arrow], column: dict[str, int], preds: dict[str, list[str]]) -> list[list[str]]:
    """Per arrow, the ids of the slots it takes in the columns between its ends (added to `column`
    and `preds`, so that rows are given to them as to boxes); an arrow's target follows its last."""
    slots = []
    for i, a in enumerate(kept):
        chain: list[str] = []
        for col in range(column[a.source] + 1, column[a.target]):
            sid = f"\0{i}:{col}"  # no node id starts with NUL
            column[sid] = col
            preds[sid] = [chain[-1] if chain else a.source]
            chain.append(sid)
        if column[a.source] < column[a.target]:
            preds[a.target].append(chain[-1] if chain else a.source)
        slots.append(chain)
    return slots


def _routes(kept: list[Arrow], boxes: dict[str, Box], through: list[list[Box]]) -> tuple[Route, ...]:
    """The arrows drawn: their ends spread over the boxes' sides, their labels placed."""
    def middle(b: Box) -> float:
        return b.y + b.h / 2
    outs: dict[str, list[tuple[float, int]]] = {}
    ins: dict[str, list[tuple[float, int]]] = {}
    for i, (a, via) in enumerate(zip(kept, through)):
        outs.setdefault(a.source, []).append((middle(via[0] if via else boxes[a.target]), i))
        ins.setdefault(a.target, []).append((middle(via[-1] if via else boxes[a.source]), i))
    y_out, y_in = _anchors(outs, boxes), _anchors(ins, boxes)
    drawn = []
    for i, (a, via) in enumerate(zip(kept, through)):
        fan_out, fan_in = len(outs[a.source]), len(ins[a.target])
        drawn.append(_route(a, boxes[a.source], boxes[a.target], y_out[i], y_in[i], via,
                            (fan_out > fan_in) - (fan_out < fan_in)))
    spots = _place_labels([(a, d[3]) for a, d in zip(kept, drawn)], list(boxes.values()))
    return tuple(Route(a, path, start, end, at) for a, (path, start, end, _), at in zip(kept, drawn, spots))


def layout(nodes: list[Node], arrows: list[Arrow], band_labels: list[str]) -> Layout:
    """Place `nodes` in their bands (module docstring). An arrow that crosses columns between its
    ends is given a slot in each of them, as a node would be, so that it passes between boxes,
    not through them. Arrows naming a node that is not given are left out."""
    bands = max([len(band_labels)] + [n.band + 1 for n in nodes])
    labels = list(band_labels) + [""] * (bands - len(band_labels))
    column, first = _columns(nodes, arrows, bands)
    kept = [a for a in arrows if a.source in column and a.target in column]
    preds: dict[str, list[str]] = {n.id: [] for n in nodes}
    slots = _slots(kept, column, preds)
    row = _rows([n.id for n in nodes] + [sid for chain in slots for sid in chain], column, preds)
    box_h = max([len(n.lines) for n in nodes] + [1]) * LINE_H + 2 * BOX_PAD
    pitch_x, pitch_y = NODE_W + GAP_X, box_h + GAP_Y

    def band_x(b: int) -> float:  # left edge of band b: each band before it adds its two margins
        return first[b] * pitch_x + 2 * b * BAND_PAD

    def place(nid: str) -> Box:
        band = next(b for b in range(bands) if first[b] <= column[nid] < first[b + 1])
        return Box(band_x(band) + BAND_PAD + (column[nid] - first[band]) * pitch_x,
                   BAND_HEAD + row[nid] * pitch_y, NODE_W, box_h)

    boxes = {n.id: place(n.id) for n in nodes}
    band_boxes = tuple(Band(labels[b], band_x(b), (first[b + 1] - first[b]) * pitch_x - GAP_X + 2 * BAND_PAD)
                       for b in range(bands))
    routes = _routes(kept, boxes, [[place(sid) for sid in chain] for chain in slots])
    rows = max([r + 1 for r in row.values()] + [1])
    bottom = max([BAND_HEAD + rows * pitch_y] + [r.label_at[1] + label_size(r.arrow.lines)[1] / 2 for r in routes])
    width = band_boxes[-1].x + band_boxes[-1].w if band_boxes else NODE_W
    return Layout(width, bottom + BAND_PAD, {n.id: column[n.id] for n in nodes}, {n.id: row[n.id] for n in nodes},
                  boxes, band_boxes, routes)


# ---------------------------------------------------------------------------------- markup


def clip(text: str, width: float, kind: str = "node") -> str:
    """`text` cut to what fits in `width` pixels of the font of `kind`, with an ellipsis."""
    most = max(4, int(width / CHAR_W[kind]))
    return text if len(text) <= most else text[: most - 1] + "…"


def _attrs(values: dict[str, str]) -> str:
    return "".join(f' data-{escape(k)}="{escape(str(v))}"' for k, v in values.items())


def _label(route: Route) -> list[str]:
    lines = [clip(t, GAP_X - 16, "label") for t in route.arrow.lines]
    if not lines:
        return []
    x, y = route.label_at
    w, h = label_size(route.arrow.lines)
    top = y - h / 2
    out = [f'<rect class="label-bg" x="{x - w / 2:.1f}" y="{top:.1f}" width="{w:.1f}" '
           f'height="{h:.1f}" rx="3"/>',
           f'<text class="edge-label" x="{x:.1f}" y="{top + LABEL_H - 1:.1f}" text-anchor="middle">']
    for i, t in enumerate(lines):
        out.append(f'<tspan x="{x:.1f}" dy="{0 if i == 0 else LABEL_H}">{escape(t)}</tspan>')
    out.append("</text>")
    return out


def render_svg(nodes: list[Node], arrows: list[Arrow], band_labels: list[str], title: str = "") -> str:
    """The SVG markup of the layout (a string the template marks safe: everything in it is
    escaped here)."""
    lay = layout(nodes, arrows, band_labels)
    w, h = lay.width + 2, lay.height + 2
    out = [f'<svg class="pipeline" xmlns="http://www.w3.org/2000/svg" width="{w:.0f}" height="{h:.0f}" '
           f'viewBox="0 0 {w:.0f} {h:.0f}" role="img" aria-label="{escape(title or "pipeline graph")}">',
           '<defs><marker id="arrowhead" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="8" markerHeight="8" '
           'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" class="arrowhead"/></marker></defs>']
    for i, band in enumerate(lay.bands):
        out.append(f'<g class="band" data-band="{i}"><rect x="{band.x + 1:.1f}" y="1" width="{band.w:.1f}" '
                   f'height="{h - 2:.1f}" rx="6"/><text x="{band.x + 10:.1f}" y="20">{escape(band.label)}</text></g>')
    by_id = {n.id: n for n in nodes}
    for nid, box in lay.boxes.items():
        n = by_id[nid]
        out.append(f'<g class="node {escape(n.kind)}" data-id="{escape(n.id)}"{_attrs(n.attrs)}>'
                   f'<title>{escape(n.tip or chr(10).join(n.lines))}</title>'
                   f'<rect x="{box.x:.1f}" y="{box.y:.1f}" width="{box.w:.1f}" height="{box.h:.1f}" rx="5"/>')
        for i, line in enumerate(n.lines):
            cls = ' class="title"' if i == 0 else ""
            out.append(f'<text{cls} x="{box.x + BOX_PAD:.1f}" y="{box.y + BOX_PAD + (i + 1) * LINE_H - 3:.1f}">'
                       f'{escape(clip(line, NODE_W - 2 * BOX_PAD))}</text>')
        out.append("</g>")
    for r in lay.routes:  # after the boxes: an arrow ends on a box's border, its label sits between boxes
        a = r.arrow
        out.append(f'<g class="edge" data-from="{escape(a.source)}" data-to="{escape(a.target)}"{_attrs(a.attrs)}>'
                   f'<title>{escape(a.tip or " / ".join(a.lines))}</title>'
                   f'<path class="arrow" d="{r.path}" marker-end="url(#arrowhead)"/>')
        out += _label(r)
        out.append("</g>")
    out.append("</svg>")
    return "\n".join(out)
