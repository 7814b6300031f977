"""jupyter_gpuiter: compile, verify and time elementwise GPU kernels from Jupyter, resident on the device."""

from .compilers.result import BatchResult
from .ir import Program, ProgramBatch
from .lang.errors import CompileError
from .runtime.kernel import Kernel
from .session import compile, compile_batch

__version__ = "0.1.0"
__all__ = ["BatchResult", "CompileError", "Kernel", "Program", "ProgramBatch", "compile", "compile_batch"]
