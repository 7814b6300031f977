"""The IR: canonical text, ProgramBatch packing, determinism."""

import pytest
import torch

from jupyter_gpuiter import CompileError, ProgramBatch, compile_batch
from jupyter_gpuiter.compilers.serial import compile_source
from jupyter_gpuiter.ir import canonical

SOURCES = [
    "def f(x):\n    return 0.5 * x * (1.0 + tanh(x))\n",
    "def g(a, b):\n    c = a if a > b else b\n    return c > 0\n",
    "def h(x):\n    return y\n",
]


def test_canonical_text_is_deterministic_and_parseable_line_by_line():
    texts = [compile_batch(SOURCES, mode="serial").canonical() for _ in range(2)]
    assert texts[0] == texts[1]
    assert texts[0][2] == "error unknown-name 2:12"
    lines = texts[0][0].splitlines()
    assert lines[0] == "%0 = param 0" and lines[-1].startswith("ret %")
    for i, line in enumerate(lines[:-1]):
        assert line.startswith(f"%{i} = ")


def test_program_batch_round_trip():
    results = [compile_source(s) if i < 2 else CompileError("unknown-name", 2, 12, "m") for i, s in enumerate(SOURCES)]
    batch = ProgramBatch.from_results(results)
    assert batch.ops.shape[0] == 3 and batch.ops.dtype == torch.int32
    assert batch.error[2].tolist() == [2, 2, 12] and batch.error[:2].abs().sum() == 0
    back = batch.to_results()
    assert [canonical(r) for r in back] == [canonical(r) for r in results]


def test_a_trimmed_batch_drops_only_padding():
    results = [compile_source(s) for s in SOURCES[:2]] + [CompileError("unknown-name", 2, 12, "m")]
    batch = ProgramBatch.from_results(results)
    wide = ProgramBatch(torch.cat([batch.ops, torch.full((3, 5), -1, dtype=torch.int32)], 1),
                        torch.cat([batch.args, torch.full((3, 5, 3), -1, dtype=torch.int32)], 1),
                        torch.cat([batch.imm, torch.zeros((3, 5), dtype=torch.float64)], 1),
                        batch.lengths, batch.n_params, batch.error, batch.messages)
    cut = wide.trimmed()
    assert cut.ops.shape[1] == int(batch.lengths.max()) == batch.ops.shape[1] < wide.ops.shape[1]
    assert torch.equal(cut.ops, batch.ops) and torch.equal(cut.args, batch.args) and torch.equal(cut.imm, batch.imm)
    assert [canonical(r) for r in cut.to_results()] == [canonical(r) for r in results]
    invalid = ProgramBatch.from_results([CompileError("syntax", 1, 1, "m")])
    assert invalid.trimmed().ops.shape == (1, 1)


def test_types_follow_python():
    p = compile_source("def f(a, b):\n    return (a > b) and (b > 0)\n")
    assert p.returns_bool()
    p = compile_source("def f(a, b):\n    return (a > b) and b\n")
    assert not p.returns_bool()


def test_every_mode_returns_its_device_batch_in_order():
    sources = SOURCES + ["x" * 9000]
    for mode in ("serial", "traditional"):
        res = compile_batch(sources, mode=mode)
        assert [canonical(r) for r in res.batch.to_results()] == res.canonical(), mode


def test_objects_unpacked_with_the_collector_paused_leave_the_young_generation_unscanned():
    import gc

    from jupyter_gpuiter import ir
    from jupyter_gpuiter.ir import gc_paused

    if not ir._SPLICING_FREEZE:
        pytest.skip("the move is made on GIL builds before CPython 3.14 only")
    assert gc.isenabled() and gc.get_freeze_count() == 0
    with gc_paused():
        assert not gc.isenabled()
        made = [[i] for i in range(1000)]
    assert gc.isenabled()
    oldest = {id(o) for o in gc.get_objects(generation=2)}
    assert id(made) in oldest and all(id(x) in oldest for x in made)  # moved there, not left to a young collection
    assert gc.get_freeze_count() == 0  # and none left frozen


def test_the_collector_pause_leaves_a_process_s_own_frozen_objects_frozen():
    import gc

    from jupyter_gpuiter.ir import gc_paused

    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        assert frozen > 0
        with gc_paused():
            [[1] for _ in range(10)]
        assert gc.isenabled() and gc.get_freeze_count() == frozen  # not thawed
    finally:
        gc.unfreeze()
