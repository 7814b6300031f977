"""%%gpucompile and %gpuiter: compile a cell, verify it on the device, show the verdict in place.

Options are declared with `magic_arguments`, so `%%gpucompile?` shows them. Bad options raise
UsageError (one line); compile errors show the offending line with a caret; nothing here leaves the
user namespace or the Session half-changed. The cell is compiled and verified by the current Session,
whose events reach the JupyterLab panel through the comm (comm.py): nothing here sends a message or
keeps a time of its own.
"""

from __future__ import annotations

import time

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring
from IPython.display import display

from .. import DEFAULT_MODE, DTYPES, CompileError, Kernel, modes, tests_needed
from ..session import current_session
from . import comm


def _has_widgets() -> bool:
    try:
        from ipykernel.kernelbase import Kernel as IPyKernel

        return IPyKernel.initialized()
    except ImportError:
        return False


PROGRESS_FROM = 1 << 20  # tests; smaller verifications finish before a bar would be seen


class _ProgressBar:
    """An ipywidgets progress bar fed by verify's per-chunk callback."""

    def __init__(self, total: int):
        import ipywidgets as widgets

        self.bar = widgets.IntProgress(value=0, min=0, max=total, description="verifying")
        display(self.bar)

    def __call__(self, done: int, total: int) -> None:
        self.bar.max, self.bar.value = total, done

    def close(self) -> None:
        self.bar.close()


def _progress_bar(total: int):
    return _ProgressBar(total) if total >= PROGRESS_FROM and _has_widgets() else None


def _display_panel(text: str, fill) -> None:
    """The verification panel in a kernel (with `text` as its plain-text form, for terminals, nbclient and
    tests); the text alone elsewhere."""
    if _has_widgets():
        try:
            from .widgets.panel import VerificationPanel

            panel = VerificationPanel()
            fill(panel)
            bundle = panel.widget._repr_mimebundle_()
            display({**bundle, "text/plain": text}, raw=True)
            return
        except ImportError:
            pass
    print(text)


_MODES = modes()


def _row_lengths(text: str) -> tuple[int, ...]:
    """--rows 1,7,33,1000 as a tuple of positive ints, or a UsageError saying what is wrong."""
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts or not all(p.isascii() and p.isdigit() and int(p) > 0 for p in parts):  # not "²": int() refuses it
        raise UsageError(f"--rows {text}: give row lengths as positive whole numbers separated by commas, "
                         "e.g. --rows 1,7,33,1000")
    return tuple(int(p) for p in parts)


