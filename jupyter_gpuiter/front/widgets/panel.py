"""The verification panel: one verdict at a glance, updated in place as the cell is re-run.

Status (PASS / FAIL / ERROR), the confidence sentence, a gauge of -log10(epsilon) ("proved" for an
exhaustive pass), the counterexample as a table, the time split as bars, and the speedup against the
reference; a compile error shows its line with a caret instead.
"""

from __future__ import annotations

import html
import math

import ipywidgets as W
import plotly.graph_objects as go

from ... import CompileError, Verdict

__all__ = ["GAUGE_MAX", "VerificationPanel"]

#: Top of the gauge: -log10(epsilon) of 8 is a failure rate of 1e-8 (about 2e9 tests at delta = 1e-3).
GAUGE_MAX = 8.0

_COLOURS = {"PASS": "#1a7f37", "FAIL": "#cf222e", "ERROR": "#9a6700", "": "#57606a"}


def gauge_value(verdict: Verdict) -> float:
    """-log10(epsilon), clipped to [0, GAUGE_MAX]; GAUGE_MAX for a proof; 0 for a failure."""
    if verdict.error is not None or not verdict.passed:
        return 0.0
    if verdict.exhaustive or verdict.epsilon <= 0.0:
        return GAUGE_MAX
    return min(GAUGE_MAX, max(0.0, -math.log10(verdict.epsilon)))


def _number(x: float) -> str:
    return repr(float(x))


def counterexample_html(verdict: Verdict) -> str:
    """The counterexample as an HTML table (one column per input, then got and expected); "" if none.
    A row kernel's is a table with one line per input row (then got and expected) over the elements
    around the failing one, which is marked."""
    cx = verdict.counterexample
    if cx is None:
        return ""
    if cx.is_row:
        return _row_counterexample_html(cx)
    heads = [*cx.inputs, "got", "expected"]
    cells = [*(_number(v) for v in cx.inputs.values()), _number(cx.got), _number(cx.expected)]
    th = "".join(f"<th style='padding:0 8px'>{html.escape(str(h))}</th>" for h in heads)
    td = "".join(f"<td style='padding:0 8px;font-family:monospace'>{html.escape(c)}</td>" for c in cells)
    return (f"<b>counterexample</b><table class='gpuiter-counterexample'><thead><tr>{th}</tr></thead>"
            f"<tbody><tr>{td}</tr></tbody></table>")


def _row_counterexample_html(cx) -> str:
    n, at = cx.row_length, cx.position
    lo, hi = cx.window()
    cell = "<td style='padding:0 6px;font-family:monospace{}'>{}</td>"

    def line(head: str, values) -> str:
        tds = "".join(cell.format(";font-weight:bold;color:#c62828" if i == at else "", html.escape(_number(v)))
                      for i, v in zip(range(lo, hi), list(values)[lo:hi]))
        more = "<td style='padding:0 6px'>…</td>"
        return f"<tr><th style='padding:0 8px;text-align:left'>{html.escape(head)}</th>{more if lo else ''}{tds}" \
               f"{more if hi < n else ''}</tr>"

    rows = [line(k, v) for k, v in cx.inputs.items()]
    if at is None:  # one value per row
        outputs = (f"<tr><th style='padding:0 8px;text-align:left'>got / expected</th><td colspan='{hi - lo}' "
                   f"style='padding:0 6px;font-family:monospace'>{html.escape(_number(cx.got))} / "
                   f"{html.escape(_number(cx.expected))}</td></tr>")
        what = "the row's result differs"
    else:
        outputs = line("got", cx.got_row) + line("expected", cx.expected_row)
        what = f"element {at} fails"
    heads = "".join(f"<th style='padding:0 6px'>{i}</th>" for i in range(lo, hi))
    gap = "<th></th>"
    head = f"<tr><th></th>{gap if lo else ''}{heads}{gap if hi < n else ''}</tr>"
    found = "" if cx.row_index is None else f", shrunk from row {cx.row_index} of the {cx.found_length}-element rows"
    return (f"<b>counterexample</b>: a row of {n} element{'' if n == 1 else 's'}, {what}{html.escape(found)}"
            f"<table class='gpuiter-counterexample gpuiter-row'><thead>{head}</thead>"
            f"<tbody>{''.join(rows)}{outputs}</tbody></table>")


def error_html(error: CompileError) -> str:
    """A compile error: kind, position and message, then the offending line with a caret."""
    return f"<pre class='gpuiter-error' style='margin:0'>{html.escape(error.format())}</pre>"


