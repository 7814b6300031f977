"""The JupyterLab extension and the widgets in a real browser: JupyterLab on 127.0.0.1, Debian's Chromium
driven by Playwright.

The first test runs examples/quickstart.ipynb in JupyterLab (a fresh server on a free port with a token, the
gpuiter kernelspec from this checkout first on JUPYTER_PATH, a temporary copy of examples/ as its root)
and checks what a person would see: the verification panels (widget DOM and plotly graphs), the compile
error with its caret, the extension's status-bar item with the last verdict and its history panel
listing the cells; then the palette command that inserts the trade-off explorer, and a reload that
restores the history from the kernel. The second runs `gi.verify(...)` in the cells of a new notebook (no
magic) and checks that each verdict reaches the status bar and the history panel all the same: the
Session's events, not the magic, feed the comm. Screenshots go to the test's tmp dir.

Chromium comes from Debian (`make chromium`, run by `make test`); Playwright's own browser download
does not work here. Without /usr/bin/chromium these tests fail rather than skip: deselect them with
`-m "not browser"`.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from jupyter_gpuiter.front.jupyter_kernel import install as install_mod
from tests.support import ROOT

CHROMIUM = os.environ.get("GPUITER_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
SERVER_START = 90  # seconds to wait for the server to answer
KERNEL_IDLE = 120  # ... for the kernel to start (torch import, Session) and be idle
RUN_ALL = 300  # ... for the whole notebook: generous, the 2-core CI machine runs other tests alongside
UI = 60  # ... for a piece of UI to appear
ANSI = re.compile(r"\x1b\[[0-9;]*m")


# -- jupyter labextension list ------------------------------------------------------------------

def test_labextension_is_installed_and_enabled():
    """`make test`'s install builds the extension and JupyterLab lists it as enabled and OK."""
    proc = subprocess.run([sys.executable, "-m", "jupyter", "labextension", "list"], capture_output=True,
                          text=True, timeout=120, check=True)
    out = ANSI.sub("", proc.stdout + proc.stderr)
    line = next((ln for ln in out.splitlines() if "jupyter-gpuiter" in ln), None)
    assert line is not None, f"jupyter-gpuiter is not installed:\n{out}"
    assert "enabled" in line.split() and "OK" in line.split(), line
    assert "(python, jupyter_gpuiter)" in line, line  # install.json: installed by the Python package

    import jupyter_gpuiter

    (path,) = jupyter_gpuiter._jupyter_labextension_paths()
    built = Path(jupyter_gpuiter.__file__).parent / path["src"]
    meta = json.loads((built / "package.json").read_text(encoding="utf-8"))
    assert meta["name"] == path["dest"] == "jupyter-gpuiter"
    assert meta["jupyterlab"]["_build"]["load"].startswith("static/remoteEntry.")
    assert (built / meta["jupyterlab"]["_build"]["load"]).is_file()


# -- a JupyterLab server and a browser ----------------------------------------------------------

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str, timeout: float = 5) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read()


