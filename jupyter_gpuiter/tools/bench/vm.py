"""`gpuiter bench vm`: node-evaluations per second of the evaluators, for one kernel and for a batch.

One 30-node kernel on `n_inputs` inputs: the fused tile evaluator (what `Kernel.__call__` runs on CPU arrays)
against the rendered torch ops. `n_candidates` candidates of it (constants perturbed) on `n_inputs / 100`
inputs: the fused evaluator alone, the fused evaluate-and-compare of verification, and the batched torch-op
VM, measured in alternating rounds. On CUDA the fused evaluator's CUDA form (runtime/fused_cuda.py, with CuPy)
runs instead of the CPU one, for the 30-node kernel.

Row kernels beside them (softmax, layernorm: docs/language.md, "Row kernels"): one kernel on `n_inputs`
inputs as rows of `row_length` (1,000 rows of 1,000), the fused evaluator (row mode) against the rendered
torch ops; `n_candidates` candidates of it (constants perturbed) on `n_inputs / 100` inputs (10 rows): fused
evaluate, fused evaluate-and-compare counting rows, and the torch-op VM on rows.
"""

from __future__ import annotations

import numpy as np
import torch

from ...compilers import compile_batch
from ...ir import ProgramBatch
from ...runtime import fused, fused_cuda, vm
from ...runtime.device import resolve
from ...runtime.render import torch_function
from .common import alternating, machine, write_json
from .sample_sources import NODES30

#: row kernels timed beside the elementwise one: name -> (source, the literal perturbed per candidate)
ROW_KERNELS = {
    "softmax": ("def softmax(x):\n    e = exp(x - max(x))\n    return e / sum(e)\n", None),
    "layernorm": (("def layernorm(x, gamma, beta):\n    mu = mean(x)\n    var = mean((x - mu) ** 2)\n"
                   "    return (x - mu) / sqrt(var + 1e-05) * gamma + beta\n"), "1e-05"),
}


