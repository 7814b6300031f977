"""Latency of every iteration of a Session, as a plotly FigureWidget refreshed in place.

One point per history entry (compile, verify, verify_batch): its total time, split into two traces,
"resident" and "cold". An entry is cold when its ``extra`` says so (``extra["cold"]`` true, or
``extra["resident"]`` false — e.g. a fresh-process measurement recorded by a benchmark or the
magic); everything a Session does itself is resident. Marker symbols tell the kinds apart and
cache hits are hollow.
"""

from __future__ import annotations

import plotly.graph_objects as go

__all__ = ["HistoryPlot"]

#: Trace indices in ``HistoryPlot.fig.data``.
RESIDENT, COLD = range(2)

_SYMBOLS = {"compile": "circle", "verify": "diamond", "verify_batch": "square"}


def is_cold(it) -> bool:
    extra = getattr(it, "extra", None) or {}
    return bool(extra.get("cold")) or extra.get("resident") is False


def _describe(i: int, it) -> str:
    parts = ", ".join(f"{k} {v * 1e3:.3g} ms" for k, v in it.seconds.items())
    hit = " (cache hit)" if getattr(it, "cache_hit", False) else ""
    verdict = getattr(it, "verdict", None)
    status = "" if verdict is None else f" — {'PASS' if verdict.passed else 'FAIL'}"
    return f"#{i} {it.kind} {it.name}{hit}{status}<br>{parts}"


class HistoryPlot:
    """Latency per iteration of ``session`` (default: the current Session); call :meth:`refresh` after
    new iterations. ``fig`` (also ``.widget``) has traces ``RESIDENT`` and ``COLD``; x is the 1-based
    position in the history, y the total milliseconds. Only the last ``max_points`` entries are drawn.
    """

    def __init__(self, session=None, max_points: int = 1000):
        if session is None:
            from ...session import current_session as current

            session = current()
        self.session = session
        self.max_points = int(max_points)
        traces = [go.Scatter(name=label, x=[], y=[], mode="lines+markers", text=[],
                             hovertemplate="%{text}<extra></extra>", line={"width": 1})
                  for label in ("resident", "cold")]
        self.fig = go.FigureWidget(traces, layout={
            "height": 300, "width": 700, "margin": {"l": 60, "r": 20, "t": 40, "b": 40},
            "title": {"text": "latency per iteration", "x": 0.5},
            "xaxis": {"title": {"text": "iteration"}}, "yaxis": {"title": {"text": "ms"}, "type": "log"}})
        self.widget = self.fig
        self.refresh()

    def refresh(self) -> None:
        """Redraw from the session's history."""
        history = list(self.session.history)
        start = max(0, len(history) - self.max_points)
        first = max(0, getattr(self.session, "iterations", 0) - len(history))  # iterations the history let go
        series = {RESIDENT: ([], [], [], []), COLD: ([], [], [], [])}
        for i, it in enumerate(history[start:], start=first + start + 1):
            x, y, text, symbol = series[COLD if is_cold(it) else RESIDENT]
            x.append(i)
            y.append(max(1e-6, sum(it.seconds.values()) * 1e3))  # log axis: no zeros
            text.append(_describe(i, it))
            base = _SYMBOLS.get(it.kind, "circle")
            symbol.append(base + "-open" if getattr(it, "cache_hit", False) else base)
        with self.fig.batch_update():
            for idx, (x, y, text, symbol) in series.items():
                tr = self.fig.data[idx]
                tr.x, tr.y, tr.text = x, y, text
                tr.marker.symbol = symbol
                tr.visible = True if x or idx == RESIDENT else "legendonly"

    def _ipython_display_(self):
        from IPython.display import display

        display(self.widget)
