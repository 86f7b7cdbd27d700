"""Shared helpers of the benchmarks: interleaved timing, peak memory, the figures, the JSON report.

Every benchmark reports each measured figure with :func:`figure`, which records it as data in :data:`FIGURES`
(``{name: {'value', 'detail', 'verdict'}}``) and prints it for a person as one line::

    name: value (reference, target) PASS|MISS

``value`` is a ratio, a fraction or a speed-up, measured against the named reference in the same run.
``benchmarks/run_all.py`` runs each benchmark in its own process with ``BENCH_FIGURES_JSON=<file>`` set, and
:func:`figure` keeps that file equal to :data:`FIGURES`: the figures travel as JSON, not as printed text. The
benchmarks that take ``--json PATH`` also write their detailed series for the plots there.

This machine is shared: anything compared is timed *interleaved* in one process (load changes hit both sides) and
the median of the repeats is used.
"""
from __future__ import annotations

import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Dict, Optional

#: The figures this process has reported, by name: ``{'value': str, 'detail': str | None, 'verdict': str | None}``.
FIGURES: Dict[str, dict] = {}
#: The environment variable naming the JSON file in which :func:`figure` keeps :data:`FIGURES` (set by run_all.py).
FIGURES_ENV = "BENCH_FIGURES_JSON"
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")

GiB = 2**30
MiB = 2**20


def verdict(ok: bool) -> str:
    """``PASS`` or ``MISS`` (a target not reached; ``FAIL`` is for a correctness check)."""
    return "PASS" if ok else "MISS"


def figure(name: str, value: str, detail: Optional[str] = None, result: Optional[str] = None) -> str:
    """Record one figure in :data:`FIGURES` (and in the file named by ``BENCH_FIGURES_JSON``); print and return
    its line.

    Args:
        name: an identifier (letters, digits, underscores).
        value: the measured value as shown (a ratio, a fraction, a speed-up such as ``6.6x``), without spaces.
        detail: what it was measured against, and the target.
        result: ``PASS`` or ``MISS`` against a speed target, ``FAIL`` for a failed correctness check, or None.
    """
    if not _NAME.fullmatch(name) or not value or " " in value or result not in (None, "PASS", "MISS", "FAIL"):
        raise ValueError(f"a figure needs an identifier name, a value without spaces and a verdict among "
                         f"PASS/MISS/FAIL/None, got name={name!r}, value={value!r}, result={result!r}")
    FIGURES[name] = {"value": value, "detail": detail, "verdict": result}
    if os.environ.get(FIGURES_ENV):
        write_json(os.environ[FIGURES_ENV], FIGURES)
    line = f"{name}: {value}" + (f" ({detail})" if detail else "") + (f" {result}" if result else "")
    print(line, flush=True)
    return line


def read_figures(path) -> Dict[str, dict]:
    """The figures a benchmark process recorded in ``path`` (its ``BENCH_FIGURES_JSON``); ``{}`` if none."""
    path = Path(path)
    return json.loads(path.read_text()) if path.is_file() else {}


def add_common_arguments(parser, memory_child: bool = False) -> None:
    """The options the benchmarks share: ``--threads``, ``--json`` and, for those that measure peak memory in a
    child process, the hidden ``--memory-child``. Apply ``--threads`` with :func:`set_threads`."""
    import argparse

    parser.add_argument("--threads", type=int, default=1,
                        help="CPU threads (default 1: on this shared 2-core machine a second thread mostly waits "
                             "for a busy core); 0 keeps torch's default")
    parser.add_argument("--json", type=Path, help="write the measurements here")
    if memory_child:
        parser.add_argument("--memory-child", help=argparse.SUPPRESS)


def set_threads(threads: int) -> None:
    """``torch.set_num_threads(threads)`` unless ``threads`` is 0 (keep torch's default)."""
    import torch

    if threads > 0:
        torch.set_num_threads(threads)


