"""Widgets: state after show / slider moves / refresh (no browser; FigureWidget state is Python-side)."""

import html
import json
import math
import re
import time

import numpy as np
import plotly.graph_objects as go
import pytest

import jupyter_gpuiter as gi
from jupyter_gpuiter.front.widgets import HistoryPlot, TradeoffExplorer, VerificationPanel
from jupyter_gpuiter.front.widgets import tradeoffs as TW
from jupyter_gpuiter.front.widgets.history import COLD, RESIDENT
from jupyter_gpuiter.front.widgets.panel import GAUGE_MAX
from jupyter_gpuiter.session import Iteration
from jupyter_gpuiter.theory import PARADIGMS, CostModel, false_accept_risk, optimise
from jupyter_gpuiter.verification.verdict import Counterexample, Verdict

PLUS_ONE = "def f(x):\n    return x + 1\n"
IDENTITY = "def f(x):\n    return x\n"


@pytest.fixture(scope="module")
def sess():
    return gi.Session("cpu")


@pytest.fixture(scope="module")
def failing(sess):
    return sess.verify(PLUS_ONE, IDENTITY, tests=200)


@pytest.fixture(scope="module")
def passing(sess):
    return sess.verify("def f(x):\n    return x * x\n", "def f(x):\n    return x ** 2\n", tests=2000)


# ---------------------------------------------------------------- the verification panel


def test_panel_shows_a_failing_verdict(failing):
    assert not failing.passed and failing.counterexample is not None
    panel = VerificationPanel()
    assert panel.status.value == ""
    panel.show(failing, name="f")
    assert panel.status.value == "FAIL"
    assert panel.title.value == "f"
    assert panel.sentence.value == failing.sentence
    assert panel.gauge.data[0].value == 0.0
    table = panel.counterexample.value
    cx = failing.counterexample
    for name, value in cx.inputs.items():
        assert f">{html.escape(name)}<" in table and f">{value!r}<" in table
    assert f">{cx.got!r}<" in table and f">{cx.expected!r}<" in table
    assert panel.counterexample.layout.display is None  # shown
    assert panel.timing_fig.data[0].x == tuple(failing.timings.values())
    assert panel.timing_fig.data[0].y == tuple(failing.timings)
    assert panel.speedup.value == ""
    assert "200 tests" in panel.details.value


def test_panel_updates_in_place(failing, passing):
    panel = VerificationPanel()
    panel.show(failing)
    widgets = (panel.widget, panel.gauge, panel.timing_fig, panel.counterexample)
    panel.show(passing, name="square", timings={"compile": 0.004, "verify": 0.0015}, speedup=2.5)
    assert (panel.widget, panel.gauge, panel.timing_fig, panel.counterexample) == widgets
    assert panel.status.value == "PASS"
    assert panel.sentence.value == passing.sentence
    assert panel.gauge.data[0].value == pytest.approx(-math.log10(passing.epsilon))
    assert panel.counterexample.value == "" and panel.counterexample.layout.display == "none"
    assert panel.timing_fig.data[0].x == (0.004, 0.0015)
    assert panel.timing_fig.data[0].y == ("compile", "verify")
    assert "2.5×" in panel.speedup.value
    assert panel.verdict is passing


def test_panel_shows_a_proof_and_a_trivial_reference():
    panel = VerificationPanel()
    proof = Verdict(True, 65_536, 0, 0.0, 1e-3, exhaustive=True, dtype="float16", timings={"run": 0.01})
    panel.show(proof)
    assert panel.status.value == "PASS"
    assert panel.sentence.value == "proved over all 65,536 inputs"
    assert panel.gauge.data[0].value == GAUGE_MAX
    assert panel.gauge.data[0].title.text == "proved"
    trivial = Verdict(False, 100, 0, 1.0, 1e-3, trivial="the reference is all zero")
    panel.show(trivial)
    assert panel.status.value == "FAIL"
    assert "reference rejected" in panel.sentence.value
    assert panel.gauge.data[0].value == 0.0
    assert panel.gauge.data[0].title.text != "proved"
    cx = Verdict(False, 5, 5, 1.0, 1e-3, Counterexample({"x": 1.5, "y": -2.0}, float("nan"), 3.0))
    panel.show(cx)
    assert ">1.5<" in panel.counterexample.value and ">-2.0<" in panel.counterexample.value
    assert ">nan<" in panel.counterexample.value and ">y<" in panel.counterexample.value


