"""`python -m jupyter_gpuiter.kernel -f {connection_file}`: launch the gpuiter kernel (what kernel.json runs)."""

import os
import sys

if __name__ == "__main__":
    # Like ipykernel_launcher: keep the notebook's folder off sys.path while the kernel machinery is
    # imported (a user file named e.g. zmq.py must not shadow it); IPython's init_path adds it back.
    if sys.path and sys.path[0] in ("", os.getcwd()):
        del sys.path[0]

    from ipykernel.kernelapp import IPKernelApp

    from jupyter_gpuiter.kernel.kernel import GpuiterKernel

    IPKernelApp.launch_instance(kernel_class=GpuiterKernel)
