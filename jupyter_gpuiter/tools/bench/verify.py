"""`gpuiter bench verify`: certify eps=1e-4 at delta=1e-3 (about 69k tests) for a 30-node kernel, resident
(Session reused: compiled kernels and input pools stay) against cold (a fresh process doing the same)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

from ...runtime.device import resolve
from ...session import Session
from ...verification.confidence import tests_needed
from .common import machine, timed, write_json
from .sample_sources import NODES30, NODES30_REF

EPS, DELTA = 1e-4, 1e-3


def run(device=None, repeats: int = 5, json_path: str | None = None) -> dict:
    dev = resolve(device)
    n = tests_needed(EPS, DELTA)
    sess = Session(dev)
    options = {"tests": n, "delta": DELTA, "rtol": 1e-4, "atol": 1e-5}
    first = sess.verify(NODES30, NODES30_REF, **options)  # compiles, allocates the pool
    resident_s, _, verdict = timed(lambda: sess.verify(NODES30, NODES30_REF, **options), repeats)
    script = textwrap.dedent(f"""
        import jupyter_gpuiter as gi
        v = gi.Session({str(dev)!r}).verify({NODES30!r}, {NODES30_REF!r}, tests={n}, delta={DELTA}, rtol=1e-4,
                                             atol=1e-5)
        assert v.tests_run == {n}
    """)
    cold = []
    for _ in range(max(1, repeats // 2)):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", script], check=True)
        cold.append(time.perf_counter() - t0)
    cold_s = sorted(cold)[len(cold) // 2]
    report = {"suite": "verify", "machine": machine(dev), "tests": n, "epsilon": verdict.epsilon, "delta": DELTA,
              "passed": verdict.passed, "first_call_s": first.timings, "resident_s": resident_s, "cold_s": cold_s,
              "ratio_cold_vs_resident": cold_s / resident_s}
    print(f"gpuiter bench verify: certify eps={EPS:g} at delta={DELTA:g} ({n:,} tests), 30-node kernel, device {dev}")
    print(f"  verdict: {verdict.sentence}")
    print(f"  resident (Session reused)   {resident_s * 1e3:9.1f} ms")
    print(f"  cold (fresh process)        {cold_s * 1e3:9.1f} ms   resident is {cold_s / resident_s:6.1f}x faster")
    if json_path:
        print(f"  wrote {write_json(report, json_path)}")
    return report
