"""jupyter_gpuiter: compile, verify and time elementwise GPU kernels from Jupyter, resident on the device."""

from .compilers.result import BatchResult
from .ir import Program, ProgramBatch
from .lang.errors import CompileError
from .runtime.kernel import Kernel
from .session import (
    DEFAULT_MODE,
    DTYPES,
    Iteration,
    Session,
    compile,
    compile_batch,
    current_session,
    modes,
    verify,
    verify_batch,
)
from .verification import Counterexample, Verdict
from .verification.confidence import epsilon_bound, format_count, format_rate, tests_needed

__version__ = "0.1.0"
__all__ = ["DEFAULT_MODE", "DTYPES", "BatchResult", "CompileError", "Counterexample", "Iteration", "Kernel", "Program",
           "ProgramBatch", "Session", "Verdict", "compile", "compile_batch", "current_session", "epsilon_bound",
           "format_count", "format_rate", "modes", "tests_needed", "verify", "verify_batch"]


def load_ipython_extension(ip) -> None:
    """`%load_ext jupyter_gpuiter`: registers %%gpucompile and %gpuiter."""
    from .front.magic import load_ipython_extension as load

    load(ip)


def _jupyter_labextension_paths():
    """The JupyterLab extension built from labextension/ (what `jupyter-builder develop` links)."""
    return [{"src": "labextension", "dest": "jupyter-gpuiter"}]
