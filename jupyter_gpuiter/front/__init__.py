"""The Jupyter front: the %%gpucompile and %gpuiter magics (magic.py), the comm to the JupyterLab panel
(comm.py), the widgets (widgets/) and the `gpuiter` Jupyter kernel (jupyter_kernel/). The front reaches the
rest of the package through the Session (session.py), the package's public face and theory.py only
(docs/architecture.md)."""