def test_panel_shows_a_row_counterexample_around_the_failing_element():
    row = np.arange(40.0)
    got, expected = row.copy(), row.copy()
    got[25] = 99.0
    cx = Counterexample({"x": row, "y": -row}, 99.0, 25.0, position=25, got_row=got, expected_row=expected,
                        row_index=4, found_length=128)
    panel = VerificationPanel()
    panel.show(Verdict(False, 10, 1, 1.0, 1e-3, cx, row_lengths=(128,)))
    table = panel.counterexample.value
    lo, hi = cx.window()
    assert lo <= 25 < hi < 40 and "a row of 40 elements, element 25 fails" in table
    assert "shrunk from row 4 of the 128-element rows" in table
    shown = [f">{i}<" for i in range(lo, hi)]
    assert all(s in table for s in shown) and f">{lo - 1}<" not in table and f">{hi}<" not in table
    assert "color:#c62828'>99.0<" in table and "color:#c62828'>25.0<" in table  # the failing element, marked
    assert ">x<" in table and ">y<" in table and ">-25.0<" in table
    per_row = Counterexample({"x": np.array([1.0, 2.0])}, 7.0, 3.0, found_length=2, row_index=0)
    panel.show(Verdict(False, 10, 1, 1.0, 1e-3, per_row, row_lengths=(2,)))
    assert "the row's result differs" in panel.counterexample.value and "7.0 / 3.0" in panel.counterexample.value


def test_show_error_shows_the_line_with_a_caret(sess):
    source = "def f(x):\n    return x + y\n"
    with pytest.raises(gi.CompileError) as info:
        gi.compile(source)
    err = info.value
    panel = VerificationPanel()
    panel.show_error(err, name="f")
    assert panel.status.value == "ERROR"
    assert err.kind in panel.sentence.value and "y" in panel.sentence.value
    text = html.unescape(panel.error.value)
    assert "    return x + y\n" + " " * 15 + "^" in text
    assert err.caret() in text
    assert f"line {err.line}, column {err.col}" in text
    assert panel.error.layout.display is None and panel._plots.layout.display == "none"


def test_show_of_a_verdict_that_did_not_compile(sess, passing):
    verdict = sess.verify("def f(x):\n    return foo(x)\n", IDENTITY, tests=100)
    assert verdict.error is not None
    panel = VerificationPanel()
    panel.show(passing)
    panel.show(verdict)
    assert panel.status.value == "ERROR"
    assert "^" in panel.error.value
    assert panel.counterexample.value == ""
    panel.show(passing)  # and back: the error goes away
    assert panel.status.value == "PASS" and panel.error.value == "" and panel.error.layout.display == "none"


def test_panel_refuses_other_types():
    panel = VerificationPanel()
    with pytest.raises(TypeError):
        panel.show("PASS")
    with pytest.raises(TypeError):
        panel.show_error(ValueError("x"))


# ---------------------------------------------------------------- the trade-off explorer


def latencies(model, k, n, p):
    return tuple(model.latency(mode, k, n, p) for mode in PARADIGMS)


def test_explorer_initial_state_is_the_model():
    ex = TradeoffExplorer(throttle_s=0)
    m = ex.model
    # N: the model's, rounded up to the slider's grid (a browser snaps the slider to it)
    assert ex.k == 1 and ex.n_tests == round(TW._n_slider_value(m.n_tests)) == 6918 and ex.p == m.p
    assert round(_browser_snap(ex.n_slider)) == ex.n_tests
    assert ex.fig.data[TW.LATENCY].x == PARADIGMS
    assert ex.fig.data[TW.LATENCY].y == pytest.approx(latencies(m, 1, ex.n_tests, m.p))
    assert ex.fig.data[TW.LATENCY].y[0] == 212.0
    assert ex.fig.data[TW.MEASURED].x == ()
    assert ex.optimum == optimise(m, 1e-3, 1e-3, m.p)


