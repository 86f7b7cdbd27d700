"""The student's process of the grader: run a submitted notebook's definitions, call the graded function on the
grading cases, save what it returned, exit. It decides nothing.

    python -I booktools/grade_sandbox.py WORKDIR REPORT_FD      (started by booktools/grade.py, never by hand)

WORKDIR holds ``spec.json`` (the exercise, the name of the graded function, the notebook's imports, functions,
classes and simple assignments in notebook order, the time limit) and ``cases.pt`` (the inputs, drawn by the
grader from a seed this process never sees). This process

1. limits itself (address space, file size), disables sockets, and puts only the library on ``sys.path`` (not the
   repository: the grader's modules, which hold the reference solutions, cannot be imported);
2. replaces the library functions that answer the exercise by tripwires, which report the call on REPORT_FD (a
   pipe the grader reads; what is written there cannot be taken back) and raise;
3. runs the notebook's definitions, then the graded function on each case, under one time limit;
4. writes the outputs, made plain (tensors, numbers, strings, tuples; anything else as its type name), to
   ``outputs.pt``, which the grader reads with ``torch.load(weights_only=True)``.

The grader computes the expected outputs in its own process and judges there, so nothing done here (replacing
``tl.exercises.check``, writing files, exiting early) can change a verdict except by producing the right outputs.
It imports nothing of the grader.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import traceback
from pathlib import Path

PRELUDE = """\
import math
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import transformer_lib as tl
"""


class GradingTimeout(BaseException):
    """The time limit of the student's code (not an Exception: student code does not catch it by accident)."""


def _error(exc: BaseException) -> str:
    return traceback.format_exception_only(type(exc), exc)[-1].strip()[:500]


def main() -> int:
    workdir, report_fd = Path(sys.argv[1]), int(sys.argv[2])
    spec = json.loads((workdir / "spec.json").read_text(encoding="utf-8"))

    def report(**event) -> None:
        try:
            os.write(report_fd, (json.dumps(event) + "\n").encode("utf-8"))
        except OSError:
            pass

    # Only the library on the path: not the repository, not the grader's scripts.
    blocked = {str(Path(p).resolve()) for p in spec.get("blocked_paths", [])}
    sys.path[:] = [spec["lib"]] + [p for p in sys.path if p and str(Path(p).resolve()) not in blocked]

    import resource

    if spec.get("memory_gb"):
        limit = int(spec["memory_gb"] * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    file_limit = 512 * 2**20
    resource.setrlimit(resource.RLIMIT_FSIZE, (file_limit, file_limit))

    import socket

    def no_network(*args, **kwargs):
        raise PermissionError("network access is disabled while grading")

    socket.socket.connect = no_network
    socket.socket.connect_ex = no_network
    socket.create_connection = no_network
    socket.getaddrinfo = no_network

    import torch

    torch.set_num_threads(1)
    import transformer_lib  # noqa: F401 - the library the notebook uses
    from transformer_lib.exercises import engine, guard
    from transformer_lib.exercises.catalogue import EXERCISES

    ex = EXERCISES[spec["exercise"]]
    cases = [engine.decode_case(c) for c in torch.load(workdir / "cases.pt", weights_only=True)]
    (workdir / "cases.pt").unlink()

    class Blocker:
        """Refuses to import the grader's modules (they are not on the path either)."""

        @staticmethod
        def find_spec(name, path=None, target=None):
            if set(name.split(".")) & guard.GRADER_MODULES:
                raise ImportError(f"{name} is not available while grading")
            return None

    sys.meta_path.insert(0, Blocker)
    reported = set()

    def on_call(name: str) -> None:
        if name not in reported:
            reported.add(name)
            report(event="forbidden", name=name)

    guard.install_tripwires(engine.guarded_names(ex), on_call, keep_originals=False)

    def on_alarm(signum, frame):
        raise GradingTimeout()

    signal.signal(signal.SIGALRM, on_alarm)
    timeout = int(spec["timeout"])
    namespace: dict = {"__name__": "__main__"}
    errors: list = []
    outcomes: list = []
    params = None
    defined = False
    started = time.monotonic()
    report(event="start")
    signal.alarm(timeout)
    try:
        exec(compile(PRELUDE, "<prelude>", "exec"), namespace)
        for snippet in spec["snippets"]:
            try:
                exec(compile(snippet["source"], snippet["where"], "exec"), namespace)
            except GradingTimeout:
                raise
            except guard.ForbiddenCall:
                errors.append(f"{snippet['where']}: a call of the library's answer")
            except BaseException as exc:  # noqa: BLE001 - a broken cell only matters if the function needs it
                errors.append(f"{snippet['where']}: {_error(exc)}")
        fn = namespace.get(spec["function"])
        if not callable(fn) and spec.get("fallback"):
            fn = namespace.get(spec["fallback"])
        defined = callable(fn)
        if defined:
            params = engine.params_of(fn)
            for n, case in enumerate(cases, 1):
                report(event="case", n=n)
                try:
                    value = fn(**engine.clone_inputs(case))
                except NotImplementedError:
                    outcomes.append({"status": "not_implemented"})
                    break
                except GradingTimeout:
                    raise
                except guard.ForbiddenCall:
                    outcomes.append({"status": "error", "error": "a call of the library's answer to the exercise"})
                    break
                except BaseException as exc:  # noqa: BLE001 - SystemExit, KeyboardInterrupt: the student's error
                    outcomes.append({"status": "error", "error": _error(exc)})
                    break
                outcomes.append({"status": "ok", "value": engine.portable(value)})
    except GradingTimeout:
        outcomes.append({"status": "timeout", "error": f"stopped after {timeout} s (an infinite loop?)."})
    finally:
        signal.alarm(0)
    torch.save({"defined": defined, "params": params, "errors": errors[:5], "outcomes": outcomes,
                "seconds": round(time.monotonic() - started, 3)}, workdir / "outputs.pt")
    report(event="done")
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # no atexit handler of the student's code runs


if __name__ == "__main__":
    main()
