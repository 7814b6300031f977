"""`gpuiter bench vm`: node-evaluations per second of the batched VM and of a single rendered kernel."""

from __future__ import annotations

import torch

from ..compilers import compile_batch
from ..ir import ProgramBatch
from ..runtime import vm
from ..runtime.device import resolve
from ..runtime.render import torch_function
from .common import machine, timed, write_json
from .kernels import NODES30


def run(device=None, n_inputs: int = 1_000_000, n_candidates: int = 1000, repeats: int = 3,
        json_path: str | None = None) -> dict:
    dev = resolve(device)

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)

    prog = compile_batch([NODES30], mode="traditional", device=dev)[0]
    fn = torch_function(prog, "float32")
    x = torch.randn(1, n_inputs, device=dev)
    fn(x[0, :1000])
    single_s, _, _ = timed(lambda: fn(x[0]), repeats, sync)
    # many candidates of one kernel (the AI-loop shape): constants perturbed
    cands = [NODES30.replace("0.3275911", f"{0.3275911 + i * 1e-7:.7f}") for i in range(n_candidates)]
    batch = ProgramBatch.from_results(compile_batch(cands, mode="traditional", device=dev).results, device=dev)
    sched = vm.schedule(batch)
    xs = x[:, : max(1, n_inputs // 100)]
    vm.run(batch, xs[:, :100], sched=sched)
    batch_s, _, _ = timed(lambda: vm.run(batch, xs, sched=sched), repeats, sync)
    single_rate = prog.n_nodes * n_inputs / single_s
    batch_rate = sched.n_nodes * xs.shape[1] / batch_s
    report = {"suite": "vm", "machine": machine(dev), "nodes": prog.n_nodes,
              "single_kernel": {"inputs": n_inputs, "seconds": single_s, "node_evals_per_s": single_rate},
              "batched_vm": {"candidates": n_candidates, "inputs": xs.shape[1], "seconds": batch_s,
                             "node_evals_per_s": batch_rate}}
    print(f"gpuiter bench vm: {prog.n_nodes}-node kernel, device {dev}")
    print(f"  one kernel x {n_inputs:,} inputs (rendered torch ops)  {single_s * 1e3:8.1f} ms  "
          f"{single_rate:10.3g} node-evals/s")
    print(f"  batched VM, {n_candidates:,} candidates x {xs.shape[1]:,} inputs  {batch_s * 1e3:8.1f} ms  "
          f"{batch_rate:10.3g} node-evals/s")
    if json_path:
        print(f"  wrote {write_json(report, json_path)}")
    return report