def test_moving_sliders_changes_the_traces():
    ex = TradeoffExplorer(throttle_s=0)
    m = ex.model
    before = ex.fig.data[TW.LATENCY].y

    ex.k_slider.value = 8
    after = ex.fig.data[TW.LATENCY].y
    assert after != before
    assert after == pytest.approx(latencies(m, 8, ex.n_tests, m.p))
    assert after[0] == before[0] and after[1] == before[1]  # cpu and traditional do not depend on k
    assert ex.fig.data[TW.CURRENT].y[0] == pytest.approx(false_accept_risk(1e-3, ex.n_tests, 8))

    ex.n_slider.value = 1e5
    assert ex.n_tests == 100_000
    assert ex.fig.data[TW.LATENCY].y == pytest.approx(latencies(m, 8, 100_000, m.p))
    assert ex.fig.data[TW.CURRENT].x == (100_000,)

    risk_before = ex.fig.data[TW.RISK].y
    ex.epsilon_slider.value = 1e-2
    assert ex.fig.data[TW.RISK].y != risk_before
    grid = ex.fig.data[TW.RISK].x
    assert ex.fig.data[TW.RISK].y[10] == pytest.approx(max(TW._RISK_FLOOR, false_accept_risk(1e-2, grid[10], 8)))

    ex.delta_slider.value = 1e-6
    assert ex.fig.data[TW.DELTA].y == pytest.approx((1e-6, 1e-6))
    assert ex.optimum == optimise(m, 1e-6, 1e-2, m.p)

    hybrid = ex.fig.data[TW.LATENCY].y[3]
    ex.k_slider.value = 1
    ex.p_slider.value = 0.2
    assert ex.fig.data[TW.LATENCY].y[3] != hybrid
    assert ex.fig.data[TW.LATENCY].y == pytest.approx(latencies(m, 1, 100_000, 0.2))
    assert "pass@k" in ex.summary.value


def test_update_only_recomputes_on_change():
    ex = TradeoffExplorer(throttle_s=0)
    n = ex.updates
    ex.update()
    assert ex.updates == n
    ex.k_slider.value = 2
    assert ex.updates == n + 1
    ex.update(force=True)
    assert ex.updates == n + 2


def test_throttled_changes_are_coalesced_and_update_flushes_them():
    ex = TradeoffExplorer(throttle_s=60)
    m = ex.model
    ex.k_slider.value = 4  # first change after a quiet period: at once
    assert not ex.pending
    assert ex.fig.data[TW.LATENCY].y == pytest.approx(latencies(m, 4, ex.n_tests, m.p))
    n = ex.updates
    ex.k_slider.value = 5  # within the throttle window: scheduled
    ex.k_slider.value = 6
    assert ex.pending and ex.updates == n
    assert ex.fig.data[TW.LATENCY].y == pytest.approx(latencies(m, 4, ex.n_tests, m.p))
    ex.update()  # synchronous: applies the latest values, cancels the scheduled one
    assert not ex.pending and ex.updates == n + 1
    assert ex.fig.data[TW.LATENCY].y == pytest.approx(latencies(m, 6, ex.n_tests, m.p))


def test_throttled_update_runs_later_by_itself():
    ex = TradeoffExplorer(throttle_s=0.05)
    m = ex.model
    ex.k_slider.value = 3
    ex.k_slider.value = 7
    deadline = time.monotonic() + 10
    while ex.pending and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not ex.pending
    assert ex.fig.data[TW.LATENCY].y == pytest.approx(latencies(m, 7, ex.n_tests, m.p))