def _row_kernel(name: str, source: str, literal: str | None, dev, n_inputs: int, row_length: int,
                n_candidates: int, repeats: int, sync) -> dict:
    """One row kernel: one kernel on n_inputs as rows of row_length, and n_candidates candidates on n_inputs / 100."""
    cpu = dev.type == "cpu"
    prog = compile_batch([source], mode="serial")[0]
    n_rows = n_inputs // row_length
    m = n_rows * row_length
    gen = torch.Generator(dev).manual_seed(1)
    x = torch.randn(prog.n_params, m, device=dev, generator=gen)
    fn = torch_function(prog, "float32")
    rows = [t.view(n_rows, row_length) for t in x]
    single = {"torch_ops": lambda: fn(*rows)}
    if cpu:
        one = fused.ProgramArrays.from_programs([prog])
        x_np = x.numpy()
        single["fused"] = lambda: fused.evaluate(one, x_np, row=row_length)
    for f in single.values():
        f()
    single_t = alternating(single, repeats, sync)
    # candidates: the literal perturbed (softmax has none: a tiny constant added to its result instead)
    if literal is None:
        cands = [source.replace("return e / sum(e)", f"return e / sum(e) + {i * 1e-9:.9g}") for i in range(n_candidates)]
    else:
        cands = [source.replace(literal, f"{float(literal) * (1 + i * 1e-4):.9g}") for i in range(n_candidates)]
    compiled = compile_batch(cands, mode="serial")
    batch = ProgramBatch.from_results(list(compiled.results), device=dev)
    sched = vm.schedule(batch)
    xs = x[:, : max(row_length, (m // 100) // row_length * row_length)]
    many = {"torch_op_vm": lambda: vm.run(batch, xs, sched=sched, row=row_length)}
    if cpu:
        arrays = fused.ProgramArrays.from_programs(list(compiled.results))
        xs_np = np.ascontiguousarray(xs.numpy())
        want = fused.evaluate(one, xs_np, row=row_length)[0]
        many["fused"] = lambda: fused.evaluate(arrays, xs_np, row=row_length)
        many["fused_compare"] = lambda: fused.compare(arrays, xs_np, want, "float32", 1e-4, 1e-5, row=row_length)
    for f in many.values():
        f()
    many_t = alternating(many, repeats, sync)
    single_rate = {k: prog.n_nodes * m / v[0] for k, v in single_t.items()}
    batch_rate = {k: sched.n_nodes * xs.shape[1] / v[0] for k, v in many_t.items()}
    report = {"nodes": prog.n_nodes, "row_length": row_length,
              "single_kernel": {"inputs": m, "rows": n_rows, "seconds": {k: v[0] for k, v in single_t.items()},
                                "node_evals_per_s": single_rate},
              "batch": {"candidates": n_candidates, "inputs": xs.shape[1], "rows": xs.shape[1] // row_length,
                        "seconds": {k: v[0] for k, v in many_t.items()}, "node_evals_per_s": batch_rate}}
    print(f"  row kernel {name} ({prog.n_nodes} nodes), rows of {row_length:,}:")
    for k, r in single_rate.items():
        print(f"    one kernel x {n_rows:,} rows, {k:14s} {single_t[k][0] * 1e3:8.1f} ms  {r:10.3g} node-evals/s")
    for k, r in batch_rate.items():
        print(f"    {n_candidates:,} candidates x {xs.shape[1] // row_length:,} rows, {k:14s} "
              f"{many_t[k][0] * 1e3:8.1f} ms  {r:10.3g} node-evals/s")
    return report


def run(device=None, n_inputs: int = 1_000_000, n_candidates: int = 1000, repeats: int = 3,
        json_path: str | None = None, row_length: int = 1000) -> dict:
    dev = resolve(device)
    cpu = dev.type == "cpu"

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)

    compiled = compile_batch([NODES30], mode="traditional", device=dev)
    prog = compiled[0]
    fn = torch_function(prog, "float32")
    x = torch.randn(1, n_inputs, device=dev, generator=torch.Generator(dev).manual_seed(0))
    single = {"torch_ops": lambda: fn(x[0])}
    one = fused.ProgramArrays.from_batch(compiled.batch)
    on_gpu = not cpu and fused_cuda.available()
    if cpu:
        x_np = x.numpy()
        single["fused"] = lambda: fused.evaluate(one, x_np)
    elif on_gpu:
        single["fused_cuda"] = lambda: fused_cuda.evaluate(one, x, "float32")
    for f in single.values():
        f()
    single_t = alternating(single, repeats, sync)
    # many candidates of one kernel (the AI-loop shape): constants perturbed
    cands = [NODES30.replace("0.3275911", f"{0.3275911 + i * 1e-7:.7f}") for i in range(n_candidates)]
    batch = compile_batch(cands, mode="traditional", device=dev).batch
    sched = vm.schedule(batch)
    xs = x[:, : max(1, n_inputs // 100)]
    many = {"torch_op_vm": lambda: vm.run(batch, xs, sched=sched)}
    if cpu:
        arrays = fused.ProgramArrays.from_batch(batch)
        xs_np = np.ascontiguousarray(xs.numpy())
        want = fused.evaluate(one, xs_np)[0]
        many["fused"] = lambda: fused.evaluate(arrays, xs_np)
        many["fused_compare"] = lambda: fused.compare(arrays, xs_np, want, "float32", 1e-4, 1e-5)
    elif on_gpu:
        arrays = fused.ProgramArrays.from_batch(batch)
        want_gpu = fused_cuda.evaluate(one, xs, "float32")[0]
        many["fused_cuda"] = lambda: fused_cuda.evaluate(arrays, xs, "float32")
        many["fused_cuda_compare"] = lambda: fused_cuda.compare(arrays, xs, want_gpu, "float32", 1e-4, 1e-5, False)
    for f in many.values():
        f()
    many_t = alternating(many, repeats, sync)
    single_rate = {k: prog.n_nodes * n_inputs / v[0] for k, v in single_t.items()}
    batch_rate = {k: sched.n_nodes * xs.shape[1] / v[0] for k, v in many_t.items()}
    report = {"suite": "vm", "machine": machine(dev), "nodes": prog.n_nodes, "threads": fused.threads(),
              "single_kernel": {"inputs": n_inputs, "seconds": {k: v[0] for k, v in single_t.items()},
                                "node_evals_per_s": single_rate},
              "batch": {"candidates": n_candidates, "inputs": xs.shape[1],
                        "seconds": {k: v[0] for k, v in many_t.items()}, "node_evals_per_s": batch_rate}}
    print(f"gpuiter bench vm: {prog.n_nodes}-node kernel, device {dev}")
    for k, r in single_rate.items():
        print(f"  one kernel x {n_inputs:,} inputs, {k:14s} {single_t[k][0] * 1e3:8.1f} ms  {r:10.3g} node-evals/s")
    for k, r in batch_rate.items():
        print(f"  {n_candidates:,} candidates x {xs.shape[1]:,} inputs, {k:14s} {many_t[k][0] * 1e3:8.1f} ms  "
              f"{r:10.3g} node-evals/s")
    report["rows"] = {name: _row_kernel(name, src, literal, dev, n_inputs, row_length, n_candidates, repeats, sync)
                      for name, (src, literal) in ROW_KERNELS.items()}
    if json_path:
        print(f"  wrote {write_json(report, json_path)}")
    return report