class VerificationPanel:
    """A panel showing one verdict; call :meth:`show` again to update it in place.

    State for tests and callers: ``status.value`` ("PASS", "FAIL", "ERROR" or "" before the first
    verdict), ``title.value``, ``sentence.value``, ``gauge.data[0].value``, ``counterexample.value``
    (HTML), ``error.value`` (HTML), ``timing_fig.data[0].x`` (seconds) and ``.y`` (phase names),
    ``speedup.value``, ``details.value``, ``verdict`` (the last one shown).
    """

    def __init__(self):
        self.verdict: Verdict | None = None
        self.status = W.Label(value="", style={"font_weight": "bold", "font_size": "1.2em"})
        self.title = W.Label(value="")
        self.sentence = W.Label(value="")
        self.details = W.Label(value="")
        self.speedup = W.Label(value="")
        self.counterexample = W.HTML(value="")
        self.error = W.HTML(value="")
        self.gauge = go.FigureWidget(
            go.Indicator(mode="gauge+number", value=0.0, number={"valueformat": ".2f"},
                         title={"text": "−log₁₀ ε"},
                         gauge={"axis": {"range": [0, GAUGE_MAX]}, "bar": {"color": _COLOURS[""]}}),
            layout={"height": 180, "width": 260, "margin": {"l": 25, "r": 25, "t": 40, "b": 10}})
        self.timing_fig = go.FigureWidget(
            go.Bar(x=[], y=[], orientation="h", hovertemplate="%{y}: %{x:.3s}s<extra></extra>"),
            layout={"height": 180, "width": 420, "margin": {"l": 130, "r": 20, "t": 30, "b": 30},
                    "title": {"text": "time", "x": 0.5},
                    "xaxis": {"tickformat": "~s", "ticksuffix": "s"}, "yaxis": {"autorange": "reversed"}})
        self._plots = W.HBox([self.gauge, self.timing_fig])
        self.widget = W.VBox([W.HBox([self.status, self.title, self.sentence]), self._plots, self.counterexample,
                              self.error, W.HBox([self.details, self.speedup])])
        self._hide(self._plots, self.counterexample, self.error)

    @staticmethod
    def _hide(*ws):
        for w in ws:
            w.layout.display = "none"

    @staticmethod
    def _unhide(*ws):
        for w in ws:
            w.layout.display = None

    def _set_status(self, status: str):
        self.status.value = status
        self.status.style.text_color = _COLOURS[status]

    def show(self, verdict: Verdict, *, name: str = "", timings: dict[str, float] | None = None,
             speedup: float | None = None) -> None:
        """Show a verdict. ``timings`` (seconds per phase; default ``verdict.timings``) become the bars;
        ``speedup`` is how many times faster the candidate runs than the reference."""
        if not isinstance(verdict, Verdict):
            raise TypeError(f"show() takes a Verdict, got {type(verdict).__name__}")
        if verdict.error is not None:
            self.show_error(verdict.error, name=name)
            self.verdict = verdict
            return
        self.verdict = verdict
        self.title.value = name
        self._set_status("PASS" if verdict.passed else "FAIL")
        self.sentence.value = verdict.sentence
        self.details.value = self._details(verdict)
        self.speedup.value = "" if speedup is None else f"speedup vs reference: {speedup:.3g}×"
        proved = verdict.passed and verdict.exhaustive
        with self.gauge.batch_update():
            ind = self.gauge.data[0]
            ind.value = gauge_value(verdict)
            ind.title.text = "proved" if proved else "−log₁₀ ε"
            ind.mode = "gauge" if proved else "gauge+number"
            ind.gauge.bar.color = _COLOURS["PASS" if verdict.passed else "FAIL"]
        self._set_timings(verdict.timings if timings is None else timings)
        self.counterexample.value = counterexample_html(verdict)
        self.error.value = ""
        self._unhide(self._plots)
        self._hide(self.error)
        (self._unhide if self.counterexample.value else self._hide)(self.counterexample)

    def show_error(self, compile_error: CompileError, *, name: str = "") -> None:
        """Show a compile error: status ERROR, its kind and message, and the line with a caret."""
        if not isinstance(compile_error, CompileError):
            raise TypeError(f"show_error() takes a CompileError, got {type(compile_error).__name__}")
        self.verdict = None
        self.title.value = name
        self._set_status("ERROR")
        self.sentence.value = compile_error.format(caret=False)
        self.details.value = ""
        self.speedup.value = ""
        self.counterexample.value = ""
        self.error.value = error_html(compile_error)
        self._hide(self._plots, self.counterexample)
        self._unhide(self.error)

    def _set_timings(self, timings: dict[str, float]):
        names = [str(k) for k in timings]
        values = [float(v) for v in timings.values()]
        with self.timing_fig.batch_update():
            self.timing_fig.data[0].x = values
            self.timing_fig.data[0].y = names
            self.timing_fig.layout.title.text = f"time: {sum(values) * 1e3:.3g} ms" if values else "time"

    @staticmethod
    def _details(v: Verdict) -> str:
        parts = [f"{v.tests_run:,} tests", f"{v.failures:,} failures", f"dtype {v.dtype}"]
        if v.tests_run:
            parts.append(f"max abs err {v.max_abs_err:.3g}, rel {v.max_rel_err:.3g}, ulp {v.max_ulp_err:.3g}")
        return " · ".join(parts)

    def _ipython_display_(self):
        from IPython.display import display

        display(self.widget)
