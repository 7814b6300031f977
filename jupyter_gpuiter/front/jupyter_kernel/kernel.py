"""`GpuiterKernel`: the IPython kernel with jupyter_gpuiter preloaded (docs/jupyter.md).

Start-up costs what a plain IPython kernel costs plus importing the package (`jupyter_gpuiter`'s
`__init__` imports torch, about 1 s on CPU). Nothing else heavy runs before the kernel answers:

- in `__init__` (main thread, before the first request): the IPython extension is loaded, as
  `%load_ext jupyter_gpuiter` would (`GpuiterKernel.gpuiter_extensions`, configurable, lists the
  modules tried in order). A missing or failing extension is logged as a warning and reported in
  kernel_info; the kernel stays usable as a plain IPython kernel.
- in `start()`: the comm is attached (each iteration of the current Session reaches the JupyterLab
  panel, whether a `%%gpucompile` cell or `gi.verify(...)` made it), and a daemon thread runs the
  Session's `warm_up()`: it detects the device and, with CUDA, creates the CUDA context (the slow part
  on a GPU machine), builds the traditional compiler's tables there and loads the fused evaluator; it
  then schedules the creation of the Session (`jupyter_gpuiter.current_session()`, with the neural model
  loaded on its device) on the kernel's main loop, so the Session is only ever created on the thread
  that runs cells. A cell that needs it before that simply creates it itself.

kernel_info_reply: IPython's reply unchanged (`language_info` included) plus one top-level field,
``content["gpuiter"]`` (`gpuiter_info()`)::

    {"version": "0.1.0",        # jupyter_gpuiter.__version__
     "device": "cpu",           # the Session's device, or the one it will pick ("cuda" / "cpu")
     "cuda": false,             # a CUDA device is usable by torch
     "device_name": null,       # e.g. "NVIDIA H200" once the background thread has asked CUDA
     "session": false,          # the Session exists (preloading finished, or a cell created it)
     "extension": true,         # the IPython extension (%%gpucompile, %gpuiter) is loaded
     "warnings": []}            # why the extension or the preloading failed, if they did
"""

from __future__ import annotations

import sys
import threading
import time

from ipykernel.ipkernel import IPythonKernel
from traitlets import List, Unicode

from ... import __version__
from ...session import cuda_available as _detect_cuda
from ...session import warm_up
from .. import comm

_cuda_lock = threading.Lock()
_cuda: bool | None = None


def cuda_available() -> bool:
    """Whether torch sees a usable CUDA device; cached, thread-safe, never raises."""
    global _cuda
    with _cuda_lock:
        if _cuda is None:
            try:
                _cuda = bool(_detect_cuda())
            except Exception:  # noqa: BLE001 - a broken CUDA/torch install means "no CUDA", not a dead kernel
                _cuda = False
        return _cuda


def existing_session():
    """The Session if one exists, without creating it (None otherwise)."""
    module = sys.modules.get("jupyter_gpuiter.session")
    return getattr(module, "_current", None)


