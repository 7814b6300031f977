"""The trade-off explorer: the knobs of probabilistic verification against the cost model.

Sliders for the number of candidates k, the tests per candidate N (log scale), the risk delta, the
failure rate epsilon that counts as wrong, and the neural per-candidate accuracy p. The figure shows
the modelled latency of one iteration per mode (bars, with the speedup over the CPU loop and any
measured points as a scatter overlay) and the false-accept risk k(1-eps)^N against N, with the
current N and the target delta.

Slider changes recompute at once, except within ``throttle_s`` of the previous slider-driven update:
then one trailing update is scheduled and further changes are coalesced into it. :meth:`update`
always recomputes synchronously (and cancels a scheduled one), so tests and callers can drive it.

How the figure reaches the browser: every recomputation sends ONE ``plotly_update`` message whose values
are explicit for every trace it names (x and y of the bars, the risk curve, the current-N marker and
the delta line, the bars' text). A ``batch_update`` that changed y on some traces and x on others would
pad the missing ones with plotly's ``"_undefined_"`` placeholder, and plotly's front-end model (plotly
7, anywidget) writes that placeholder into its copy of the data as if it were a value: the next
rendering then drew the bars and the risk curve without their x (against the trace index: bar labels
"0" and "traditional", the curve falling to 1e-14 at "N = 80" while the text said N = 6,918 gives 1e-3).
After each recomputation the widget's initial-state snapshot (``fig._widget_data``) is refreshed too,
so a view created later (a second display, a page reload) starts from the current figure.
"""

from __future__ import annotations

import asyncio
import copy
import html
import math
import threading
import time

import ipywidgets as W
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ... import epsilon_bound, format_count, format_rate, tests_needed
from ...theory import PARADIGMS, CostModel, calibrate, false_accept_risk, optimise, pass_at_k

__all__ = ["TradeoffExplorer"]

#: Trace indices in ``TradeoffExplorer.fig.data``.
LATENCY, MEASURED, RISK, CURRENT, DELTA = range(5)

_N_GRID = sorted({max(1, round(10 ** (i / 20))) for i in range(7 * 20 + 1)})  # 1 .. 1e7, 20 per decade
_RISK_FLOOR = 1e-30  # the log axis cannot show 0
_N_STEP = 0.001  # the N slider's step in log10(N)
_N_MAX_LOG = 7  # ... and its range: 1 .. 1e7 tests


def _n_slider_value(n: int) -> float:
    """The N slider's value for at least ``n`` tests that lies on the slider's grid.

    The browser snaps a FloatLogSlider's log10(value) to its step and sends the snapped value back: a
    value set off the grid (the optimiser's N = 7,598) came back as 7,586, whose risk exceeds delta, so
    the summary then contradicted the optimum just applied. Rounding up to the grid keeps N >= n.
    """
    n = min(max(1, int(n)), 10**_N_MAX_LOG)
    j = math.floor(math.log10(n) / _N_STEP + 1e-9)
    while round(10 ** (j * _N_STEP)) < n:
        j += 1
    return 10 ** (j * _N_STEP)


def _rate(x: float) -> str:
    return format_rate(x) if 0.0 <= x and math.isfinite(x) else str(x)


