"""Jupyter widgets (ipywidgets + plotly FigureWidget), updated in place (docs/jupyter.md).

- :class:`VerificationPanel` — one verdict: status, confidence, gauge, counterexample, timings, speedup;
- :class:`TradeoffExplorer` — sliders for k, N, delta, epsilon and p over the cost model of ``theory``;
- :class:`HistoryPlot` — latency of each iteration of a Session.

Each has ``.widget`` to display and keeps its state in attributes that tests read.
"""

from .history import HistoryPlot
from .panel import VerificationPanel
from .tradeoffs import TradeoffExplorer

__all__ = ["HistoryPlot", "TradeoffExplorer", "VerificationPanel"]
