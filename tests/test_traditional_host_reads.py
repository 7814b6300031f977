"""The traditional compiler reads the device once per chunk (issue 3: no host synchronisation inside the
pipeline): every Python-level call that would wait for a device and copy data back is recorded by a
TorchFunctionMode, so the check runs on CPU tensors, where such reads cost nothing and go unnoticed."""

import pytest
import torch
from edge_cases import INVALID, VALID
from torch.overrides import TorchFunctionMode

from jupyter_gpuiter.compilers import traditional
from jupyter_gpuiter.compilers.traditional.pack import encode
from jupyter_gpuiter.lang import generate

#: calls that hand tensor data to Python, or need it to size their result (on CUDA: a sync each)
READS = {"tolist", "item", "__bool__", "__int__", "__float__", "__index__", "numpy", "cpu", "nonzero", "argwhere",
         "masked_select", "unique", "unique_consecutive", "bincount"}


def _bool_index(args) -> bool:
    index = args[1] if len(args) > 1 else None
    parts = index if isinstance(index, tuple) else (index,)
    return any(isinstance(p, torch.Tensor) and p.dtype == torch.bool for p in parts)


class HostReads(TorchFunctionMode):
    """Records the host reads made under it, by name, in order."""

    def __init__(self):
        super().__init__()
        self.reads: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if (name in READS
                or name in ("__getitem__", "__setitem__") and _bool_index(args)  # a mask's count sizes the result
                or name == "where" and len(args) + len(kwargs) == 1
                or name == "repeat_interleave" and "output_size" not in kwargs):
            self.reads.append(name)
        return func(*args, **kwargs)


@pytest.mark.parametrize("read", [
    lambda x: x.sum().item(), lambda x: bool(x.any()), lambda x: x[x > 2], lambda x: x.nonzero(),
    lambda x: torch.where(x > 1), lambda x: x.tolist(), lambda x: x.cpu(), lambda x: int(x.max()),
    lambda x: x.repeat_interleave(x)])
def test_each_kind_of_host_read_is_recorded(read):
    x = torch.arange(5)
    with HostReads() as seen:
        read(x)
    assert seen.reads


def test_a_chunk_reads_the_device_once():
    sources = generate.generate_batch(150, 5)
    sources += [m for m, _ in generate.mutate_batch(sources, 6)] + VALID + [s for s, _ in INVALID]
    sources += ["def f(x):\r\n    return x\r\n", "def f(x):\n    return (" * 80 + "x" + ")" * 80 + "\n"]
    encoded = [encode(s) for s in sources]
    traditional.compile_chunk(encoded, "cpu")  # device tables are built and cached on a first call
    with HostReads() as seen:
        chunk = traditional.compile_chunk(encoded, "cpu")
    assert seen.reads == ["tolist"]  # lex's one read of five scalars that size later arrays and loops
    assert chunk.batch.ops.shape[0] == len(sources)
