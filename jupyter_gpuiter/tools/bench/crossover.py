"""`gpuiter bench compile --crossover`: where mode "auto" should switch from the serial compiler to the
traditional one: both compile batches of 1, 2, 4, ... generated programs (fresh ones every round, so no
cache serves them), in alternating rounds; the crossover is the smallest batch from which traditional is
faster at every larger size measured. compilers.AUTO_CROSSOVER_CPU and AUTO_CROSSOVER_CUDA hold the figures."""

from __future__ import annotations

from ...compilers import AUTO_CROSSOVER_CPU, AUTO_CROSSOVER_CUDA, compile_batch
from ...compilers import traditional as traditional_compiler
from ...generate import generate_batch
from ...runtime.device import resolve
from .common import alternating, machine, write_json

SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 256)


def run(device=None, sizes=SIZES, repeats: int = 5, seed: int = 0, json_path: str | None = None) -> dict:
    dev = resolve(device)
    name, in_code = ("AUTO_CROSSOVER_CPU", AUTO_CROSSOVER_CPU) if dev.type == "cpu" else ("AUTO_CROSSOVER_CUDA",
                                                                                      AUTO_CROSSOVER_CUDA)
    traditional_compiler.warm_up(dev)
    compile_batch(generate_batch(64, seed + 99, rows=0), mode="traditional", device=dev)  # the worker pool, started
    table = {}
    for n in sizes:
        batches = iter(range(10**9))

        def fresh(n=n, batches=batches):
            return generate_batch(n, seed * 1_000_003 + n * 1009 + next(batches), rows=0)

        timed = alternating({mode: (lambda m=mode: compile_batch(fresh(), mode=m, device=dev))
                             for mode in ("serial", "traditional")}, repeats)
        table[n] = {mode: t[0] for mode, t in timed.items()}
    faster = [n for n in sizes if table[n]["traditional"] < table[n]["serial"]]
    crossover = next((n for n in sizes if all(m in faster for m in sizes if m >= n)), None)
    report = {"suite": "compile-crossover", "machine": machine(dev), "seconds": {str(n): t for n, t in table.items()},
              "crossover": crossover, "in_code": in_code}
    print(f"gpuiter bench compile --crossover: serial vs traditional on batches of generated programs, device {dev}")
    for n, t in table.items():
        print(f"  {n:5d} programs   serial {t['serial'] * 1e3:9.2f} ms   traditional {t['traditional'] * 1e3:9.2f} ms")
    print(f"  traditional is faster from {crossover} programs on (compilers.{name} = {in_code})")
    if json_path:
        print(f"  wrote {write_json(report, json_path)}")
    return report