@magics_class
class GpuiterMagics(Magics):
    @magic_arguments()
    @argument("name", nargs="?", help="Name to bind the compiled Kernel to (default: the function's name).")
    @argument("--mode", default=DEFAULT_MODE, choices=list(_MODES),
              help=f"Compiler: {', '.join(_MODES)} ({DEFAULT_MODE}, the default: the fastest correct one).")
    @argument("--ref", default=None, help="Reference: the NAME of a Kernel or NumPy callable in the namespace, "
              "'python' (the cell run by CPython), or 'float64' (the cell compiled in float64; the default).")
    @argument("--tests", type=int, default=None, help="Number of random tests (default: enough for --eps).")
    @argument("--delta", type=float, default=1e-3, help="Risk: the bound holds with confidence 1 - delta.")
    @argument("--eps", type=float, default=1e-3, help="Failure-rate bound to certify when --tests is not given.")
    @argument("--dtype", default="float32", choices=list(DTYPES), help=f"Kernel dtype: {', '.join(DTYPES)}.")
    @argument("--domain", nargs="+", default=None, help="Input domains, e.g. x=-5:5 y=1e-3:1e3:log.")
    @argument("--rows", default=None, help="Row lengths to test a row kernel on, e.g. 1,7,33,1000 (default: "
              "1, 2, 3, 7, 31, 32, 33, 127, 128, 129 and 1000).")
    @argument("--candidates", type=int, default=None, help="Neural candidates k tried per program (--mode hybrid; "
              "default 4).")
    @argument("--model", default=None, help="A local neural checkpoint for --mode neural/hybrid (default: shipped).")
    @argument("--exhaustive", action="store_true", help="Check all 65,536 float16/bfloat16 inputs: a proof.")
    @argument("--bench", action="store_true", help="Also time the kernel against the reference.")
    @argument("--quiet", action="store_true", help="Define the kernel and verify, without the panel.")
    @argument("--no-verify", action="store_true", help="Only compile and define the kernel.")
    @cell_magic
    def gpucompile(self, line: str, cell: str):
        """Compile the function in this cell, verify it on the device against a reference, show the verdict.

        The cell holds one kernel-language function (docs/language.md). It is compiled with --mode,
        bound in the namespace as a callable Kernel (NumPy in, NumPy out; torch in, torch out), and
        checked against the reference on device-resident inputs with a confidence bound.
        """
        args = parse_argstring(self.gpucompile, line)
        if args.tests is not None and args.tests < 1:
            raise UsageError("--tests must be at least 1")
        if not 0 < args.delta < 1 or not 0 < args.eps < 1:
            raise UsageError("--delta and --eps must be between 0 and 1")
        if args.name is not None and not args.name.isidentifier():
            raise UsageError(f"{args.name!r} is not a valid Python name")
        options = self._mode_options(args)
        rows = {} if args.rows is None else {"row_lengths": _row_lengths(args.rows)}
        sess = current_session()
        try:
            kernel = sess.compile(cell, mode=args.mode, dtype=args.dtype, name=args.name, **options)
        except CompileError as e:
            self._show_error(e, args.quiet)
            return
        name = args.name or kernel.name
        self.shell.user_ns[name] = kernel
        if args.no_verify:
            return
        reference = self._reference(args, cell)
        tests = None if args.exhaustive else args.tests if args.tests is not None else tests_needed(args.eps, args.delta)
        bar = _progress_bar(65536 if args.exhaustive else tests)
        try:
            verdict = sess.verify(kernel, reference, name=name, tests=tests, delta=args.delta, dtype=args.dtype,
                                  domain=args.domain, exhaustive=args.exhaustive, progress=bar, **rows)
        except KeyboardInterrupt:
            print(f"{name}: verification interrupted; the kernel is defined, the session is intact")
            return
        except ValueError as e:
            raise UsageError(str(e)) from None
        finally:
            if bar is not None:
                bar.close()
        seconds = sess.history[-1].seconds  # the verify's iteration: its candidate's compile, then each phase
        speedup = self._speedup(kernel, reference) if args.bench else None
        if args.quiet:
            return
        self._show(name, verdict, seconds, speedup)
        return

    @staticmethod
    def _mode_options(args) -> dict:
        options = {}
        takes = _MODES[args.mode].options
        if args.candidates is not None:
            if "k" not in takes:
                raise UsageError("--candidates needs --mode hybrid (neural alone returns its greedy candidate)")
            if args.candidates < 1:
                raise UsageError("--candidates must be at least 1")
            options["k"] = args.candidates
        if args.model is not None:
            if "model_path" not in takes:
                raise UsageError("--model needs --mode neural or hybrid")
            options["model_path"] = args.model
        return options

    def _reference(self, args, cell: str):
        ref = args.ref or ("python" if args.dtype == "float64" else "float64")
        if ref in ("python", "float64"):  # float64: a model-written program is checked against a compiler's
            return current_session().reference(cell, ref, mode=args.mode)
        if ref not in self.shell.user_ns:
            raise UsageError(f"--ref {ref}: no such name in the namespace (use a Kernel, a NumPy callable, "
                             "'python' or 'float64')")
        value = self.shell.user_ns[ref]
        if not callable(value):
            raise UsageError(f"--ref {ref}: {type(value).__name__} is not a Kernel or a callable")
        return value

    def _speedup(self, kernel: Kernel, reference) -> float | None:
        import numpy as np

        shape = (1 << 10, 1 << 10) if kernel.program.reduces else (1 << 20,)  # a row kernel: 1,024 rows
        x = [np.linspace(-3, 3, 1 << 20, dtype=np.float32).reshape(shape) for _ in kernel.params]

        def best(fn):  # warm-up, then the best of three
            fn(*x)
            times = []
            for _ in range(3):
                t0 = time.perf_counter()
                fn(*x)
                times.append(time.perf_counter() - t0)
            return min(times)

        t_kernel = best(kernel)
        return best(reference) / t_kernel if t_kernel > 0 else None

    def _show(self, name, verdict, seconds, speedup):
        lines = [f"{name}: {'PASS' if verdict.passed else 'FAIL'}: {verdict.sentence}"]
        if verdict.counterexample is not None:
            lines.append(f"  counterexample: {verdict.counterexample}")
        if speedup is not None:
            lines.append(f"  speedup vs reference: {speedup:.1f}x")
        _display_panel("\n".join(lines), lambda panel: panel.show(verdict, name=name, timings=seconds,
                                                                   speedup=speedup))

    def _show_error(self, error: CompileError, quiet: bool):
        text = error.format()
        if quiet:
            print(text)
        else:
            _display_panel(text, lambda panel: panel.show_error(error))

    @line_magic
    def gpuiter(self, line: str):
        """%gpuiter status | tradeoffs | history | device cpu|cuda"""
        words = line.split()
        if not words or words[0] not in ("status", "tradeoffs", "history", "device"):
            raise UsageError("usage: %gpuiter status | tradeoffs | history | device cpu|cuda")
        sess = current_session()
        if words[0] == "status":
            status = sess.status()
            comm.send_status()
            print(f"device {status['device']}, {status['cached_kernels']} cached kernels, {status['iterations']} "
                  f"iterations, input pools {status['pool_bytes'] / 2**20:.1f} MiB, {status['compile_workers']} "
                  "compile worker processes")
            return
        if words[0] == "device":
            if len(words) != 2 or words[1] not in ("cpu", "cuda"):
                raise UsageError("usage: %gpuiter device cpu|cuda")
            try:
                sess.set_device(words[1])
            except ValueError as e:
                raise UsageError(str(e)) from None
            print(f"device {sess.device}")
            return
        if words[0] == "history":
            from .widgets.history import HistoryPlot

            display(HistoryPlot(sess).widget)
            return
        from .widgets.tradeoffs import TradeoffExplorer

        display(TradeoffExplorer.from_session(sess).widget)
        return


def load_ipython_extension(ip) -> None:
    """`%load_ext jupyter_gpuiter`: register the magics and forward the current Session's iterations to the
    JupyterLab panel (the Session is created on first use)."""
    ip.register_magics(GpuiterMagics)
    comm.attach()
