"""`python -m jupyter_gpuiter.front.jupyter_kernel -f {connection_file}`: launch the gpuiter kernel (what kernel.json runs)."""

import faulthandler
import os
import signal
import sys

if __name__ == "__main__":
    # Like ipykernel_launcher: keep the notebook's folder off sys.path while the kernel machinery is
    # imported (a user file named e.g. zmq.py must not shadow it); IPython's init_path adds it back.
    if sys.path and sys.path[0] in ("", os.getcwd()):
        del sys.path[0]

    # `kill -USR1 <pid>` writes every thread's stack to the kernel's stderr: what a hung kernel is doing.
    if hasattr(signal, "SIGUSR1"):
        faulthandler.register(signal.SIGUSR1, all_threads=True)

    from ipykernel.kernelapp import IPKernelApp

    from jupyter_gpuiter.front.jupyter_kernel.kernel import GpuiterKernel

    IPKernelApp.launch_instance(kernel_class=GpuiterKernel)