def test_measured_points_overlay_and_custom_model():
    model = CostModel(execute_test_ms=1000, gpu_compile_ms=5)
    measured = [{"mode": "traditional", "latency_ms": 12.5, "label": "gelu"}, {"mode": "cpu", "ms": 900.0}]
    ex = TradeoffExplorer(model, measured, throttle_s=0)
    assert ex.fig.data[TW.LATENCY].y[0] == 1112.0
    assert ex.fig.data[TW.MEASURED].x == ("traditional", "cpu")
    assert ex.fig.data[TW.MEASURED].y == (12.5, 900.0)
    assert ex.fig.data[TW.MEASURED].text == ("gelu", "cpu")
    ex.set_model(CostModel())
    assert ex.fig.data[TW.LATENCY].y[0] == 212.0
    with pytest.raises(ValueError, match="mode"):
        ex.set_measured([{"mode": "gpu", "latency_ms": 1}])


def _browser_snap(slider) -> float:
    """What ipywidgets' front end does to a FloatLogSlider value: log10 snapped to min + j * step."""
    j = round((math.log(slider.value, slider.base) - slider.min) / slider.step)
    return slider.base ** (slider.min + j * slider.step)


def test_apply_optimum_sets_the_sliders():
    ex = TradeoffExplorer(throttle_s=0)
    ex.delta_slider.value = 1e-6
    ex.epsilon_slider.value = 1e-3
    ex.apply_optimum()
    k, n, ms = ex.optimum
    assert ex.k == k and n <= ex.n_tests <= n * 1.003  # never below the optimum
    # a browser snaps the slider to its grid and sends the value back: N stays what the summary says
    assert round(_browser_snap(ex.n_slider)) == ex.n_tests
    assert ex.fig.data[TW.LATENCY].y[3] == pytest.approx(ms, rel=1e-2)
    assert ex.fig.data[TW.CURRENT].y[0] <= 1e-6
    assert "(meets δ" in html.unescape(ex.summary.value)


def test_apply_optimum_right_after_a_throttled_change():
    """The button applies the optimum of the sliders as they are, even with their update still pending."""
    ex = TradeoffExplorer(throttle_s=60)
    ex.epsilon_slider.value = 1e-4  # at once
    ex.p_slider.value = 0.6  # within the throttle window: pending
    assert ex.pending
    ex.apply_optimum()
    assert ex.optimum == optimise(ex.model, 1e-3, 1e-4, 0.6, n_max=10**7)
    k, n, _ = ex.optimum
    assert ex.k == k and ex.n_tests >= n
    assert "(meets δ" in html.unescape(ex.summary.value)


def test_explorer_from_a_session(sess, failing, passing):
    sess.compile("def g(x):\n    return x - 3\n", mode="traditional")  # verify's own compiles ran the serial one
    ex = TradeoffExplorer.from_session(sess, throttle_s=0)
    assert "gpu_compile_ms" in ex.model.calibrated
    verifies = [i for i in sess.history if i.kind == "verify" and i.error is None]  # not a source that did not compile
    assert len(ex.fig.data[TW.MEASURED].y) == len(verifies)
    assert ex.fig.data[TW.MEASURED].y[0] == pytest.approx(1e3 * sum(verifies[0].seconds.values()))


# ---------------------------------------------------------------- what the browser draws


def _wire(value):
    """A value as it crosses the comm: plotly's serializer (Undefined -> "_undefined_"), then JSON."""
    from plotly.serializers import _py_to_js

    return json.loads(json.dumps(_py_to_js(value, None)))


def _set_path(obj: dict, path: str, value) -> None:
    *parents, last = path.split(".")
    for p in parents:
        obj = obj.setdefault(p, {})
    obj[last] = value


def _unset_path(obj: dict, path: str) -> None:
    *parents, last = path.split(".")
    for p in parents:
        obj = obj.get(p, {})
    obj.pop(last, None)