class LabServer:
    def __init__(self, proc: subprocess.Popen, port: int, token: str, root_dir: Path, log: Path):
        self.proc, self.port, self.token, self.root_dir, self.log = proc, port, token, root_dir, log
        self.url = f"http://127.0.0.1:{port}"

    def api(self, path: str, method: str = "GET"):
        req = urllib.request.Request(f"{self.url}/api/{path}", method=method,
                                     headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(req, timeout=10) as r:
            body = r.read()
        return json.loads(body) if body else None

    def log_tail(self, n: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-n:] if self.log.exists() else ""


@pytest.fixture(scope="module")
def lab_server(tmp_path_factory):
    base = tmp_path_factory.mktemp("lab")
    root_dir = base / "examples"
    shutil.copytree(ROOT / "examples", root_dir, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    # no "get notified about Jupyter news?" toast over the notebook
    (base / "config" / "labconfig").mkdir(parents=True)
    (base / "config" / "labconfig" / "page_config.json").write_text(json.dumps(
        {"disabledExtensions": {"@jupyterlab/apputils-extension:announcements": True}}))
    prefix = base / "prefix"
    install_mod.install(prefix=str(prefix))  # the gpuiter kernelspec from this checkout, first on JUPYTER_PATH
    env = {**os.environ,
           "JUPYTER_PATH": str(prefix / "share" / "jupyter"),
           "JUPYTER_CONFIG_DIR": str(base / "config"),  # no user config, settings or workspaces
           "JUPYTER_DATA_DIR": str(base / "data"),
           "JUPYTER_RUNTIME_DIR": str(base / "runtime"),
           "JUPYTERLAB_SETTINGS_DIR": str(base / "settings"),
           "JUPYTERLAB_WORKSPACES_DIR": str(base / "workspaces"),
           "IPYTHONDIR": str(base / "ipython")}
    port, token = _free_port(), secrets.token_hex(16)
    cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
           "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root_dir}",
           "--LabApp.news_url=", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
    if os.getuid() == 0:
        cmd.append("--allow-root")
    log = base / "server.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, cwd=root_dir, env=env, stdout=out, stderr=subprocess.STDOUT)
    server = LabServer(proc, port, token, root_dir, log)
    try:
        deadline = time.monotonic() + SERVER_START
        while True:
            if proc.poll() is not None:
                pytest.fail(f"jupyter lab exited with {proc.returncode}:\n{server.log_tail()}")
            try:
                _get(f"{server.url}/api/status?token={token}")
                break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                if time.monotonic() > deadline:
                    pytest.fail(f"jupyter lab did not answer within {SERVER_START} s:\n{server.log_tail()}")
                time.sleep(0.25)
        yield server
    finally:
        with contextlib.suppress(OSError, ValueError):  # the kernels first, so that none outlives the server
            for k in server.api("kernels") or []:
                server.api(f"kernels/{k['id']}", method="DELETE")
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)


@pytest.fixture(scope="module")
def browser_context(tmp_path_factory):
    if not Path(CHROMIUM).is_file():
        pytest.fail(f"{CHROMIUM} is missing: `make chromium` installs Debian's chromium "
                    "(or deselect these tests with -m 'not browser')")
    from playwright.sync_api import sync_playwright

    profile = tmp_path_factory.mktemp("chromium-profile")  # a fresh user-data-dir
    pw = sync_playwright().start()
    try:
        context = pw.chromium.launch_persistent_context(
            str(profile), executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS,
            viewport={"width": 1600, "height": 1000})
        try:
            yield context
        finally:
            context.close()
    finally:
        pw.stop()


# -- the notebook, step by step -----------------------------------------------------------------

def _code_cells(page):
    return page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-CodeCell")


def _cell_with(page, text: str):
    """The code cell whose input contains `text`."""
    return _code_cells(page).filter(has=page.locator(".jp-InputArea", has_text=text))


def _wait_idle(page, timeout: float):
    page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook-ExecutionIndicator[data-status='idle']") \
        .wait_for(state="attached", timeout=timeout * 1000)


def _shot(page, tmp_path: Path, name: str):
    page.screenshot(path=str(tmp_path / f"{name}.png"), full_page=True)


def _history_rows(page) -> list[dict]:
    """The rows of the history panel as dicts: n (from 1), name, mode, verdict, eps, time."""
    out = []
    for r in page.locator("#jp-gpuiter-history .jp-gpuiter-history-row").all():
        row = {c: r.locator(f".jp-gpuiter-col-{c}").inner_text().strip() for c in ("verdict", "eps", "time")}
        row["n"] = r.get_attribute("data-n")
        row["name"] = r.locator(".jp-gpuiter-history-name").inner_text().strip()
        row["mode"] = r.locator(".jp-gpuiter-history-mode").inner_text().strip()
        assert (r.get_attribute("data-name"), r.get_attribute("data-verdict")) == (row["name"], row["verdict"])
        out.append(row)
    return out


@pytest.mark.browser
def test_quickstart_in_jupyterlab(lab_server, browser_context, tmp_path):
    from playwright.sync_api import expect

    expect.set_options(timeout=UI * 1000)
    page = browser_context.new_page()
    console: list[str] = []
    page.on("console", lambda m: console.append(f"{m.type}: {m.text}"))
    page.on("pageerror", lambda e: console.append(f"pageerror: {e}"))
    try:
        _run_quickstart(page, lab_server, tmp_path)
    except Exception:
        _shot(page, tmp_path, "failure")
        (tmp_path / "console.log").write_text("\n".join(console))
        print(f"screenshots in {tmp_path}\n--- browser console ---\n" + "\n".join(console[-60:]) +
              "\n--- server log ---\n" + lab_server.log_tail())
        raise
    finally:
        page.close()


def _run_quickstart(page, server: LabServer, tmp_path: Path):
    from playwright.sync_api import expect

    page.goto(f"{server.url}/lab/tree/quickstart.ipynb?reset&token={server.token}")
    expect(_code_cells(page).first).to_be_visible(timeout=KERNEL_IDLE * 1000)
    # our extension loaded: its history panel has a tab in the left sidebar
    tab = page.locator(".jp-SideBar .lm-TabBar-tab[data-id='jp-gpuiter-history']")
    expect(tab).to_have_count(1)
    # the kernel of the notebook's kernelspec (gpuiter), started and idle before any key is sent
    expect(page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-KernelName")).to_have_text(
        re.compile("gpuiter"), timeout=KERNEL_IDLE * 1000)
    _wait_idle(page, KERNEL_IDLE)
    _shot(page, tmp_path, "01-opened")

    # Run > Run All Cells
    page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook").click()
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Run All Cells$")).click()
    last = _cell_with(page, "%gpuiter status")
    expect(last.locator(".jp-OutputArea-output")).to_contain_text("cached kernels", timeout=RUN_ALL * 1000)
    _wait_idle(page, UI)
    _shot(page, tmp_path, "02-run-all")
    errors = page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
    tracebacks = [t for t in errors.all_inner_texts() if "Traceback" in t or "Error" in t]
    assert not tracebacks, tracebacks

    # the verification panel of gelu: widget DOM (status, sentence) and the plotly gauge and time bars
    gelu = _cell_with(page, "def gelu(x):")
    expect(gelu).to_have_count(1)
    panel = gelu.locator(".jp-OutputArea-output .widget-vbox").first
    expect(panel).to_be_visible()
    expect(panel.locator(".widget-label", has_text=re.compile(r"^PASS$"))).to_be_visible()
    expect(panel).to_contain_text("with confidence 99.9%")
    plots = panel.locator(".js-plotly-plot")
    expect(plots).to_have_count(2)
    expect(plots.first.locator(".main-svg").first).to_be_visible()
    expect(plots.first.locator(".indicatorlayer")).to_have_count(1)  # the gauge
    expect(plots.nth(1).locator(".barlayer .point")).not_to_have_count(0)  # the time split
    gelu.scroll_into_view_if_needed()
    gelu.screenshot(path=str(tmp_path / "03-gelu-panel.png"))

    # the failing rewrite: FAIL and its counterexample table
    bad = _cell_with(page, "0.044715 * x * x)))")  # (the correct rewrite has `* x * x * x`)
    expect(bad).to_have_count(1)
    expect(bad.locator(".widget-label", has_text=re.compile(r"^FAIL$"))).to_be_visible()
    expect(bad.locator("table.gpuiter-counterexample")).to_contain_text("expected")

    # the compile error, with the offending line and a caret under `y`
    broken = _cell_with(page, "def broken(x):")
    expect(broken.locator(".widget-label", has_text=re.compile(r"^ERROR$"))).to_be_visible()
    err = broken.locator("pre.gpuiter-error")
    expect(err).to_contain_text("unknown-name")
    lines = err.inner_text().splitlines()
    src = next(i for i, ln in enumerate(lines) if "return x + y" in ln)
    caret = lines[src + 1]
    assert caret.strip() == "^" and caret.index("^") == lines[src].index("y"), lines
    broken.scroll_into_view_if_needed()
    broken.screenshot(path=str(tmp_path / "04-compile-error.png"))

    # the status bar: the Session and its last verdict (softsign, proved) with the panel's own sentence
    softsign = _cell_with(page, "def softsign(x):")
    sentence = softsign.locator(".widget-label").filter(has_text="65,536").first.inner_text()
    status = page.locator("#jp-main-statusbar .jp-gpuiter-status")
    expect(status).to_be_visible()
    expect(status.locator(".jp-gpuiter-status-device")).to_have_text(re.compile(r"^gpuiter (cpu|cuda)"))
    expect(status.locator(".jp-gpuiter-status-kernels")).to_have_text(re.compile(r"^\d+ cached kernels?$"))
    expect(status.locator(".jp-gpuiter-status-verdict")).to_have_text("softsign PASS")
    expect(status.locator(".jp-gpuiter-status-sentence")).to_have_text(sentence)
    page.locator("#jp-main-statusbar").screenshot(path=str(tmp_path / "05-statusbar.png"))

    # the history panel lists the cells, in order, with mode, verdict, epsilon and time
    status.click()  # opens the panel
    expect(page.locator("#jp-gpuiter-history")).to_be_visible()
    expected = [("gelu", "PASS"), ("gelu_fast", "FAIL"), ("gelu_fast", "PASS"), ("softsign", "PROVED"),
                ("broken", "ERROR")]
    expect(page.locator("#jp-gpuiter-history .jp-gpuiter-history-row")).to_have_count(len(expected))
    rows = _history_rows(page)
    assert [(r["name"], r["verdict"]) for r in rows] == expected, rows
    for i, r in enumerate(rows, 1):
        assert r["n"] == str(i) and r["mode"] == "auto", r
        assert re.fullmatch(r"[\d.]+ (µs|ms|s)", r["time"]), r
    assert re.fullmatch(r"\d\.\de-\d+", rows[0]["eps"]), rows[0]  # ε of a random-test pass
    assert rows[3]["eps"] == "0"  # exhaustive: proved
    assert rows[1]["eps"] == rows[4]["eps"] == "–"  # no bound for a failure or a compile error
    assert page.locator("#jp-gpuiter-history .jp-gpuiter-history-row").nth(4).get_attribute("title") \
        .startswith("unknown-name at line 2, column 16")
    _shot(page, tmp_path, "06-history")

    # the palette command inserts and runs a trade-off explorer cell below the active one
    _code_cells(page).last.locator(".jp-InputArea-prompt").click()
    before = _code_cells(page).count()
    page.keyboard.press("Control+Shift+C")
    palette = page.locator(".lm-CommandPalette-input")
    expect(palette).to_be_focused()
    palette.fill("gpuiter trade-off")
    expect(page.locator(".lm-CommandPalette-item.lm-mod-active")).to_contain_text("Trade-off Explorer")
    page.keyboard.press("Enter")
    expect(_code_cells(page)).to_have_count(before + 1)
    tradeoffs = _cell_with(page, "%gpuiter tradeoffs")
    expect(tradeoffs).to_have_count(1)
    expect(tradeoffs.locator(".widget-slider").first).to_be_visible(timeout=RUN_ALL * 1000)
    expect(tradeoffs.locator(".js-plotly-plot .main-svg").first).to_be_visible()
    _wait_idle(page, UI)
    tradeoffs.scroll_into_view_if_needed()
    tradeoffs.screenshot(path=str(tmp_path / "07-tradeoffs.png"))

    # a reload attaches to the kernel's open comm and gets the history back (`sync`)
    page.reload()
    expect(_code_cells(page).first).to_be_visible(timeout=KERNEL_IDLE * 1000)
    # the status item shows once the reloaded page's comm has attached and had its `sync` answered
    expect(page.locator("#jp-main-statusbar .jp-gpuiter-status")).to_be_visible(timeout=KERNEL_IDLE * 1000)
    page.locator("#jp-main-statusbar .jp-gpuiter-status").click()  # shows the panel (a tab click would toggle)
    expect(page.locator("#jp-gpuiter-history")).to_be_visible()
    expect(page.locator("#jp-gpuiter-history .jp-gpuiter-history-row")).to_have_count(len(expected))
    assert [(r["name"], r["verdict"]) for r in _history_rows(page)] == expected
    expect(page.locator("#jp-main-statusbar .jp-gpuiter-status-verdict")).to_have_text("softsign PASS")
    _shot(page, tmp_path, "08-reloaded")


# -- gi.verify in a cell: the Session's events reach the panel without the magic -------------------------------

VERIFY_CELLS = [
    ("import jupyter_gpuiter as gi\n"
    "v = gi.verify('def twice(x):\\n    return x * 2\\n', 'def r(x):\\n    return x + x\\n', tests=1000)\n"
    "print('first', v.passed)"),
    ("v = gi.verify('def off(x):\\n    return x * 2 + (x > 1)\\n', 'def r(x):\\n    return x + x\\n', tests=1000)\n"
    "print('second', v.passed)"),
]


def _notebook(path: Path, cells: list[str]) -> None:
    path.write_text(json.dumps({
        "nbformat": 4, "nbformat_minor": 5,
        "metadata": {"kernelspec": {"display_name": "gpuiter (Python 3)", "language": "python", "name": "gpuiter"}},
        "cells": [{"cell_type": "code", "id": f"cell-{i}", "metadata": {}, "execution_count": None, "outputs": [],
                   "source": source} for i, source in enumerate(cells)]}), encoding="utf-8")


@pytest.mark.browser
def test_gi_verify_in_a_cell_updates_the_panel(lab_server, browser_context, tmp_path):
    from playwright.sync_api import expect

    expect.set_options(timeout=UI * 1000)
    _notebook(lab_server.root_dir / "verify_in_a_cell.ipynb", VERIFY_CELLS)
    page = browser_context.new_page()
    console: list[str] = []
    page.on("console", lambda m: console.append(f"{m.type}: {m.text}"))
    page.on("pageerror", lambda e: console.append(f"pageerror: {e}"))
    try:
        page.goto(f"{lab_server.url}/lab/tree/verify_in_a_cell.ipynb?reset&token={lab_server.token}")
        expect(_code_cells(page)).to_have_count(len(VERIFY_CELLS), timeout=KERNEL_IDLE * 1000)
        expect(page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-KernelName")).to_have_text(
            re.compile("gpuiter"), timeout=KERNEL_IDLE * 1000)
        _wait_idle(page, KERNEL_IDLE)

        # the first cell alone (Shift+Enter): its verdict is in the status bar and the history panel
        _code_cells(page).first.locator(".jp-InputArea-editor").click()
        page.keyboard.press("Shift+Enter")
        first = _code_cells(page).first.locator(".jp-OutputArea-output")
        expect(first).to_contain_text("first True", timeout=RUN_ALL * 1000)
        status = page.locator("#jp-main-statusbar .jp-gpuiter-status")
        expect(status.locator(".jp-gpuiter-status-verdict")).to_have_text("twice PASS")
        expect(status.locator(".jp-gpuiter-status-sentence")).to_contain_text("1,000")
        status.click()  # opens the history panel
        rows = page.locator("#jp-gpuiter-history .jp-gpuiter-history-row")
        expect(rows).to_have_count(1)
        assert [(r["name"], r["mode"], r["verdict"]) for r in _history_rows(page)] == [("twice", "auto", "PASS")]
        _shot(page, tmp_path, "01-first-verify")

        # the second (a failing rewrite) adds its row and takes the status bar
        _wait_idle(page, UI)
        _code_cells(page).nth(1).locator(".jp-InputArea-editor").click()  # the panel took the focus
        page.keyboard.press("Shift+Enter")
        expect(_code_cells(page).nth(1).locator(".jp-OutputArea-output")).to_contain_text(
            "second False", timeout=RUN_ALL * 1000)
        expect(rows).to_have_count(2)
        expect(status.locator(".jp-gpuiter-status-verdict")).to_have_text("off FAIL")
        assert [(r["name"], r["verdict"]) for r in _history_rows(page)] == [("twice", "PASS"), ("off", "FAIL")]
        _shot(page, tmp_path, "02-second-verify")
    except Exception:
        _shot(page, tmp_path, "failure")
        print(f"screenshots in {tmp_path}\n--- browser console ---\n" + "\n".join(console[-60:]) +
              "\n--- server log ---\n" + lab_server.log_tail())
        raise
    finally:
        page.close()
