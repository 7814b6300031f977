"""jupyter_gpuiter: compile, verify and time elementwise GPU kernels from Jupyter, resident on the device."""

# `verify` names both a subpackage and the public function: importing the function binds the name
# after the subpackage has loaded, so the function wins (the Session lives in resident.py, not
# session.py, for the same reason: `jupyter_gpuiter.session` is the function)
from .compilers.result import BatchResult
from .ir import Program, ProgramBatch
from .lang.errors import CompileError
from .resident import Session, compile, compile_batch, session, verify, verify_batch
from .runtime.kernel import Kernel
from .verify import Counterexample, Verdict

__version__ = "0.1.0"
__all__ = ["BatchResult", "CompileError", "Counterexample", "Kernel", "Program", "ProgramBatch", "Session",
           "Verdict", "compile", "compile_batch", "session", "verify", "verify_batch"]


def load_ipython_extension(ip) -> None:
    """`%load_ext jupyter_gpuiter`: registers %%gpucompile and %gpuiter."""
    from .front.magic import load_ipython_extension as load

    load(ip)


def _jupyter_labextension_paths():
    """The JupyterLab extension built from labextension/ (what `jupyter-builder develop` links)."""
    return [{"src": "labextension", "dest": "jupyter-gpuiter"}]
