"""The traditional compiler's passes are data-parallel (issue 3): no Python loop over programs, and no host
synchronisation inside the pipeline but lex's one read. Both are checked on CPU tensors by a TorchFunctionMode
that sees every tensor call made from Python: a loop over programs would make more calls for more programs,
and a read or an upload (which cost nothing on a CPU, and a sync each on CUDA) is recorded by name. It also
checks that every gather and scatter indexes by int64, as torch before 2.8 requires."""

import pytest
import torch
from torch.overrides import TorchFunctionMode

from jupyter_gpuiter import generate
from jupyter_gpuiter.compilers import traditional
from jupyter_gpuiter.compilers.traditional.pack import encode
from tests.support.edge_cases import INVALID, VALID

#: calls that hand tensor data to Python, or need it to size their result (on CUDA: a sync each)
READS = {"tolist", "item", "__bool__", "__int__", "__float__", "__index__", "numpy", "cpu", "nonzero", "argwhere",
         "masked_select", "unique", "unique_consecutive", "bincount"}


def _bool_index(args) -> bool:
    index = args[1] if len(args) > 1 else None
    parts = index if isinstance(index, tuple) else (index,)
    return any(isinstance(p, torch.Tensor) and p.dtype == torch.bool for p in parts)


def _moves(args, kwargs) -> bool:
    return "device" in kwargs or any(isinstance(a, (str, torch.device)) for a in args[1:])


class TensorCalls(TorchFunctionMode):
    """Records the tensor calls made from Python under it: how many; the host reads, by name, in order; the
    uploads (tensors made from Python values, or moved to a device), which on CUDA wait for the queued work
    as a read does; and the index dtypes of gathers and scatters."""

    def __init__(self):
        super().__init__()
        self.count = 0
        self.reads: list[str] = []
        self.uploads: list[str] = []
        self.index_dtypes: set = set()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        self.count += 1
        if name in ("tensor", "as_tensor") or name in ("to", "cuda") and _moves(args, kwargs):
            self.uploads.append(name)
        if (name in READS
                or name in ("__getitem__", "__setitem__") and _bool_index(args)  # a mask's count sizes the result
                or name == "where" and len(args) + len(kwargs) == 1
                or name == "repeat_interleave" and "output_size" not in kwargs):
            self.reads.append(name)
        if name.startswith(("gather", "scatter")):
            index = kwargs.get("index", args[2] if len(args) > 2 else None)
            self.index_dtypes.add(index.dtype if isinstance(index, torch.Tensor) else None)
        return func(*args, **kwargs)


@pytest.mark.parametrize("read", [
    lambda x: x.sum().item(), lambda x: bool(x.any()), lambda x: x[x > 2], lambda x: x.nonzero(),
    lambda x: torch.where(x > 1), lambda x: x.tolist(), lambda x: x.cpu(), lambda x: int(x.max()),
    lambda x: x.repeat_interleave(x)])
def test_each_kind_of_host_read_is_recorded(read):
    x = torch.arange(5)
    with TensorCalls() as seen:
        read(x)
    assert seen.reads


@pytest.mark.parametrize("upload", [lambda x: torch.tensor([1, 2]), lambda x: torch.as_tensor(3, device=x.device),
                                    lambda x: x.to("cpu"), lambda x: x.to(device=x.device, dtype=torch.int32)])
def test_each_kind_of_upload_is_recorded(upload):
    x = torch.arange(5)
    with TensorCalls() as seen:
        upload(x)
        x.to(torch.int16)  # a conversion moves nothing
    assert len(seen.uploads) == 1


def _mixed_sources() -> list[bytes]:
    sources = generate.generate_batch(150, 5)
    sources += [m for m, _ in generate.mutate_batch(sources, 6)] + VALID + [s for s, _ in INVALID]
    sources += ["def f(x):\r\n    return x\r\n", "def f(x):\n    return " + "(" * 60 + "x" + ")" * 60 + "\n"]
    return [encode(s) for s in sources]


def test_the_work_from_python_does_not_grow_with_the_programs():
    encoded = _mixed_sources()
    traditional.compile_chunk(encoded, "cpu")  # device tables are built and cached on a first call
    counts = []
    for copies in (1, 4):  # the same chunk shape but for B, and the same maxima that size the loops
        with TensorCalls() as calls:
            chunk = traditional.compile_chunk(encoded * copies, "cpu")
        counts.append(calls.count)
        assert chunk.batch.ops.shape[0] == copies * len(encoded)
    assert counts[0] == counts[1] > 1000


def test_a_chunk_reads_the_device_once():
    encoded = _mixed_sources()
    traditional.compile_chunk(encoded, "cpu")  # device tables are built and cached on a first call
    with TensorCalls() as seen:
        chunk = traditional.compile_chunk(encoded, "cpu")
    assert seen.reads == ["numpy"]  # lex's one read: five maxima that size later arrays and loops, row counts
    assert seen.uploads == ["to", "to"]  # pack's bytes and lengths; tables were uploaded by the first call
    assert chunk.batch.ops.shape[0] == len(encoded)


def test_gathers_and_scatters_index_by_int64():
    """pyproject admits torch >= 2.1; int32 gather and scatter indices came in 2.8 (index_select always took them)."""
    encoded = _mixed_sources()
    with TensorCalls() as seen:
        traditional.compile_chunk(encoded, "cpu")
    assert seen.index_dtypes == {torch.int64}
