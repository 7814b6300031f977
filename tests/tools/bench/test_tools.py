"""The compiler's measurement tools (`gpuiter bench chunks|chunk-cost|host|ops|profile|settings|ab`) still run:
scripts/gpu-check.sh calls chunks, profile and ops on a lent GPU, a visit too rare and short to find out there that
one of them broke. Here they run on the CPU at toy sizes, each in a process of its own, as the command runs them."""

import re
import subprocess
import sys

from jupyter_gpuiter.tools.bench import SUITES, TOOLS
from tests.support import ROOT


def bench(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    r = subprocess.run([sys.executable, "-m", "jupyter_gpuiter.tools.cli", "bench", *args], check=False, cwd=ROOT,
                       capture_output=True, text=True, timeout=300)
    assert not check or r.returncode == 0, r.stderr[-2000:]
    return r


def run(*args: str) -> str:
    return bench(*args).stdout


def test_chunk_sweep_compares_settings_and_splits_the_fastest_by_pass():
    out = run("chunks", "--n", "96", "--repeats", "1", "--settings", "12:21,17:21")
    rows = [line for line in out.splitlines() if "programs/s" in line]
    assert len(rows) == 2 and all(line.endswith("same batch") for line in rows)
    assert int(rows[0].split()[2]) > int(rows[1].split()[2])  # 2^12-cell chunks: more of them
    assert "per pass at" in out and "codegen" in out


def test_op_costs_prints_a_cost_per_operation():
    out = run("ops", "--rows", "20", "--cols", "16", "--threads", "1")
    header, rows = out.splitlines()[1], out.splitlines()[2:]
    assert header.split()[-3:] == ["int64", "int32", "int16"]
    assert len(rows) > 10 and all(float(row.split()[-1]) > 0 for row in rows), out


def test_profile_compile_prints_the_op_table():
    out = run("profile", "--n", "24", "--rows", "5")
    head = out.splitlines()[0]
    assert head.startswith("profile-compile: 24 generated programs on cpu, 1 chunks")
    assert int(head.split(", ")[-1].split()[0].replace(",", "")) > 1000  # aten op calls
    assert "Self CPU" in out and "aten::" in out
    line = next(x for x in out.splitlines() if x.startswith("tensor calls from Python"))
    by_pass = {k: int(v.replace(",", "")) for k, v in re.findall(r"(\w+) ([\d,]+)(?=[,;])", line.split("by pass")[1])}
    assert {"lex", "rules", "parse", "semantic", "codegen"} <= set(by_pass) and all(v > 0 for v in by_pass.values())
    dfa = int(re.search(r"the DFA scan's ([\d,]+)", line).group(1).replace(",", ""))
    assert 0 < dfa < by_pass["lex"]


def test_gpu_check_is_valid_bash_and_names_existing_suites_and_tools():
    script = (ROOT / "scripts" / "gpu-check.sh").read_text()
    subprocess.run(["bash", "-n", str(ROOT / "scripts" / "gpu-check.sh")], check=True)
    called = re.findall(r"^\s*(bench|tool) \S+ \d+ (\S+)", script, re.MULTILINE)
    assert {name for kind, name in called if kind == "tool"} == {"chunks", "profile", "ops"}
    assert all(name in (SUITES if kind == "bench" else TOOLS) for kind, name in called), called
    # the visit fits its budget: every step's limit, `timeout N ...`, `bench NAME N ...` or `tool NAME N ...`, adds
    # up to under 8 minutes
    limits = [int(n) for n in re.findall(r"^\s*(?:timeout|bench \S+|tool \S+) (\d+) ", script, re.MULTILINE)]
    assert len(limits) >= 8 and sum(limits) < 8 * 60
    assert f"{sum(limits) / 60:.1f} minutes" in script  # as its comment says


def test_settings_names_a_setting_that_does_not_exist_before_starting_workers():
    for name in ("common.NO_SUCH_CONSTANT", "no_such_module.X", "compile_batch.X", "NO_SUCH_CONSTANT"):
        got = bench("settings", "--set", f"{name}=1", "--n", "8", check=False)
        assert got.returncode == 2 and got.stderr.startswith("gpuiter bench settings: ") and "module.NAME" in got.stderr


def test_settings_compares_settings_in_the_worker_pool():
    out = run("settings", "--set", "MIN_CHUNK_CELLS={'cpu': 4096}", "PAD_WASTE_ONE_THREAD=1.05",
              "driver.REGROUP_CHUNKS=2; PAD_WASTE_ONE_THREAD=1.05", "--n", "160", "--calls", "2")
    rows = [line for line in out.splitlines() if "median" in line]
    assert out.startswith("pool_settings: 160 generated programs (seed 0), 2 workers") and len(rows) == 3
    chunks = [int(re.search(r"(\d+) chunks", line).group(1)) for line in rows]
    assert chunks[0] > chunks[1] == chunks[2] >= 2  # 2^12-cell chunks: more of them (and each setting keeps every row)
    apart = [float(re.search(r"workers apart +([\d.]+) ms", line).group(1)) for line in rows]
    medians = [float(re.search(r"median +([\d.]+) ms", line).group(1)) for line in rows]
    assert all(0 <= a < m for a, m in zip(apart, medians))  # a worker's part takes less than the whole call


def test_chunk_cost_prints_a_time_per_chunk_and_per_program():
    out = run("chunk-cost", "--sizes", "2,8", "--repeats", "3", "--part", "300")
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
    out = run("host", "--n", "40", "--copies", "3", "--repeats", "2")
    assert out.startswith("host-cost: 120 programs (40 generated, 3 copies)")
    rows = re.finditer(r"^  (\S.*?)\s+([\d.]+) us a program", out, re.MULTILINE)
    steps = {m.group(1).strip(): float(m.group(2)) for m in rows}
    assert list(steps) == ["encode and sort", "cut by bytes", "pack", "cut by tokens", "total"]
    assert all(v > 0 for v in steps.values()) and abs(sum(steps.values()) - 2 * steps["total"]) < 0.01
    ceiling = int(re.search(r"at most ([\d,]+) programs/s", out).group(1).replace(",", ""))
    assert abs(ceiling - 1e6 / steps["total"]) <= 1e6 / steps["total"] * 0.01


def test_ab_compares_two_checkouts_output_by_output_and_pass_by_pass(tmp_path):
    out = run("ab", str(ROOT), "--n", "24", "--repeats", "2", "--threads", "1")  # this checkout against itself
    assert out.startswith("outputs EQUAL on 36 programs"), out  # 24 generated and 12 mutated
    sides = {line.split()[0]: line for line in out.splitlines()[1:]}
    assert set(sides) == {"base", "new"}
    for line in sides.values():
        assert float(re.search(r"whole +([\d.]+) ms", line).group(1)) > 0
        assert {"lex", "parse", "codegen"} <= set(re.findall(r"(\w+) [\d.]+", line.split(" ms ", 1)[1]))
    got = bench("ab", str(tmp_path), "--n", "4", check=False)  # a folder with no package in it
    assert got.returncode == 2 and "holds no jupyter_gpuiter package" in got.stderr
