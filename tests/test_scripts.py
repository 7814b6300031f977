"""The measurement scripts still run: scripts/gpu-check.sh calls chunk-sweep.py, profile-compile.py and op-costs.py
on a lent GPU, a visit too rare and short to find out there that one of them broke. Here they run on the CPU at toy
sizes."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run(*args: str) -> str:
    r = subprocess.run([sys.executable, *args], check=False, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout


def test_chunk_sweep_compares_settings_and_splits_the_fastest_by_pass():
    out = run("scripts/chunk-sweep.py", "--n", "96", "--repeats", "1", "--settings", "12:21,17:21")
    rows = [line for line in out.splitlines() if "programs/s" in line]
    assert len(rows) == 2 and all(line.endswith("same batch") for line in rows)
    assert int(rows[0].split()[2]) > int(rows[1].split()[2])  # 2^12-cell chunks: more of them
    assert "per pass at" in out and "codegen" in out


def test_op_costs_prints_a_cost_per_operation():
    out = run("scripts/op-costs.py", "--rows", "20", "--cols", "16", "--threads", "1")
    header, rows = out.splitlines()[1], out.splitlines()[2:]
    assert header.split()[-3:] == ["int64", "int32", "int16"]
    assert len(rows) > 10 and all(float(row.split()[-1]) > 0 for row in rows), out


def test_profile_compile_prints_the_op_table():
    out = run("scripts/profile-compile.py", "--n", "24", "--rows", "5")
    head = out.splitlines()[0]
    assert head.startswith("profile-compile: 24 generated programs on cpu, 1 chunks")
    assert int(head.split(", ")[-1].split()[0].replace(",", "")) > 1000  # aten op calls
    assert "Self CPU" in out and "aten::" in out
    line = next(x for x in out.splitlines() if x.startswith("tensor calls from Python"))
    by_pass = {k: int(v.replace(",", "")) for k, v in re.findall(r"(\w+) ([\d,]+)(?=[,;])", line.split("by pass")[1])}
    assert {"lex", "rules", "parse", "semantic", "codegen"} <= set(by_pass) and all(v > 0 for v in by_pass.values())
    dfa = int(re.search(r"the DFA scan's ([\d,]+)", line).group(1).replace(",", ""))
    assert 0 < dfa < by_pass["lex"]


def test_gpu_check_is_valid_bash_and_names_existing_scripts():
    script = (ROOT / "scripts" / "gpu-check.sh").read_text()
    subprocess.run(["bash", "-n", str(ROOT / "scripts" / "gpu-check.sh")], check=True)
    for name in ("chunk-sweep.py", "op-costs.py", "profile-compile.py"):
        assert f"scripts/{name}" in script and (ROOT / "scripts" / name).is_file()
    # the visit fits its budget: every step's limit, `timeout N ...` or `bench NAME N ...`, adds up to under 8 minutes
    limits = [int(n) for n in re.findall(r"^\s*(?:timeout|bench \S+) (\d+) ", script, re.MULTILINE)]
    assert len(limits) >= 8 and sum(limits) < 8 * 60
    assert f"{sum(limits) / 60:.1f} minutes" in script  # as its comment says


def test_pool_settings_names_a_setting_that_does_not_exist_before_starting_workers():
    for name in ("common.NO_SUCH_CONSTANT", "no_such_module.X"):
        got = subprocess.run([sys.executable, "scripts/pool_settings.py", "--set", f"{name}=1", "--n", "8"],
                             check=False, capture_output=True, text=True, cwd=ROOT, timeout=120)
        assert got.returncode != 0 and got.stderr.startswith("pool_settings: ") and "module.NAME" in got.stderr


def test_pool_settings_compares_settings_in_the_worker_pool():
    out = run("scripts/pool_settings.py", "--set", "MIN_CHUNK_CELLS={'cpu': 4096}", "PAD_WASTE_ONE_THREAD=1.05",
              "workers.START_TIMEOUT=60; PAD_WASTE_ONE_THREAD=1.05", "--n", "160", "--calls", "2")
    rows = [line for line in out.splitlines() if "median" in line]
    assert out.startswith("pool_settings: 160 generated programs (seed 0), 2 workers") and len(rows) == 3
    chunks = [int(re.search(r"(\d+) chunks", line).group(1)) for line in rows]
    assert chunks[0] > chunks[1] == chunks[2] >= 2  # 2^12-cell chunks: more of them (and each setting keeps every row)
    apart = [float(re.search(r"workers apart +([\d.]+) ms", line).group(1)) for line in rows]
    medians = [float(re.search(r"median +([\d.]+) ms", line).group(1)) for line in rows]
    assert all(0 <= a < m for a, m in zip(apart, medians))  # a worker's part takes less than the whole call


def test_chunk_cost_prints_a_time_per_chunk_and_per_program():
    out = run("scripts/chunk-cost.py", "--sizes", "2,8", "--repeats", "3", "--part", "300")
    rows = [line for line in out.splitlines() if "us a program" in line]
    assert out.startswith("chunk-cost: chunks of generated programs") and len(rows) == 2
    per_chunk = [float(re.search(r"([\d.]+) ms a chunk", line).group(1)) for line in rows]
    per_program = [float(re.search(r"([\d.]+) us a program", line).group(1)) for line in rows]
    assert all(t > 0 for t in per_chunk)
    assert all(abs(p * n / 1e3 - t) <= 0.01 for p, n, t in zip(per_program, (2, 8), per_chunk))  # (as printed)
    # and how a worker's part splits: lexing and token chunks, each padded (cells >= the rows' own bytes or tokens)
    lexing = re.search(r"lexing: (\d+) chunks .*, ([\d.]+)x its bytes", out)
    tokens = re.search(r"token passes: (\d+) chunks .*, ([\d.]+)x its tokens", out)
    assert "a part of 300 programs for 2 workers: 150 programs" in out and lexing and tokens, out
    assert int(lexing.group(1)) >= 1 and int(tokens.group(1)) >= 1
    assert float(lexing.group(2)) >= 1 and float(tokens.group(2)) >= 1
    # and the same rows timed as cut, in halves and doubled
    for name in ("lexing", "token passes"):
        timed = re.search(name + r": ([\d.]+) ms over its (\d+) chunks; ([\d.]+) ms over (\d+) halves .*; ([\d.]+) ms over "
                          r"them doubled", out)
        assert timed and int(timed.group(4)) >= int(timed.group(2)) and float(timed.group(5)) > 0, out


def test_host_cost_times_the_host_steps_and_their_ceiling():
    out = run("scripts/host-cost.py", "--n", "40", "--copies", "3", "--repeats", "2")
    assert out.startswith("host-cost: 120 programs (40 generated, 3 copies)")
    rows = re.finditer(r"^  (\S.*?)\s+([\d.]+) us a program", out, re.MULTILINE)
    steps = {m.group(1).strip(): float(m.group(2)) for m in rows}
    assert list(steps) == ["encode and sort", "cut by bytes", "pack", "cut by tokens", "total"]
    assert all(v > 0 for v in steps.values()) and abs(sum(steps.values()) - 2 * steps["total"]) < 0.01
    ceiling = int(re.search(r"at most ([\d,]+) programs/s", out).group(1).replace(",", ""))
    assert abs(ceiling - 1e6 / steps["total"]) <= 1e6 / steps["total"] * 0.01