def threads_text(n: int, kind: str = "") -> str:
    """``'1 thread'``, ``'2 CPU threads'``: a thread count in words (``kind`` before the noun)."""
    return f"{n} {kind}thread{'' if n == 1 else 's'}"


def synchronize(device) -> None:
    """Wait for queued GPU work so that a timer measures it (no-op on the CPU)."""
    import torch

    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def interleaved_medians(fns: Dict[str, Callable[[], object]], repeats: int, warmup: int = 1, inner: int = 1,
                        device="cpu") -> Dict[str, float]:
    """Median seconds per call of each function, timed in turn ``repeats`` times (after ``warmup`` rounds)."""
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    samples: Dict[str, list] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            synchronize(device)
            start = time.perf_counter()
            for _ in range(inner):
                fn()
            synchronize(device)
            samples[name].append((time.perf_counter() - start) / inner)
    return {name: statistics.median(s) for name, s in samples.items()}


# ------------------------------------------------------------------------------------------ memory
# Peak resident memory of one call: reset the kernel's high-water mark (VmHWM) by writing 5 to
# /proc/self/clear_refs, run, read VmHWM back and subtract the resident memory before the call. Measure in a fresh
# process that first calls use_mmap_for_large_buffers(): glibc then serves every buffer above 64 KiB with mmap and
# returns it on free, so the resident size follows live memory instead of keeping freed heap pages.
M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter number (malloc.h)


def use_mmap_for_large_buffers(threshold: int = 65536) -> bool:
    """Make glibc allocate buffers above ``threshold`` bytes with mmap (as MALLOC_MMAP_THRESHOLD_ would)."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return bool(libc.mallopt(M_MMAP_THRESHOLD, threshold))
    except (OSError, AttributeError):
        return False


def _status_bytes(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"{field} not found in /proc/self/status")


def peak_memory_supported() -> bool:
    """True on Linux with a writable /proc/self/clear_refs."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        _status_bytes("VmHWM:")
        return True
    except OSError:
        return False


def memory_child_rows(script: str, child_args: list) -> Optional[list]:
    """Run ``python script --memory-child ...child_args`` in a fresh process and return the JSON rows it prints.

    Peak resident memory is per process, so each benchmark measures it in a child that runs nothing else.
    Returns None (after saying so) where the peak cannot be reset here; raises if the child fails.
    """
    if not peak_memory_supported():
        print("note: /proc/self/clear_refs is not writable here; peak memory not measured")
        return None
    env = {k: v for k, v in os.environ.items() if k != FIGURES_ENV}  # the child reports no figures
    proc = subprocess.run([sys.executable, script, "--memory-child", *map(str, child_args)],
                          capture_output=True, text=True, env=env)
    if proc.returncode:
        raise RuntimeError(f"memory child failed:\n{proc.stderr[-3000:]}")
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def peak_rss_delta(fn: Callable[[], object]) -> int:
    """Bytes by which the process's peak resident memory exceeded its resident memory before ``fn()``."""
    import gc

    gc.collect()
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # reset the peak-RSS mark to the current RSS
    base = _status_bytes("VmRSS:")
    result = fn()
    peak = _status_bytes("VmHWM:")
    del result
    return max(0, peak - base)


# ------------------------------------------------------------------------------------------ reports
def machine() -> dict:
    """What ran the benchmark: CPU model, cores, torch threads and version, memory, load, GPU."""
    import torch

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    info = {"cpu": cpu, "cores": os.cpu_count(), "torch_threads": torch.get_num_threads(),
            "torch": torch.__version__, "python": platform.python_version(),
            "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None}
    try:
        with open("/proc/meminfo") as f:
            info["ram_bytes"] = int(next(line for line in f if line.startswith("MemTotal")).split()[1]) * 1024
        info["load_average"] = [round(x, 2) for x in os.getloadavg()]
    except (OSError, StopIteration):
        pass
    return info


def write_json(path, data: dict) -> None:
    """Write ``data`` as indented JSON, creating the folder."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, sort_keys=False) + "\n")
