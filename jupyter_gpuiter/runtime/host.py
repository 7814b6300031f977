"""What the host lets this process use: CPU cores and memory, container limits included.

A container (Binder, Docker, Kubernetes) usually sees every core and all the memory of the machine it
runs on, while its cgroup allows far less: one CPU's worth of time and 2 GB, say. Starting a worker
per visible core there would thrash the one CPU and get the kernel killed for memory, so both counts
here take the cgroup's limits into account (v2 and v1). Linux only; elsewhere they fall back to what
os reports (cores) or to "unknown" (memory).
"""

from __future__ import annotations

import math
import os

ROOT = "/"  # where /proc and /sys are read (tests point it at a fake tree)
_UNLIMITED = 1 << 60  # cgroup v1 writes "no limit" as a huge number (9223372036854771712)


def _read(path: str) -> str | None:
    try:
        with open(os.path.join(ROOT, path.lstrip("/"))) as f:
            return f.read().strip()
    except (OSError, UnicodeDecodeError):
        return None


def _cgroup_dirs(controller: str) -> list[str]:
    """The directories that may hold this process's cgroup files for `controller` ("" for v2's unified
    hierarchy): its own cgroup under the mount, then the mount's root (inside a container the path in
    /proc/self/cgroup may be the host's, while the container sees its own cgroup at the root)."""
    dirs = []
    for line in (_read("/proc/self/cgroup") or "").splitlines():
        fields = line.split(":", 2)
        if len(fields) != 3:  # (not a cgroup line: nothing to read from it)
            continue
        _, controllers, path = fields
        if controller == "" and controllers == "":
            dirs += [f"/sys/fs/cgroup{path}".rstrip("/"), "/sys/fs/cgroup"]
        elif controller and controller in controllers.split(","):
            for mount in (f"/sys/fs/cgroup/{controllers}", f"/sys/fs/cgroup/{controller}"):
                dirs += [f"{mount}{path}".rstrip("/"), mount]
    return list(dict.fromkeys(dirs))


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def cpu_quota() -> float | None:
    """The cgroup's CPU time allowance in CPUs (1.5: one and a half cores' worth), or None if unlimited."""
    for d in _cgroup_dirs(""):
        text = _read(f"{d}/cpu.max")  # v2: "<quota> <period>" or "max <period>"
        if text is not None:
            quota, _, period = text.partition(" ")
            q, p = _int(quota), _int(period)
            return q / p if q and p and q > 0 else None
    for d in _cgroup_dirs("cpu"):
        q, p = _int(_read(f"{d}/cpu.cfs_quota_us")), _int(_read(f"{d}/cpu.cfs_period_us"))
        if q is not None:
            return q / p if q > 0 and p else None
    return None


def usable_cores() -> int:
    """Cores this process may run on (its CPU affinity), at most its cgroup's CPU quota rounded up."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    quota = cpu_quota()
    return max(1, min(cores, math.ceil(quota)) if quota else cores)


def memory_headroom() -> int | None:
    """Bytes this process can still allocate before the machine or its cgroup runs out: the smaller of
    MemAvailable and the cgroup's limit minus its usage; None where neither is known."""
    known = []
    for line in (_read("/proc/meminfo") or "").splitlines():
        fields = line.split()
        kib = _int(fields[1]) if len(fields) > 1 and fields[0] == "MemAvailable:" else None
        if kib is not None:
            known.append(kib * 1024)
    for d in _cgroup_dirs(""):
        limit = _read(f"{d}/memory.max")
        if limit is not None:
            used = _int(_read(f"{d}/memory.current"))
            if _int(limit) is not None and used is not None:
                known.append(int(limit) - used)
            break
    else:
        for d in _cgroup_dirs("memory"):
            limit, used = _int(_read(f"{d}/memory.limit_in_bytes")), _int(_read(f"{d}/memory.usage_in_bytes"))
            if limit is not None and used is not None:
                if limit < _UNLIMITED:
                    known.append(limit - used)
                break
    return max(0, min(known)) if known else None
