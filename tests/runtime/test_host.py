"""runtime.host: cores and memory as a container's cgroup limits them (v2 and v1), on fake /proc and /sys trees."""

import os

import pytest

from jupyter_gpuiter.runtime import host

GiB = 1 << 30


def fake_tree(root, files: dict[str, str]) -> None:
    for path, text in files.items():
        full = root / path.lstrip("/")
        full.parent.mkdir(parents=True, exist_ok=True)
        full.write_text(text)


@pytest.fixture
def tree(tmp_path, monkeypatch):
    monkeypatch.setattr(host, "ROOT", str(tmp_path))
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(16)), raising=False)
    return tmp_path


MEMINFO = "MemTotal:       65000000 kB\nMemAvailable:   {} kB\n"


@pytest.mark.parametrize(("files", "cores", "headroom"), [
    # cgroup v2, in a container (its own cgroup at the mount's root): 1.5 CPUs and 2 GiB, 1.25 used
    ({"/proc/self/cgroup": "0::/\n", "/sys/fs/cgroup/cpu.max": "150000 100000\n",
      "/sys/fs/cgroup/memory.max": f"{2 * GiB}\n", "/sys/fs/cgroup/memory.current": f"{5 * GiB // 4}\n",
      "/proc/meminfo": MEMINFO.format(60_000_000)}, 2, 3 * GiB // 4),
    # cgroup v2 without limits: affinity and MemAvailable
    ({"/proc/self/cgroup": "0::/user.slice\n", "/sys/fs/cgroup/user.slice/cpu.max": "max 100000\n",
      "/sys/fs/cgroup/user.slice/memory.max": "max\n", "/sys/fs/cgroup/user.slice/memory.current": "1000\n",
      "/proc/meminfo": MEMINFO.format(1_048_576)}, 16, GiB),
    # cgroup v1 (a host path in /proc/self/cgroup, the container's own cgroup at the mount's root): half a CPU
    ({"/proc/self/cgroup": "4:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n0::/\n",
      "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us": "50000\n",
      "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us": "100000\n",
      "/sys/fs/cgroup/memory/memory.limit_in_bytes": f"{GiB}\n",
      "/sys/fs/cgroup/memory/memory.usage_in_bytes": f"{GiB // 4}\n",
      "/proc/meminfo": MEMINFO.format(60_000_000)}, 1, 3 * GiB // 4),
    # cgroup v1 unlimited (-1 quota, a huge limit) and MemAvailable the smaller
    ({"/proc/self/cgroup": "4:memory:/\n3:cpu,cpuacct:/\n",
      "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us": "-1\n", "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us": "100000\n",
      "/sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n",
      "/sys/fs/cgroup/memory/memory.usage_in_bytes": f"{GiB}\n",
      "/proc/meminfo": MEMINFO.format(2_097_152)}, 16, 2 * GiB),
    # a usage past the limit is no headroom, not a negative one
    ({"/proc/self/cgroup": "0::/\n", "/sys/fs/cgroup/memory.max": f"{GiB}\n",
      "/sys/fs/cgroup/memory.current": f"{GiB + 5}\n"}, 16, 0),
    # nothing readable: what os says about cores, memory unknown
    ({}, 16, None),
    # garbage where the files should be: ignored, as if unreadable
    ({"/proc/self/cgroup": "no colons here\n0::/\n", "/sys/fs/cgroup/cpu.max": "lots 100000\n",
      "/sys/fs/cgroup/memory.max": "a lot\n", "/sys/fs/cgroup/memory.current": "12\n",
      "/proc/meminfo": "MemAvailable: plenty kB\nMemAvailable:\n"}, 16, None),
])
def test_cores_and_memory_follow_the_cgroup(tree, files, cores, headroom):
    fake_tree(tree, files)
    assert host.usable_cores() == cores
    assert host.memory_headroom() == headroom


def test_the_quota_never_raises_the_affinity(tree, monkeypatch):
    fake_tree(tree, {"/proc/self/cgroup": "0::/\n", "/sys/fs/cgroup/cpu.max": "800000 100000\n"})
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    assert host.cpu_quota() == 8.0
    assert host.usable_cores() == 2


def test_this_machine_reports_sane_figures():
    assert 1 <= host.usable_cores() <= (os.cpu_count() or 1)
    free = host.memory_headroom()
    assert free is None or free >= 0
