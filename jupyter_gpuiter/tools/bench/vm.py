"""`gpuiter bench vm`: node-evaluations per second of the evaluators, for one kernel and for a batch.

One 30-node kernel on `n_inputs` inputs: the fused tile evaluator (what `Kernel.__call__` runs on CPU arrays)
against the rendered torch ops. `n_candidates` candidates of it (constants perturbed) on `n_inputs / 100`
inputs: the fused evaluator alone, the fused evaluate-and-compare of verification, and the batched torch-op
VM, measured in alternating rounds. On CUDA only the torch paths run (the fused evaluator is CPU-only).
"""

from __future__ import annotations

import numpy as np
import torch

from ...compilers import compile_batch
from ...runtime import fused, vm
from ...runtime.device import resolve
from ...runtime.render import torch_function
from .common import alternating, machine, write_json
from .sample_sources import NODES30


def run(device=None, n_inputs: int = 1_000_000, n_candidates: int = 1000, repeats: int = 3,
        json_path: str | None = None) -> dict:
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
    if cpu:
        one = fused.ProgramArrays.from_batch(compiled.batch)
        x_np = x.numpy()
        single["fused"] = lambda: fused.evaluate(one, x_np)
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
    if json_path:
        print(f"  wrote {write_json(report, json_path)}")
    return report