class TradeoffExplorer:
    """Sliders over a :class:`~jupyter_gpuiter.theory.CostModel` (default: the paper's example).

    ``measured`` is a list of ``{"mode": <one of cpu, traditional, neural, hybrid>, "latency_ms": float,
    "label": str (optional)}`` drawn over the bars. Display ``.widget``. State: ``k_slider``,
    ``n_slider``, ``delta_slider``, ``epsilon_slider``, ``p_slider`` (set ``.value``), ``fig``
    (trace indices ``LATENCY, MEASURED, RISK, CURRENT, DELTA``), ``summary`` (HTML), ``optimum``
    (the optimiser's ``(k, N, latency_ms)`` for risk <= delta at epsilon, or None).
    """

    def __init__(self, model: CostModel | None = None, measured: list[dict] | None = None, *,
                 throttle_s: float = 0.05):
        self.model = model if model is not None else CostModel()
        self.throttle_s = float(throttle_s)
        self.measured: list[dict] = []
        self.optimum: tuple[int, int, float] | None = None
        self._lock = threading.RLock()
        self._pending = None  # a scheduled trailing update (asyncio handle or threading.Timer)
        self._last = -math.inf  # monotonic time of the last slider-driven update
        self._state = None  # the inputs of the last computation
        self.updates = 0  # how many times the figure was recomputed

        style = {"description_width": "150px"}
        layout = W.Layout(width="460px", min_width="460px")  # never squeezed: the value readout stays visible
        self.k_slider = W.IntSlider(value=1, min=1, max=64, description="candidates k", style=style, layout=layout)
        self.n_slider = W.FloatLogSlider(value=_n_slider_value(self.model.n_tests), base=10, min=0, max=_N_MAX_LOG,
                                         step=_N_STEP,
                                         description="tests per candidate N", readout_format=",.0f",
                                         style=style, layout=layout)
        self.delta_slider = W.FloatLogSlider(value=1e-3, base=10, min=-9, max=-1, step=0.1, readout_format=".1e",
                                             description="risk δ", style=style, layout=layout)
        self.epsilon_slider = W.FloatLogSlider(value=1e-3, base=10, min=-7, max=-1, step=0.1, readout_format=".1e",
                                               description="wrong if fails ≥ ε", style=style, layout=layout)
        self.p_slider = W.FloatSlider(value=self.model.p, min=0.0, max=1.0, step=0.01, readout_format=".2f",
                                      description="neural accuracy p", style=style, layout=layout)
        self.sliders = {"k": self.k_slider, "n_tests": self.n_slider, "delta": self.delta_slider,
                        "epsilon": self.epsilon_slider, "p": self.p_slider}
        self.use_optimum = W.Button(description="use optimal k, N", tooltip="set k and N to the optimiser's choice")
        self.use_optimum.on_click(lambda _: self.apply_optimum())
        self.summary = W.HTML(value="")

        fig = make_subplots(rows=1, cols=2, column_widths=[0.5, 0.5],
                            subplot_titles=("latency of one iteration (model)", "false-accept risk k(1−ε)^N"))
        fig.add_trace(go.Bar(name="model", x=list(PARADIGMS), y=[0.0] * len(PARADIGMS), textposition="outside",
                             hovertemplate="%{x}: %{y:.3g} ms<extra></extra>"), row=1, col=1)
        fig.add_trace(go.Scatter(name="measured", x=[], y=[], mode="markers", text=[],
                                 marker={"symbol": "diamond", "size": 10, "color": "black"},
                                 hovertemplate="%{text}: %{y:.3g} ms<extra>measured</extra>"), row=1, col=1)
        fig.add_trace(go.Scatter(name="risk bound", x=_N_GRID, y=[1.0] * len(_N_GRID), mode="lines",
                                 hovertemplate="N=%{x:,}: %{y:.3g}<extra></extra>"), row=1, col=2)
        fig.add_trace(go.Scatter(name="current N", x=[1], y=[1.0], mode="markers", marker={"size": 11}), row=1, col=2)
        fig.add_trace(go.Scatter(name="δ", x=[_N_GRID[0], _N_GRID[-1]], y=[1e-3, 1e-3], mode="lines",
                                 line={"dash": "dash"}), row=1, col=2)
        fig.update_yaxes(title_text="ms", type="log", row=1, col=1)
        fig.update_xaxes(title_text="tests per candidate N", type="log", row=1, col=2)
        fig.update_yaxes(type="log", range=[-15, 0.2], exponentformat="power", row=1, col=2)
        fig.update_layout(height=380, width=900, margin={"l": 50, "r": 20, "t": 40, "b": 40}, showlegend=True)
        self.fig = go.FigureWidget(fig)

        # the sliders keep their width (flex none) and the summary takes the rest and wraps: in a narrow
        # notebook the summary used to squeeze the sliders' column until their value readouts were cut off
        self.summary.layout = W.Layout(flex="1 1 auto", min_width="0")
        self.controls = W.VBox(list(self.sliders.values()) + [self.use_optimum],
                               layout=W.Layout(flex="0 0 auto", min_width="480px"))
        self.widget = W.VBox([W.HBox([self.controls, self.summary]), self.fig])
        for s in self.sliders.values():
            s.observe(self._on_change, names="value")
        if measured:
            self.set_measured(measured, update=False)
        self.update()

    # -- construction helpers --

    @classmethod
    def from_session(cls, session=None, model: CostModel | None = None, **kwargs) -> TradeoffExplorer:
        """An explorer whose model is calibrated from a Session's history and whose measured points are
        its verify iterations (compile + verification time, without the generation step)."""
        if session is None:
            from ...session import current_session as current

            session = current()
        model = calibrate(model if model is not None else CostModel(), session.history)
        points = [{"mode": it.extra.get("mode", "traditional"), "latency_ms": 1e3 * sum(it.seconds.values()),
                   "label": it.name} for it in session.history
                  if it.kind == "verify" and getattr(it, "error", None) is None][-50:]
        return cls(model, [p for p in points if p["mode"] in PARADIGMS], **kwargs)

    def set_model(self, model: CostModel) -> None:
        """Swap the cost model (e.g. after :func:`~jupyter_gpuiter.theory.calibrate`) and redraw."""
        if not isinstance(model, CostModel):
            raise TypeError(f"model must be a CostModel, got {type(model).__name__}")
        self.model = model
        self.update(force=True)

    def set_measured(self, measured: list[dict], update: bool = True) -> None:
        """Replace the measured points: dicts with "mode", "latency_ms" and optionally "label"."""
        points = []
        for m in measured:
            mode = m.get("mode")
            if mode not in PARADIGMS:
                raise ValueError(f"a measured point needs a mode in {PARADIGMS}, got {mode!r}")
            ms = float(m["latency_ms"] if "latency_ms" in m else m["ms"])
            points.append({"mode": mode, "latency_ms": ms, "label": str(m.get("label", mode))})
        self.measured = points
        with self.fig.batch_update():
            tr = self.fig.data[MEASURED]
            tr.x = [p["mode"] for p in points]
            tr.y = [p["latency_ms"] for p in points]
            tr.text = [p["label"] for p in points]
        if update:
            self.update(force=True)
        else:
            self._refresh_snapshot()

    # -- current values --

    @property
    def k(self) -> int:
        return int(self.k_slider.value)

    @property
    def n_tests(self) -> int:
        return max(1, round(self.n_slider.value))

    @property
    def delta(self) -> float:
        return float(self.delta_slider.value)

    @property
    def epsilon(self) -> float:
        return float(self.epsilon_slider.value)

    @property
    def p(self) -> float:
        return float(self.p_slider.value)

    def _inputs(self):
        return (self.k, self.n_tests, self.delta, self.epsilon, self.p, self.model)

    # -- updating --

    def _on_change(self, change) -> None:
        if change.get("old") == change.get("new"):
            return
        with self._lock:
            if self._pending is not None:  # the scheduled update reads the latest values
                return
            wait = self.throttle_s - (time.monotonic() - self._last)
            if wait <= 0:
                self._last = time.monotonic()
                self.update()
            else:
                self._pending = self._schedule(wait)

    def _schedule(self, wait: float):
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if loop is not None:
            return loop.call_later(wait, self._flush)
        timer = threading.Timer(wait, self._flush)
        timer.daemon = True
        timer.start()
        return timer

    def _flush(self) -> None:
        with self._lock:
            if self._pending is None:
                return
            self._last = time.monotonic()
            self.update()

    @property
    def pending(self) -> bool:
        """Whether a throttled update is scheduled and not yet run."""
        return self._pending is not None

    def update(self, force: bool = False) -> None:
        """Recompute from the sliders now (a no-op when nothing changed, unless ``force``)."""
        with self._lock:
            if self._pending is not None:
                self._pending.cancel()
                self._pending = None
            state = self._inputs()
            if state == self._state and not force:
                return
            self._state = state
            self._compute()
            self.updates += 1

    def _compute(self) -> None:
        m, k, n, delta, eps, p = self.model, self.k, self.n_tests, self.delta, self.epsilon, self.p
        lat = [m.latency(mode, k, n, p) for mode in PARADIGMS]
        cpu = lat[0]
        risk = [max(_RISK_FLOOR, false_accept_risk(eps, x, k)) for x in _N_GRID]
        risk_now = false_accept_risk(eps, n, k)
        try:
            self.optimum = optimise(m, delta, eps, p, n_max=10**_N_MAX_LOG)  # an N the slider can show
        except ValueError:
            self.optimum = None
        # one message, every value explicit (no "_undefined_" placeholders: see the module docstring)
        self.fig.plotly_update(restyle_data={
            "x": [list(PARADIGMS), list(_N_GRID), [n], [_N_GRID[0], _N_GRID[-1]]],
            "y": [lat, risk, [max(_RISK_FLOOR, risk_now)], [delta, delta]],
            "text": [[f"{cpu / x:.3g}×" if x > 0 else "" for x in lat], None, None, None],
        }, trace_indexes=[LATENCY, RISK, CURRENT, DELTA])
        self._refresh_snapshot()
        self.summary.value = self._summary(lat, risk_now)

    def _refresh_snapshot(self) -> None:
        """The FigureWidget's synced initial state, which plotly sets only at construction (and in the
        figure's own ``_repr_mimebundle_``, not called when it is displayed inside a box): a view created
        later renders from it."""
        if hasattr(self.fig, "_widget_data"):
            self.fig._widget_data = copy.deepcopy(self.fig._data)

    def _summary(self, lat: list[float], risk_now: float) -> str:
        m, k, n, delta, eps, p = self.model, self.k, self.n_tests, self.delta, self.epsilon, self.p
        rows = "".join(
            f"<tr><td>{mode}</td><td>{ms:.3g} ms</td><td>{lat[0] / ms:.3g}×</td>"
            f"<td>{m.energy(mode, k, n, p):.3g} J</td></tr>" for mode, ms in zip(PARADIGMS, lat, strict=True))
        bound = epsilon_bound(n, delta / k)
        need = tests_needed(eps, delta / k)
        ok = "meets" if risk_now <= delta else "exceeds"
        lines = [
            f"pass@k = 1−(1−p)^k = {pass_at_k(p, k):.4g}",
            (f"after N = {format_count(n)} passing tests each: every candidate's failure rate ≤ {_rate(bound)}, "
             f"jointly with confidence 1−δ = {1 - delta:.6g} (δ/k each)"),
            (f"false-accept risk k(1−ε)^N = {_rate(risk_now)} ({ok} δ = {delta:.3g}); "
             f"N needed for ε = {eps:.3g}: {format_count(need)}"),
        ]
        if self.optimum is not None:
            ko, no, ms = self.optimum
            lines.append(f"optimal for risk ≤ δ: k = {ko}, N = {format_count(no)} → hybrid {ms:.3g} ms "
                         f"({lat[0] / ms:.3g}× the CPU loop)")
        if m.calibrated:
            lines.append(f"calibrated from this session: {', '.join(m.calibrated)}")
        items = "".join(f"<li>{html.escape(x)}</li>" for x in lines)
        return (f"<table><tr><th>mode</th><th>latency</th><th>speedup</th><th>energy</th></tr>{rows}</table>"
                f"<ul style='margin:4px 0'>{items}</ul>")

    def apply_optimum(self) -> None:
        """Set k and N to the optimiser's choice for the current delta, epsilon and p."""
        self.update()  # the optimum of the sliders as they are now, not of a throttled state still pending
        if self.optimum is None:
            return
        k, n, _ = self.optimum
        with self._lock:
            self.k_slider.value = k
            self.n_slider.value = _n_slider_value(n)  # on the slider's grid, >= n: the browser keeps it
        self.update()

    def _ipython_display_(self):
        from IPython.display import display

        display(self.widget)