class GpuiterKernel(IPythonKernel):
    """IPython kernel with the jupyter_gpuiter extension loaded and the Session created in the background."""

    implementation = "gpuiter"
    implementation_version = __version__

    gpuiter_extensions = List(
        Unicode(), default_value=["jupyter_gpuiter", "jupyter_gpuiter.front.magic"],
        help="Modules tried in order for load_ipython_extension; the first that loads wins.",
    ).tag(config=True)

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.gpuiter_warnings: list[str] = []
        self.gpuiter_extension: str | None = None  # the module whose load_ipython_extension ran
        self.gpuiter_device_name: str | None = None
        self.gpuiter_preload_seconds: float | None = None  # set when the background thread is done
        self._preload_thread: threading.Thread | None = None
        self._load_extension()

    # -- start-up -----------------------------------------------------------------------------

    def _warn(self, message: str) -> None:
        self.gpuiter_warnings.append(message)
        self.log.warning("gpuiter kernel: %s", message)

    def _load_extension(self) -> None:
        manager = getattr(self.shell, "extension_manager", None)
        if manager is None:
            self._warn("no IPython shell; the jupyter_gpuiter extension is not loaded")
            return
        tried = []
        for name in self.gpuiter_extensions:
            try:
                result = manager.load_extension(name)
            except ModuleNotFoundError as e:
                if e.name is None or not (e.name == name or name.startswith(e.name + ".")):
                    tried.append(f"{name}: {type(e).__name__}: {e}")  # a module the extension imports
                    break
                tried.append(f"{name}: no such module")
                continue
            except Exception as e:  # noqa: BLE001 - any failure leaves a usable IPython kernel
                tried.append(f"{name}: {type(e).__name__}: {e}")
                break
            if result in (None, "already loaded"):
                self.gpuiter_extension = name
                return
            tried.append(f"{name}: no load_ipython_extension")
        self._warn("the IPython extension is not loaded, %%gpucompile and %gpuiter are not available ("
                   + "; ".join(tried) + ")")

    def start(self):
        super().start()
        comm.attach()
        loop = self.io_loop
        self._preload_thread = threading.Thread(
            target=self._preload, args=(loop,), name="gpuiter-preload", daemon=True)
        self._preload_thread.start()

    def _preload(self, loop) -> None:
        """Background thread: the Session's warm-up (the device, CUDA's context, the traditional compiler's
        tables there, the fused evaluator), then have the main loop create the Session."""
        t0 = time.perf_counter()
        try:
            report = warm_up(None if cuda_available() else "cpu")
            self.gpuiter_device_name = report.device_name
            for warning in report.warnings:
                self._warn(warning)
        except Exception as e:  # noqa: BLE001 - warm_up reports its failures; this is for anything else
            self._warn(f"warming up failed: {type(e).__name__}: {e}")
        finally:
            try:
                loop.add_callback(self._create_session, t0)
            except Exception as e:  # noqa: BLE001 - a loop already closed at shutdown
                self.log.debug("gpuiter kernel: cannot schedule the Session: %s", e)

    def _create_session(self, t0: float) -> None:
        try:
            import jupyter_gpuiter

            jupyter_gpuiter.current_session().neural_model()  # the model too, so a first hybrid cell does not wait
        except Exception as e:  # noqa: BLE001
            self._warn(f"creating the Session failed: {type(e).__name__}: {e}")
        self.gpuiter_preload_seconds = time.perf_counter() - t0
        self.log.debug("gpuiter kernel: preloaded in %.3f s", self.gpuiter_preload_seconds)

    # -- kernel_info ----------------------------------------------------------------------------

    def gpuiter_info(self) -> dict:
        """The ``gpuiter`` field of kernel_info_reply (see the module docstring); never raises."""
        info = {"version": __version__, "device": "cpu", "cuda": False, "device_name": None,
                "session": False, "extension": self.gpuiter_extension is not None,
                "warnings": list(self.gpuiter_warnings)}
        try:
            cuda = cuda_available()
            session = existing_session()
            info["cuda"] = cuda
            info["session"] = session is not None
            info["device"] = str(session.device) if session is not None else ("cuda" if cuda else "cpu")
            if info["device"].startswith("cuda"):
                info["device_name"] = self.gpuiter_device_name
        except Exception as e:  # noqa: BLE001
            info["warnings"].append(f"device query failed: {type(e).__name__}: {e}")
        return info

    @property
    def kernel_info(self):
        info = super().kernel_info
        info["gpuiter"] = self.gpuiter_info()
        return info

    @property
    def banner(self):
        base = super().banner or ""
        if self.gpuiter_extension is not None:
            extra = "%%gpucompile and %gpuiter are loaded; "
        else:
            extra = "the jupyter_gpuiter extension is not loaded (see the kernel log); "
        return f"{base}gpuiter {__version__} kernel: {extra}jupyter_gpuiter.current_session() is the resident Session.\n"
