"""The `gpuiter` Jupyter kernel: its spec, its installer, and a real kernel process driven by jupyter_client.

The fixtures and helpers are tests/support/kernel_client.py's.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from jupyter_client.kernelspec import KernelSpecManager

import jupyter_gpuiter
from jupyter_gpuiter.front.jupyter_kernel import install as install_mod
from jupyter_gpuiter.front.jupyter_kernel.spec import KERNEL_NAME, RESOURCES, kernel_json
from tests.support.kernel_client import kernel_info, run_cell, start_kernel, stdout


def expected_device() -> str:
    from jupyter_gpuiter.runtime.device import cuda_available

    return "cuda" if cuda_available() else "cpu"


# -- helpers and fixtures (reused by the %%gpucompile tests) ------------------------------------


# -- the spec and its installation -------------------------------------------------------------

def test_static_kernel_json_is_kernel_json():
    shipped = json.loads((RESOURCES / "kernel.json").read_text(encoding="utf-8"))
    assert shipped == kernel_json()
    assert shipped["argv"][0] == "python"  # no build-time interpreter path in the wheel
    assert shipped["argv"][1:] == ["-m", "jupyter_gpuiter.front.jupyter_kernel", "-f", "{connection_file}"]
    assert shipped["display_name"] == "gpuiter (Python 3)" and shipped["language"] == "python"
    png = (RESOURCES / "logo-64x64.png").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and png[16:24] == (64).to_bytes(4, "big") * 2


def test_wheel_ships_the_spec_as_shared_data(root):
    import tomllib

    with open(root / "pyproject.toml", "rb") as f:
        shared = tomllib.load(f)["tool"]["hatch"]["build"]["targets"]["wheel"]["shared-data"]
    assert shared["jupyter_gpuiter/front/jupyter_kernel/resources"] == "share/jupyter/kernels/gpuiter"
    assert (root / "jupyter_gpuiter/front/jupyter_kernel/resources").resolve() == RESOURCES


def test_install_prefix_and_user(tmp_path, monkeypatch):
    dest = Path(install_mod.install(prefix=str(tmp_path / "env")))
    assert dest == tmp_path / "env" / "share" / "jupyter" / "kernels" / "gpuiter"
    spec = json.loads((dest / "kernel.json").read_text(encoding="utf-8"))
    assert spec == kernel_json(sys.executable)  # another prefix: name this interpreter
    assert (dest / "logo-64x64.png").is_file()
    install_mod.install(prefix=str(tmp_path / "env"))  # reinstalling replaces

    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "home-data"))
    monkeypatch.delenv("JUPYTER_PATH", raising=False)
    monkeypatch.setenv("JUPYTER_PREFER_ENV_PATH", "0")  # the user folder before this environment's
    dest = Path(install_mod.install(user=True))
    assert dest == tmp_path / "home-data" / "kernels" / "gpuiter"
    assert json.loads((dest / "kernel.json").read_text(encoding="utf-8"))["argv"][0] == sys.executable
    assert KernelSpecManager().get_kernel_spec("gpuiter").resource_dir == str(dest)

    with pytest.raises(ValueError):
        install_mod.install(user=True, sys_prefix=True)


def test_install_sys_prefix_keeps_plain_python(tmp_path, monkeypatch):
    monkeypatch.setattr(install_mod.sys, "prefix", str(tmp_path))
    dest = Path(install_mod.install(sys_prefix=True))
    assert dest == tmp_path / "share" / "jupyter" / "kernels" / "gpuiter"
    assert json.loads((dest / "kernel.json").read_text(encoding="utf-8")) == kernel_json()


def test_cli_install_kernel(tmp_path, monkeypatch, capsys):
    from jupyter_gpuiter.tools.cli import main

    assert main(["install-kernel", "--prefix", str(tmp_path)]) == 0
    dest = tmp_path / "share" / "jupyter" / "kernels" / "gpuiter"
    assert str(dest) in capsys.readouterr().out
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "user"))
    assert main(["install-kernel"]) == 0  # --user is the default
    assert str(tmp_path / "user" / "kernels" / "gpuiter") in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["install-kernel", "--user", "--sys-prefix"])


# -- a real kernel process -----------------------------------------------------------------------

def test_kernel_info_reports_gpuiter_and_device(gpuiter_kernel):
    info = kernel_info(gpuiter_kernel)
    assert info["status"] == "ok"
    assert info["implementation"] == "gpuiter"
    assert info["implementation_version"] == jupyter_gpuiter.__version__
    assert info["language_info"]["name"] == "python"
    assert info["language_info"]["file_extension"] == ".py"
    assert "gpuiter" in info["banner"]
    g = info["gpuiter"]
    assert g["version"] == jupyter_gpuiter.__version__
    assert g["device"].split(":")[0] == expected_device()
    assert g["cuda"] is (expected_device() == "cuda")
    assert isinstance(g["session"], bool) and isinstance(g["extension"], bool)


def test_execute_result(execute):
    status, outputs = execute("1 + 1")
    assert status == "ok"
    assert [o["output_type"] for o in outputs] == ["execute_result"]
    assert outputs[0]["data"]["text/plain"] == "2"


def test_errors_and_streams_are_collected(execute):
    status, outputs = execute("print('a'); import sys; print('b', file=sys.stderr); 1 / 0")
    assert status == "error"
    assert stdout(outputs) == "a\n"
    assert any(o["output_type"] == "stream" and o["name"] == "stderr" for o in outputs)
    assert outputs[-1]["output_type"] == "error" and outputs[-1]["ename"] == "ZeroDivisionError"


def test_session_is_preloaded(gpuiter_kernel, execute):
    # The background thread creates the Session without any cell asking for it.
    deadline = time.monotonic() + 30
    while not (g := kernel_info(gpuiter_kernel)["gpuiter"])["session"]:
        assert time.monotonic() < deadline, f"Session not preloaded: {g}"
        time.sleep(0.1)
    assert not [w for w in g["warnings"] if "extension" not in w], g
    status, outputs = execute("import jupyter_gpuiter\nprint(jupyter_gpuiter.current_session().device.type)")
    assert status == "ok", outputs
    assert stdout(outputs) == expected_device() + "\n"
    # and the traditional compiler's tables were built there before the Session, not in the first cell
    status, outputs = execute("import sys\n"
                              "print(list(sys.modules['jupyter_gpuiter.compilers.traditional.batch_lexer']._TABLES))")
    assert status == "ok", outputs
    assert expected_device() in stdout(outputs), outputs


def test_extension_is_preloaded(gpuiter_kernel, execute):
    try:
        from jupyter_gpuiter.front import magic
    except ImportError:
        magic = None
    has_extension = any(hasattr(m, "load_ipython_extension") for m in (jupyter_gpuiter, magic))
    g = kernel_info(gpuiter_kernel)["gpuiter"]
    status, outputs = execute("import json\n"
                              "print(json.dumps([m for m in get_ipython().extension_manager.loaded if 'gpuiter' in m]))")
    assert status == "ok", outputs
    loaded = json.loads(stdout(outputs))
    if has_extension:
        assert g["extension"] and loaded, (g, loaded)
    else:  # the extension is not written yet: the kernel reports it and stays usable
        assert not g["extension"] and not loaded
        assert any("load_ipython_extension" in w for w in g["warnings"]), g


def test_broken_extension_leaves_a_usable_kernel(gpuiter_jupyter_path, tmp_path):
    spec_dir, base = gpuiter_jupyter_path
    (tmp_path / "broken_gpuiter_ext.py").write_text(
        "def load_ipython_extension(ip):\n    raise RuntimeError('boom')\n", encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))}
    extensions = [f"--GpuiterKernel.gpuiter_extensions={m}" for m in ("no_such_gpuiter_ext", "json", "broken_gpuiter_ext")]
    km, kc = start_kernel(spec_dir, base, env=env, extra_arguments=extensions)
    try:
        info = kernel_info(kc)
        g = info["gpuiter"]
        assert g["extension"] is False
        assert "not loaded" in info["banner"]
        (warning,) = g["warnings"]
        assert "no_such_gpuiter_ext: no such module" in warning
        assert "json: no load_ipython_extension" in warning
        assert "broken_gpuiter_ext: RuntimeError: boom" in warning
        status, outputs = run_cell(kc, "1 + 1")
        assert status == "ok" and outputs[0]["data"]["text/plain"] == "2"
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=False)


def test_start_and_clean_shutdown(gpuiter_jupyter_path):
    spec_dir, base = gpuiter_jupyter_path
    km, kc = start_kernel(spec_dir, base)
    try:
        status, outputs = run_cell(kc, "import os; print(os.getpid())")
        assert status == "ok"
        proc = km.provisioner.process
        assert proc.pid == int(stdout(outputs))
        # a kernel that has spawned the compiler's worker processes (its resident pool) still exits cleanly
        # (ipykernel's shutdown signals, one by one, the children in its process group: there must be none)
        cell = ("import psutil\n"
                "from jupyter_gpuiter.compilers import traditional\n"
                "from jupyter_gpuiter.runtime import workers\n"
                "from jupyter_gpuiter import generate\n"
                "def pooled(seed):  # a batch compiled by the workers (their chunks bring literals as text)\n"
                "    chunks, _ = traditional.compile_to_batches(generate.generate_batch(200, seed), workers=2)\n"
                "    return all(c.literals is not None for _, c in chunks)\n"
                "print(pooled(1), sum(os.getpgid(c.pid) == os.getpgrp() for c in psutil.Process().children(True)))")
        status, outputs = run_cell(kc, cell, timeout=120)
        assert status == "ok" and stdout(outputs).split() == ["True", "0"]
        # the notebook's stop button (SIGINT to the kernel's process group) leaves the workers be: the next
        # batch goes to the same ones
        km.interrupt_kernel()
        cell = ("import time; time.sleep(1)\n"
                "pids = [p.pid for p in workers._POOL._procs]\n"
                "print(pooled(2), [p.pid for p in workers._POOL._procs] == pids)")
        status, outputs = run_cell(kc, cell, timeout=120)
        assert status == "ok" and stdout(outputs).split() == ["True", "True"]
        msg_id = kc.shutdown()  # shutdown_request: the kernel answers, then exits by itself
        reply = kc.get_control_msg(timeout=60)
        assert reply["parent_header"]["msg_id"] == msg_id and reply["msg_type"] == "shutdown_reply"
        assert reply["content"]["status"] == "ok"
        try:
            code = proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGUSR1)  # the launcher's faulthandler: thread stacks to the captured stderr
            time.sleep(2)
            pytest.fail("the kernel answered shutdown_request but was still running 60 s later (stacks above)")
        assert code == 0
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
        km.cleanup_resources()
    assert not km.is_alive()


if os.environ.get("GPUITER_KERNEL_TIMING"):  # `GPUITER_KERNEL_TIMING=1 pytest -s tests/front/test_jupyter_kernel.py`
    def test_report_start_time(gpuiter_jupyter_path):
        spec_dir, base = gpuiter_jupyter_path
        for _ in range(3):
            km, kc = start_kernel(spec_dir, base)
            t0 = time.perf_counter()
            while not kernel_info(kc)["gpuiter"]["session"]:
                time.sleep(0.01)
            print(f"\nkernel ready in {km.gpuiter_start_seconds:.2f} s; Session {time.perf_counter() - t0:.2f} s later")
            kc.stop_channels()
            km.shutdown_kernel(now=False)


# -- %%gpucompile in a real gpuiter kernel ---------------------------------------------------------

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def displayed_text(outputs: list[dict]) -> str:
    parts = [o["text"] for o in outputs if o["output_type"] == "stream"]
    parts += [o["data"].get("text/plain", "") for o in outputs if o["output_type"] in ("display_data",
                                                                                        "execute_result")]
    return "\n".join(parts)


def test_gpucompile_cells_in_the_kernel(execute):
    gelu = ("%%gpucompile --tests 2000 --domain x=-6:6\ndef gelu(x):\n    inner = 0.7978845608 * (x + 0.044715 * x ** 3)"
            "\n    return 0.5 * x * (1.0 + tanh(inner))")
    status, outputs = execute(gelu)
    assert status == "ok" and "gelu: PASS" in displayed_text(outputs)
    assert any(WIDGET_VIEW in o.get("data", {}) for o in outputs), "the verification panel is a widget"
    # later cells call the kernel on NumPy and torch
    status, outputs = execute("import numpy as np, torch\nprint(round(float(gelu(np.array([1.0]))[0]), 5))\n"
                              "print(type(gelu(torch.ones(3))).__name__)")
    assert status == "ok" and stdout(outputs).split() == ["0.84119", "Tensor"]


def test_invalid_and_failing_cells_in_the_kernel(execute):
    status, outputs = execute("keep = 7")
    status, outputs = execute("%%gpucompile\ndef f(x):\n    return x + yy")
    text = displayed_text(outputs)
    assert status == "ok" and not any(o["output_type"] == "error" for o in outputs)
    assert "unknown-name at line 2, column 16" in text and "    return x + yy\n               ^" in text
    execute("def twice(x):\n    return 2 * x")
    status, outputs = execute("%%gpucompile wrong --ref twice --tests 3000 --domain x=-4:4\n"
                              "def wrong(x):\n    return x * 2 if x < 3 else x")
    text = displayed_text(outputs)
    assert status == "ok" and "wrong: FAIL" in text and "counterexample" in text
    status, outputs = execute("print(keep, callable(wrong))")
    assert stdout(outputs).split() == ["7", "True"]


def test_exhaustive_cell_in_the_kernel(execute):
    status, outputs = execute("%%gpucompile --dtype float16 --exhaustive --ref python\ndef half(x):\n    return x / 2")
    assert status == "ok" and "proved over all 65,536 inputs" in displayed_text(outputs)


def test_quickstart_notebook_runs_and_stores_the_panels_widget_state(gpuiter_jupyter_path, root):
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(root / "examples" / "quickstart.ipynb", as_version=4)
    client = NotebookClient(nb, kernel_name=KERNEL_NAME, timeout=120, store_widget_state=True,
                            resources={"metadata": {"path": str(root / "examples")}})
    client.execute()
    state = nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    values = [m["state"].get("value", "") for m in state.values() if m["model_name"] in ("LabelModel", "HTMLModel")]
    assert any("with confidence" in v for v in values), "the panel's sentence is in the stored state"
    assert {"PASS", "FAIL", "ERROR"} <= set(values)
    assert any("gpuiter-counterexample" in v for v in values) and any("proved over all 65,536" in v for v in values)
    assert any(m["model_name"] == "AnyModel" for m in state.values()), "plotly FigureWidgets (anywidget)"
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors


EXPECTED_TEXT = {"candidates.ipynb": "candidates verified", "tradeoffs.ipynb": "calibrated fields",
                 "paper.ipynb": "hybrid wrong programs: 0", "rows.ipynb": "stable softmax verified"}  # the paper notebook measures the hybrid's mistakes


@pytest.mark.parametrize("notebook", sorted(EXPECTED_TEXT))
def test_example_notebooks_execute(gpuiter_jupyter_path, root, notebook):
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(root / "examples" / notebook, as_version=4)
    NotebookClient(nb, kernel_name=KERNEL_NAME, timeout=180,
                   resources={"metadata": {"path": str(root / "examples")}}).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert EXPECTED_TEXT[notebook] in text
