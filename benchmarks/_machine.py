"""What every benchmark measures about its own process, the machine and its child processes.

Linux figures come from ``/proc``; elsewhere CPU load is NaN and peak memory falls back to
``ru_maxrss``. A benchmark child prints one ``BENCH-RESULT {json}`` line (:func:`emit_result`);
the parent starts it with :func:`run_child_process`, which adds the child's own process wall
time, CPU time and peak RSS, and the cores other processes used meanwhile.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time

RESULT_TAG = "BENCH-RESULT "


def hwm_mb(pid: int | str = "self") -> float | None:
    """A process's peak RSS so far in MB (``VmHWM`` of /proc/PID/status: a server's start, before
    any sampler began, counts too); None where /proc has none (the process is gone, or no Linux)."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def peak_rss_mb() -> float:
    """Peak RSS of this process in MB: :func:`hwm_mb`. ``ru_maxrss`` is only the fallback: on Linux
    it survives ``execve``, so a child started by a parent that once held 1 GB would report at
    least 1 GB."""
    hwm = hwm_mb()
    if hwm is not None:
        return hwm
    kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # bytes on macOS, kilobytes elsewhere
    return kb / (1024 * 1024) if sys.platform == "darwin" else kb / 1024


def warm_page_cache(*paths) -> None:
    """Read each file once, so that every tool after it reads it from the page cache (the first
    tool measured would otherwise pay the disk for the others)."""
    for path in paths:
        with open(path, "rb") as fh:
            while fh.read(1 << 24):
                pass


def cpu_s() -> float:
    """User + system CPU time of this process."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def busy_cpu_s() -> float:
    """CPU seconds the whole machine has spent busy (/proc/stat); NaN where there is none."""
    try:
        with open("/proc/stat") as fh:
            vals = [int(v) for v in fh.readline().split()[1:]]
    except OSError:
        return float("nan")
    busy = sum(vals[:8]) - vals[3] - (vals[4] if len(vals) > 4 else 0)  # all but idle and iowait
    return busy / os.sysconf("SC_CLK_TCK")


def background_cores(seconds: float = 1.0) -> float:
    """Cores kept busy by other processes over ``seconds`` (this process sleeps meanwhile)."""
    b0 = busy_cpu_s()
    time.sleep(seconds)
    return (busy_cpu_s() - b0) / seconds


def wait_idle(limit: float, threshold: float = 0.25, seconds: float = 1.0) -> float:
    """Wait up to ``limit`` seconds until other processes use fewer than ``threshold`` cores;
    returns the last load measured (NaN when not waiting)."""
    if limit <= 0 or not os.path.exists("/proc/stat"):
        return float("nan")
    deadline = time.monotonic() + limit
    load = background_cores(seconds)
    while load > threshold and time.monotonic() < deadline:
        load = background_cores(seconds)
    return load


def others_cores(busy0: float, busy1: float, own_cpu_s: float, wall: float) -> float:
    """Cores that processes other than the measured ones used between two :func:`busy_cpu_s`
    readings, given the measured processes' CPU time over ``wall`` seconds."""
    if wall <= 0 or busy0 != busy0 or busy1 != busy1:
        return float("nan")
    return max(0.0, (busy1 - busy0 - own_cpu_s) / wall)


def emit_result(res: dict) -> None:
    """A child's result, for :func:`run_child_process`."""
    print(RESULT_TAG + json.dumps(res), flush=True)


class ChildFailed(RuntimeError):
    """A benchmark child exited with an error or printed no result."""


def run_process(cmd: list[str], *, idle_wait: float = 0.0, cwd=None, env: dict | None = None,
                stderr_tail: int | None = 2000) -> dict:
    """Run ``cmd`` as a whole process timed from outside (after waiting up to ``idle_wait`` s for a
    quiet machine): ``wall_s``, ``cpu_s`` and ``peak_rss_mb`` (this process's own, from ``wait4``),
    ``background_cores`` (others' load meanwhile; NaN when it cannot be told), ``background_before``,
    ``stdout`` and ``stderr``. ``env`` is the whole environment (None: this one's). On failure the
    process's stderr (its last ``stderr_tail`` characters) goes to this stderr and
    :class:`ChildFailed` is raised."""
    before = wait_idle(idle_wait)
    b0 = busy_cpu_s()
    t0 = time.perf_counter()
    with tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True, cwd=cwd, env=env)
        stdout = proc.stdout.read()
        proc.stdout.close()
        _, status, usage = os.wait4(proc.pid, 0)  # this process's own CPU time and peak RSS
        wall = time.perf_counter() - t0
        b1 = busy_cpu_s()
        err.seek(0)
        stderr = err.read()
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        sys.stderr.write(stderr if stderr_tail is None else stderr[-stderr_tail:])
        raise ChildFailed(f"benchmark process failed (exit {code}): {' '.join(cmd[:4])} ...")
    cpu = usage.ru_utime + usage.ru_stime
    return {"wall_s": wall, "cpu_s": cpu, "peak_rss_mb": usage.ru_maxrss / 1024,
            "background_cores": others_cores(b0, b1, cpu, wall), "background_before": before,
            "stdout": stdout, "stderr": stderr}


def run_child_process(cmd: list[str], *, idle_wait: float = 0.0, cwd=None, env: dict | None = None,
                      stderr_tail: int | None = None) -> dict:
    """Run a benchmark child (:func:`run_process`; ``env`` added to this environment) and return
    its result plus ``process_wall_s``, ``process_cpu_s``, ``process_peak_rss_mb`` (the child's
    own), ``background_cores`` (others' load meanwhile) and ``background_cores_before``."""
    r = run_process(cmd, idle_wait=idle_wait, cwd=cwd, env=None if env is None else {**os.environ, **env},
                    stderr_tail=stderr_tail)
    line = next((ln for ln in r["stdout"].splitlines() if ln.startswith(RESULT_TAG)), None)
    if line is None:
        raise ChildFailed(f"benchmark process printed no result: {' '.join(cmd[:4])} ...")
    res = json.loads(line[len(RESULT_TAG):])
    res["process_wall_s"] = r["wall_s"]
    res["process_cpu_s"] = r["cpu_s"]
    res["process_peak_rss_mb"] = r["peak_rss_mb"]
    if r["background_cores"] == r["background_cores"]:
        res["background_cores"] = r["background_cores"]
    res["background_cores_before"] = r["background_before"]
    return res
