"""binder/: the nearest check to a repo2docker build that runs without Docker.

A fresh virtual environment gets binder/requirements.txt — with its torch line swapped for LOCAL_TORCH (this machine
has the CPU wheel of torch 2.13.0 on disk; PyTorch's CPU index is out of reach and its wheels are large) — then
binder/postBuild runs in the repository root with that environment first on PATH, as repo2docker runs it, and
examples/quickstart.ipynb executes through binder/start in the environment's own `gpuiter` kernel. pip's cache is
reused (nothing passes --no-cache-dir), so a second run downloads nothing.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap

import pytest

LOCAL_TORCH = "torch==2.13.0"  # what the binder torch line becomes here (see the module docstring)
BADGE = re.compile(r"\[!\[Binder\]\(https://mybinder\.org/badge_logo\.svg\)\]\((https://mybinder\.org/v2/gh/"
                   r"([^/]+)/([^/]+)/HEAD\?urlpath=lab/tree/examples/quickstart\.ipynb)\)")


def local_requirements(text: str) -> list[str]:
    """binder/requirements.txt for this machine: index options dropped, the torch pin replaced by LOCAL_TORCH."""
    out = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line or line.startswith(("--extra-index-url", "--index-url", "-i ")):
            continue
        out.append(LOCAL_TORCH if re.match(r"torch\b(?![-_])", line) else line)
    return out


def test_requirements_pin_a_cpu_torch(root):
    text = (root / "binder" / "requirements.txt").read_text()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    assert "--extra-index-url https://download.pytorch.org/whl/cpu" in lines
    torch_lines = [ln for ln in lines if re.match(r"torch\b(?![-_])", ln)]
    assert len(torch_lines) == 1 and re.fullmatch(r"torch==[\d.]+\+cpu", torch_lines[0])
    assert local_requirements(text) == [LOCAL_TORCH]


def test_binder_scripts(root):
    for name in ("postBuild", "start"):
        path = root / "binder" / name
        assert os.access(path, os.X_OK), f"binder/{name} must be executable"
        assert path.read_text().startswith("#!/bin/bash\n")
    assert 'exec "$@"' in (root / "binder" / "start").read_text()
    post = (root / "binder" / "postBuild").read_text()
    assert "set -euo pipefail" in post and "gpuiter install-kernel --sys-prefix" in post
    assert re.search(r'pip install "\.(\[[\w,]+\])?"', post), "postBuild installs the package (non-editable)"


def test_badge(root):
    """The README's Binder badge opens the quickstart in JupyterLab; its owner is the placeholder binder/README.md
    explains."""
    found = BADGE.findall((root / "README.md").read_text())
    assert len(found) == 1
    _, owner, repo = found[0]
    assert (owner, repo) == ("GITHUB_OWNER", "jupyter_gpuiter")
    assert "GITHUB_OWNER" in (root / "binder" / "README.md").read_text()


NOTEBOOK_RUN = textwrap.dedent("""
    import sys
    import nbformat
    from nbclient import NotebookClient
    import jupyter_gpuiter

    assert jupyter_gpuiter.__file__.startswith(sys.prefix), jupyter_gpuiter.__file__  # the installed package
    nb = nbformat.read("quickstart.ipynb", as_version=4)
    NotebookClient(nb, kernel_name=nb.metadata.kernelspec.name, timeout=300, store_widget_state=True,
                   resources={"metadata": {"path": "."}}).execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors, errors
    print("quickstart ok with kernel", nb.metadata.kernelspec.name)
""")


def _run(cmd, **kw):
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, **kw)
    assert proc.returncode == 0, f"{cmd} exited {proc.returncode}\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    return proc


@pytest.mark.slow
def test_binder_environment_runs_the_quickstart(root, tmp_path):
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)])
    bin_ = venv / "bin"
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "JUPYTER_PATH", "JUPYTER_DATA_DIR", "JUPYTER_CONFIG_DIR",
                        "JUPYTER_RUNTIME_DIR", "PIP_NO_CACHE_DIR")}
    # only this environment's kernels and extensions: empty user-level Jupyter folders
    env.update(PATH=f"{bin_}{os.pathsep}{env.get('PATH', '')}", VIRTUAL_ENV=str(venv),
               JUPYTER_DATA_DIR=str(tmp_path / "jupyter-data"), JUPYTER_CONFIG_DIR=str(tmp_path / "jupyter-config"),
               JUPYTER_RUNTIME_DIR=str(tmp_path / "jupyter-runtime"))
    reqs = tmp_path / "requirements.txt"
    reqs.write_text("\n".join(local_requirements((root / "binder" / "requirements.txt").read_text())) + "\n")
    _run([str(bin_ / "python"), "-m", "pip", "install", "-q", "--upgrade", "pip"], env=env)
    _run([str(bin_ / "python"), "-m", "pip", "install", "-r", str(reqs)], env=env)
    post = _run(["bash", str(root / "binder" / "postBuild")], cwd=root, env=env)
    share = venv / "share" / "jupyter"
    assert (share / "kernels" / "gpuiter" / "kernel.json").exists()
    assert "gpuiter" in post.stdout
    if (root / "labextension" / "package.json").exists():  # the package has a JupyterLab extension to ship
        assert (share / "labextensions" / "jupyter-gpuiter" / "package.json").exists(), post.stdout + post.stderr
    _run([str(bin_ / "python"), "-c", "import numba, torch; assert torch.__version__.startswith('2.13.0')"], env=env)
    if "nbclient" not in _run([str(bin_ / "python"), "-m", "pip", "list"], env=env).stdout:
        _run([str(bin_ / "python"), "-m", "pip", "install", "-q", "nbclient"], env=env)
    ran = _run([str(root / "binder" / "start"), str(bin_ / "python"), "-c", NOTEBOOK_RUN], cwd=root / "examples",
               env=env)
    assert "quickstart ok with kernel gpuiter" in ran.stdout


def test_local_requirements_rewrites_only_torch():
    text = "# c\n--extra-index-url https://x/cpu\ntorch==2.9.0+cpu  # cpu\ntorchvision\nnumba\n"
    assert local_requirements(text) == [LOCAL_TORCH, "torchvision", "numba"]

