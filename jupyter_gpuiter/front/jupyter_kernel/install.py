"""Install the `gpuiter` kernelspec (what `gpuiter install-kernel` runs).

Where it goes is jupyter_client's choice for the flags (`jupyter --paths` lists the folders):
--user: the user's Jupyter data folder; --sys-prefix: this environment's share/jupyter; prefix:
PREFIX/share/jupyter; none: the system-wide folder.

Interpreter in argv: an install into one environment (--sys-prefix, or a prefix that is this
environment's) keeps the wheel's plain "python", which Jupyter resolves to the interpreter of the
server that launches the kernel, as the wheel's copy does. A --user, system-wide or other-prefix
install is seen by Jupyter servers of every environment, so it names this interpreter
(`sys.executable`): the kernel then always starts where jupyter_gpuiter is installed.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from .spec import KERNEL_NAME, RESOURCES, kernel_json


def _same_path(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.abspath(a) == os.path.abspath(b)


def install(user: bool = False, sys_prefix: bool = False, prefix: str | None = None,
            executable: str | None = None) -> str:
    """Install the kernelspec; returns the folder it was written to.

    `executable` overrides argv[0] (default: see the module docstring). Raises ValueError for
    conflicting options and OSError when the folder is not writable.
    """
    from jupyter_client.kernelspec import KernelSpecManager

    if sum((bool(user), bool(sys_prefix), prefix is not None)) > 1:
        raise ValueError("choose at most one of user, sys_prefix and prefix")
    if sys_prefix:
        prefix = sys.prefix
    if executable is None:
        executable = "python" if prefix is not None and _same_path(prefix, sys.prefix) else sys.executable
    with tempfile.TemporaryDirectory(prefix="gpuiter-kernelspec-") as tmp:
        src = Path(tmp) / KERNEL_NAME
        src.mkdir()
        for f in RESOURCES.iterdir():  # contents only: a read-only site-packages must not make the copy read-only
            if f.is_file() and f.name != "kernel.json":
                shutil.copyfile(f, src / f.name)
        (src / "kernel.json").write_text(json.dumps(kernel_json(executable), indent=1) + "\n", encoding="utf-8")
        return KernelSpecManager().install_kernel_spec(str(src), kernel_name=KERNEL_NAME, user=bool(user), prefix=prefix)