class FrontEndFigure(go.FigureWidget):
    """A FigureWidget that keeps what plotly's front-end model keeps (widgetbundle.js, plotly 7): its
    ``_widget_data`` from the synced state, with every ``_py2js_update`` / ``_py2js_restyle`` applied as
    its ``performRestyleLike`` does on the raw wire values — value i % len to trace i, null unsets, and
    anything else, the ``"_undefined_"`` placeholder included, is written as the value. A view renders
    that data deserialized, where ``"_undefined_"`` means absent: :meth:`drawn`."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._front = _wire(self._widget_data)
        self._messages = []
        self.observe(self._receive, names=["_widget_data", "_py2js_update", "_py2js_restyle"])

    def _receive(self, change):
        if change["new"] is None:
            return
        msg = _wire(change["new"])
        if change["name"] == "_widget_data":
            self._front = msg
            return
        self._messages.append(msg)
        style = msg["style_data"] if change["name"] == "_py2js_update" else msg["restyle_data"]
        traces = msg["style_traces"] if change["name"] == "_py2js_update" else msg["restyle_traces"]
        if traces is None:
            traces = list(range(len(self._front)))
        elif not isinstance(traces, list):
            traces = [traces]
        for key, values in (style or {}).items():
            values = values if isinstance(values, list) else [values]
            for i, t in enumerate(traces):
                v = values[i % len(values)]
                if v is None:
                    _unset_path(self._front[t], key)
                else:
                    _set_path(self._front[t], key, v)

    def drawn(self) -> list[dict]:
        def deserialize(v):
            if isinstance(v, dict):
                return {k: deserialize(x) for k, x in v.items() if x != "_undefined_"}
            if isinstance(v, list):
                return [None if x == "_undefined_" else deserialize(x) for x in v]
            return v

        return deserialize(self._front)


@pytest.fixture
def drawn_explorer(monkeypatch):
    """An explorer whose figure records what a browser would draw."""
    monkeypatch.setattr(TW.go, "FigureWidget", FrontEndFigure)

    def make(*args, **kwargs):
        ex = TradeoffExplorer(*args, throttle_s=0, **kwargs)
        assert isinstance(ex.fig, FrontEndFigure)
        return ex

    return make


def _stated(summary_html: str) -> tuple[int, float]:
    """(N, risk) as the summary beside the figure states them."""
    text = html.unescape(summary_html)
    n = int(re.search(r"after N = ([\d,]+) passing tests", text).group(1).replace(",", ""))
    risk = float(re.search(r"false-accept risk k\(1−ε\)\^N = ([0-9.e+-]+) ", text).group(1))
    return n, risk


def _curve_at(xs, ys, n: float) -> float:
    """The drawn risk curve at N: log(risk) is linear in N between grid points (risk = k(1-eps)^N)."""
    j = next(i for i, x in enumerate(xs) if x >= n)
    if xs[j] == n:
        return ys[j]
    (x0, y0), (x1, y1) = (xs[j - 1], ys[j - 1]), (xs[j], ys[j])
    return math.exp(math.log(y0) + (math.log(y1) - math.log(y0)) * (n - x0) / (x1 - x0))


def _check_drawn_agrees_with_text(ex):
    drawn = ex.fig.drawn()
    for i, trace in enumerate(ex.fig.data):  # every trace as Python holds it, x included
        assert drawn[i].get("x") == (list(trace.x) if trace.x is not None else None), (i, trace.name)
        assert drawn[i].get("y") == pytest.approx(list(trace.y) if trace.y is not None else None), (i, trace.name)
    bars, risk, cur = drawn[TW.LATENCY], drawn[TW.RISK], drawn[TW.CURRENT]
    assert bars["x"] == list(PARADIGMS)  # every bar labelled with its mode
    assert bars["y"] == pytest.approx(latencies(ex.model, ex.k, ex.n_tests, ex.p))
    assert risk["x"] == list(TW._N_GRID)
    n, stated = _stated(ex.summary.value)
    assert n == ex.n_tests and cur["x"] == [n]
    exact = false_accept_risk(ex.epsilon, n, ex.k)
    assert exact <= stated <= exact * 1.01  # printed to 3 digits, rounded up
    assert _curve_at(risk["x"], risk["y"], n) == pytest.approx(exact, rel=1e-9)  # the curve passes there
    assert cur["y"] == pytest.approx([exact], rel=1e-12)  # and so does the marker
    return drawn


def test_the_drawn_figure_agrees_with_the_stated_numbers(drawn_explorer):
    ex = drawn_explorer(measured=[{"mode": "traditional", "latency_ms": 12.5, "label": "gelu"}])
    drawn = _check_drawn_agrees_with_text(ex)
    # the default: N = 6,905 tests at eps = 1e-3 puts the curve at ~1e-3 there, not at 1e-14 near N = 80
    assert _curve_at(drawn[TW.RISK]["x"], drawn[TW.RISK]["y"], 80) > 0.9
    moves = [("k_slider", 8), ("n_slider", 1e5), ("epsilon_slider", 1e-4), ("delta_slider", 1e-6),
             ("p_slider", 0.3), ("n_slider", 31_000), ("k_slider", 1)]
    for name, value in moves:
        getattr(ex, name).value = value
        _check_drawn_agrees_with_text(ex)
    ex.apply_optimum()
    _check_drawn_agrees_with_text(ex)
    for msg in ex.fig._messages:  # no placeholder reaches the front end
        assert "_undefined_" not in json.dumps(msg)


def test_a_later_view_starts_from_the_current_figure(drawn_explorer):
    """The synced initial state (what a second display or a page reload renders) follows the updates."""
    ex = drawn_explorer()
    ex.k_slider.value = 5
    ex.epsilon_slider.value = 1e-2
    state = _wire(ex.fig._widget_data)
    for i, trace in enumerate(ex.fig.data):
        assert state[i].get("x") == list(trace.x) and state[i].get("y") == list(trace.y), (i, trace.name)
    ex.set_measured([{"mode": "neural", "latency_ms": 3.0}], update=False)
    assert _wire(ex.fig._widget_data)[TW.MEASURED]["y"] == [3.0]


def test_sliders_show_their_values():
    ex = TradeoffExplorer(throttle_s=0)
    for s in ex.sliders.values():
        assert s.readout
        assert s.layout.min_width == s.layout.width  # never squeezed below its width
    assert ex.controls.layout.flex == "0 0 auto"  # the summary beside them cannot shrink the column
    assert ex.n_slider.readout_format == ",.0f"  # "6,918", as the summary writes N


# ---------------------------------------------------------------- the history plot


def test_history_plot_refreshes():
    s = gi.Session("cpu")
    plot = HistoryPlot(s)
    assert plot.fig.data[RESIDENT].x == ()
    s.verify(PLUS_ONE, IDENTITY, tests=100)
    s.verify(PLUS_ONE, IDENTITY, tests=100)
    plot.refresh()
    n = len(s.history)
    assert plot.fig.data[RESIDENT].x == tuple(range(1, n + 1))
    assert plot.fig.data[RESIDENT].y == pytest.approx([1e3 * sum(i.seconds.values()) for i in s.history], abs=1e-6)
    assert "cache hit" in "".join(plot.fig.data[RESIDENT].text)  # the second verify hits the kernel cache
    assert plot.fig.data[COLD].x == ()
    s.history.append(Iteration("verify", "fresh process", {"total": 1.2}, extra={"cold": True}))
    plot.refresh()
    assert plot.fig.data[COLD].x == (n + 1,) and plot.fig.data[COLD].y == pytest.approx((1200.0,))
    assert len(plot.fig.data[RESIDENT].x) == n


def test_history_plot_limits_points():
    s = gi.Session("cpu")
    s.history.extend(Iteration("compile", f"k{i}", {"compile": 0.001 * (i + 1)}) for i in range(30))
    plot = HistoryPlot(s, max_points=10)
    assert plot.fig.data[RESIDENT].x == tuple(range(21, 31))
    assert plot.fig.data[RESIDENT].y[-1] == pytest.approx(30.0)
