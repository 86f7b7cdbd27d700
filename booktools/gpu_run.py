"""The chapters' GPU settings, run for real: what `make test-gpu` records and compares.

A reader with a GPU (Colab, a rented machine) runs every chapter with its GPU settings: ``pick_settings`` picks
them whenever CUDA is present. The book's stored outputs come from the CPU settings, so nbval never sees the GPU
branch. This module runs it and keeps a record in the repository:

- :func:`collect` reads an executed chapter: every glued value with the tolerance its cell declares (the same
  ``# nbval-tolerance`` lines nbval uses), and every claim of the ledger with its verdict and adequacy;
- :func:`compare` compares two records: verdicts and text exactly, numbers within the declared tolerances;
- :func:`execute` runs one chapter in a fresh kernel under a wall-clock limit and measures its seconds and the
  peak GPU memory;
- :func:`main` (``python -m booktools.gpu_run``, ``make test-gpu``) strings them together and writes
  ``gpu-runs/reference.json``: the device, PyTorch and CUDA versions, the date and commit, and per chapter its
  status, seconds, peak memory, glued values and claims. The ledger page shows each claim's GPU verdict from that
  file beside the CPU one.

Each chapter's entry names the run it came from (device, PyTorch, date, commit, jobs, and a digest of each file of
``transformer_lib`` then: :func:`library_digest`) and a digest of the chapter's code (:func:`source_digest`). Both
digests read the code as Python parses it, so a comment, a blank line or a reformatting changes neither; the
ledger marks a GPU verdict whose chapter code has changed since its run, and names the library files whose code
has changed since each run.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import io
import json
import math
import platform
import re
import subprocess
import sys
import time
import tokenize
from pathlib import Path

from booktools import notebooks
from booktools.tolerance import compare_text, parse_declaration

ROOT = notebooks.ROOT
REFERENCE = ROOT / "gpu-runs" / "reference.json"
#: A chapter's GPU settings must finish within this many seconds alone on one H100-class GPU (the book's budget).
CHAPTER_BUDGET_S = 180.0
_CLAIM_PARTS = ("text", "value", "verdict", "adequacy")


def collect(nb) -> dict:
    """The glued values (with the tolerance their cell declares) and the claims of an executed notebook.

    Returns:
        dict: ``{"glued": {name: {"text": str, "tolerance": str | None}}, "claims": {id: {"text", "value",
        "verdict", "adequacy"}}}``; a tolerance is ``"abs=…, rel=…"`` or None (compared exactly).
    """
    glued: dict[str, dict] = {}
    for cell in nb["cells"]:
        if cell.get("cell_type") != "code":
            continue
        declaration = parse_declaration(notebooks.cell_source(cell))
        for output in cell.get("outputs", []) or []:
            name = ((output.get("metadata") or {}).get("scrapbook") or {}).get("name")
            if not name:
                continue
            one = notebooks.glued_values({"cells": [{"outputs": [output]}]})
            if name in one:
                tol = declaration.for_glue(name)
                glued[name] = {"text": one[name], "tolerance": None if tol is None else str(tol)}
    claims: dict[str, dict] = {}
    for name, entry in glued.items():
        if not name.startswith("claim_"):
            continue
        for part in _CLAIM_PARTS:
            if name.endswith("_" + part):
                claim_id = name[len("claim_"):-len(part) - 1]
                claims.setdefault(claim_id, {})[part] = entry["text"].strip()
    return {"glued": glued, "claims": claims}


def write_json(path: Path, data) -> None:
    """Write a record or an executed notebook as the repository stores JSON (indent 1, UTF-8, final newline)."""
    path.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def _canonical(node) -> str:
    """An abstract syntax tree as text, the same on every Python the book runs on: each node's name and its fields
    that are not empty (no line numbers; ``ast.dump`` would differ between versions, e.g. Python 3.12 added an
    empty ``type_params`` to every ``def``, and 3.12.1 an empty string to some f-strings' format specs)."""
    if isinstance(node, ast.JoinedStr):            # an f-string: its empty literal parts do nothing
        node = ast.JoinedStr(values=[v for v in node.values if not (isinstance(v, ast.Constant) and v.value == "")])
    if isinstance(node, ast.AST):
        fields = ", ".join(f"{name}={_canonical(value)}" for name, value in ast.iter_fields(node)
                           if value is not None and not (isinstance(value, list) and not value))
        return f"{type(node).__name__}({fields})"
    if isinstance(node, list):
        return "[" + ", ".join(_canonical(item) for item in node) + "]"
    return repr(node)


def _without_comments(source: str) -> str:
    """``source`` without its comments, blank lines and trailing spaces (Python's tokenizer finds the comments); the
    source as it is where it does not tokenize."""
    lines = io.StringIO(source).readlines()
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError):
        return source
    for token in tokens:
        if token.type == tokenize.COMMENT:
            row, col = token.start
            lines[row - 1] = lines[row - 1][:col]
    return "\n".join(line.rstrip() for line in lines if line.strip())


def _drop_docstrings(tree: ast.AST) -> ast.AST:
    """``tree`` without the docstrings of its module, classes and functions (changed in place)."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
                    and isinstance(first.value.value, str)):
                node.body = node.body[1:]
    return tree


def code_text(source: str, docstrings: bool = True) -> str:
    """What a piece of code does, as text for a digest: its syntax tree (:func:`_canonical`), so comments, blank
    lines and formatting do not count and every name, number and string does; the docstrings too unless
    ``docstrings`` is False. A cell that is not Python (IPython's ``%magic`` or ``!shell`` lines) counts as its
    source without comments and blank lines."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return _without_comments(source)
    return _canonical(tree if docstrings else _drop_docstrings(tree))


def source_digest(nb) -> str:
    """A digest of a chapter's code: its code cells in order, each as :func:`code_text` reads it (strings and
    docstrings count, since a chapter glues text; comments, blank lines, markdown, outputs and the cell that
    measures peak memory do not). The ledger compares it with the stored chapter's to tell a GPU verdict of the
    chapter as it is from one of an earlier version of its code."""
    digest = hashlib.sha256()
    for cell in nb["cells"]:
        if cell.get("cell_type") == "code":
            source = notebooks.cell_source(cell)
            if source != PEAK_MEMORY_CELL:
                digest.update(code_text(source).encode("utf-8") + b"\0")
    return digest.hexdigest()[:16]


LIBRARY = "transformer_lib"


def library_sources(commit: str | None = None) -> dict[str, str]:
    """The library's Python files, ``{path relative to the repository: source}``: those of the working tree, or with
    ``commit`` those of that commit (read with git)."""
    if commit is None:
        return {path.relative_to(ROOT).as_posix(): path.read_text(encoding="utf-8")
                for path in sorted((ROOT / LIBRARY).rglob("*.py"))}

    def git(*args) -> str:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout

    names = git("ls-tree", "-r", "--name-only", commit, "--", LIBRARY).splitlines()
    return {name: git("show", f"{commit}:{name}") for name in sorted(names) if name.endswith(".py")}


def library_digest(sources: dict[str, str] | None = None) -> dict[str, str]:
    """``{path: digest}`` of each library file's code (default: the working tree's), its docstrings and comments
    ignored: a run's entries record it, and the ledger names the files whose code has changed since."""
    sources = library_sources() if sources is None else sources
    return {path: hashlib.sha256(code_text(source, docstrings=False).encode("utf-8")).hexdigest()[:16]
            for path, source in sorted(sources.items())}


def library_changes(then: dict[str, str], now: dict[str, str]) -> dict[str, list[str]]:
    """How the library's code differs between two digests of :func:`library_digest`: ``{"changed": files in both
    whose code differs, "new": files only ``now`` has, "removed": files only ``then`` has}``, each file named within
    the library (``presets.py``, ``training/loop.py``) and sorted."""
    def name(path: str) -> str:
        return path[len(LIBRARY) + 1:] if path.startswith(LIBRARY + "/") else path

    return {"changed": sorted(name(p) for p in set(then) & set(now) if then[p] != now[p]),
            "new": sorted(name(p) for p in set(now) - set(then)),
            "removed": sorted(name(p) for p in set(then) - set(now))}


#: What each chapter entry says of the run that produced it (records may hold entries of several runs).
RUN_KEYS = ("device", "torch", "date", "commit", "jobs", "library")


def chapter_entry(nb, info: dict, run: dict) -> dict:
    """One chapter's entry of a record: status, seconds, peak memory, the run it came from, the digest of its code,
    its glued values and claims."""
    out = dict(info, run={k: run[k] for k in RUN_KEYS if k in run}, source=source_digest(nb))
    out.update(collect(nb))
    return out


def run_of(record: dict | None, entry: dict) -> dict:
    """The run a chapter's entry came from: its own ``run``, or (records written before entries named one) the
    record's environment."""
    env = (record or {}).get("environment", {})
    return entry.get("run") or {k: env[k] for k in RUN_KEYS if k in env}


def merge(old: dict | None, new: dict) -> dict:
    """``new`` with the chapters it did not run kept from ``old``, each with the run it came from.

    A GPU session may run only some chapters (a time limit, one chapter changed): the record keeps the latest
    entry of every chapter, and each entry names its run (``run``: device, PyTorch, date, commit, jobs, library).
    """
    merged = {"environment": dict(new["environment"]), "chapters": dict(new["chapters"])}
    for chapter, kept in (old or {}).get("chapters", {}).items():
        if chapter not in merged["chapters"]:
            merged["chapters"][chapter] = dict(kept, run=run_of(old, kept))
    merged["chapters"] = dict(sorted(merged["chapters"].items()))
    earlier = sorted(c for c in merged["chapters"] if c not in new["chapters"])
    if earlier:
        merged["environment"]["kept"] = (f"chapters {', '.join(c[:2] for c in earlier)} did not run this time: "
                                         "their entries come from earlier runs (each entry's 'run' names it)")
    return merged


def _tolerance(spec: str | None):
    from booktools.tolerance import parse_spec

    return None if spec is None else (None if spec == "exact" else parse_spec(spec))


def compare(reference: dict, new: dict) -> list[str]:
    """Differences between two GPU records, chapter by chapter.

    Verdicts and text compare exactly, numbers within the tolerance the chapter declares for them; a chapter
    that finished in the reference must finish again; glued values present in the reference must still exist.

    Returns:
        list[str]: one line per difference (empty: the runs agree).
    """
    problems = []
    for chapter, ref in reference.get("chapters", {}).items():
        got = new.get("chapters", {}).get(chapter)
        if got is None:
            continue                                    # not run this time (a subset of chapters)
        if ref.get("status") == "ok" and got.get("status") != "ok":
            problems.append(f"{chapter}: finished in the reference, now {got.get('status')}")
            continue
        for name, entry in ref.get("glued", {}).items():
            if name not in got.get("glued", {}):
                if got.get("status") == "ok":
                    problems.append(f"{chapter}: {name} was glued in the reference, not now")
                continue
            now = got["glued"][name]["text"]
            if name.endswith("_verdict"):
                if now.strip() != entry["text"].strip():
                    problems.append(f"{chapter}: {name} is {now.strip()!r}, reference {entry['text'].strip()!r}")
                continue
            why = compare_text(entry["text"], now, _tolerance(got["glued"][name].get("tolerance")))
            if why:
                problems.append(f"{chapter}: {name}: {why}")
    return problems


def environment() -> dict:
    """Device, library versions, date and commit of this run, and the digest of the book's library as it runs
    (the working tree's, which may differ from the commit's)."""
    import torch

    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip() or "unknown"
    return {"device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu",
            "torch": torch.__version__, "cuda": torch.version.cuda, "python": platform.python_version(),
            "date": time.strftime("%Y-%m-%d"), "commit": commit, "library": library_digest()}


PEAK_MEMORY_CELL = """\
import torch as _torch
print(f"PEAK_GIB={_torch.cuda.max_memory_allocated() / 2**30:.3f}" if _torch.cuda.is_available() else "PEAK_GIB=nan")
"""


def execute(path: Path, limit_s: float, env: dict | None = None) -> tuple[dict, dict]:
    """Run a copy of the chapter at ``path`` in a fresh kernel with its GPU settings, stopping after ``limit_s``.

    ``limit_s`` bounds the whole chapter, not each cell: a cell may run for what the cells before it left.

    Returns:
        (the executed notebook, ``{"status", "seconds", "peak_gib"}``); status is ``"ok"``, ``"timeout in cell
        k"`` or ``"error in cell k: …"``. The stored chapter is never written; its outputs are cleared in the copy
        first, so the cells after a stop have none.
    """
    import os

    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:          # the stored (CPU) outputs must not pass for GPU ones in cells a stop never reaches
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    nb.cells.append(nbformat.v4.new_code_cell(PEAK_MEMORY_CELL))
    os.environ.update(env or {})
    os.environ.pop("BOOK_MAX_STEPS", None)           # the GPU branch in full, not capped
    os.environ.pop("MPLBACKEND", None)
    start = time.perf_counter()
    running = {"cell": 0}

    def started(cell, cell_index, **_):
        running["cell"] = cell_index

    # the limit is on the whole chapter: each cell may use what the cells before it left of it
    client = NotebookClient(nb, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}},
                            timeout_func=lambda cell: max(1, math.ceil(limit_s - (time.perf_counter() - start))),
                            on_cell_start=started,
                            startup_timeout=300)  # thirteen kernels starting at once on one machine take a while
    notebooks.without_output_widgets(client)
    status = "ok"
    try:
        client.execute()
    except CellTimeoutError:
        status = f"timeout in cell {running['cell']}"
    except CellExecutionError as err:
        last_line = re.sub(r"\x1b\[[0-9;]*m", "", str(err).strip().splitlines()[-1])      # without colour codes
        status = f"error in cell {running['cell']}: {last_line[:200]}"
    except DeadKernelError as err:
        status = f"kernel died: {err}"
    except RuntimeError as err:             # e.g. "Kernel didn't respond in 300 seconds": this chapter, not the run
        status = f"kernel failed: {str(err)[:200]}"
    seconds = time.perf_counter() - start
    if status == "ok" and seconds > limit_s:
        status = f"over the limit of {limit_s:.0f} s"
    peak = float("nan")
    for output in nb.cells[-1].get("outputs", []):
        text = "".join(output.get("text", ""))
        if text.startswith("PEAK_GIB="):
            peak = float(text.split("=", 1)[1])
    nb.cells.pop()
    return nb, {"status": status, "seconds": round(seconds, 1), "peak_gib": peak}


def _execute_one(path: Path, limit_s: float):
    nb, info = execute(path, limit_s)
    return path, nb, info


def run_chapters(chapters: list[Path], limit_s: float, jobs: int = 1):
    """Yield ``(path, executed notebook, info)`` for each chapter, ``jobs`` of them at a time, as they finish.

    With ``jobs`` > 1 the chapters run in separate processes (each with its own kernel) and share the GPU, so
    their seconds are upper bounds of their times alone.
    """
    if jobs == 1:
        for path in chapters:
            yield _execute_one(path, limit_s)
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = [pool.submit(_execute_one, path, limit_s) for path in chapters]
        for future in as_completed(futures):
            yield future.result()


def load_reference(path: Path = REFERENCE) -> dict | None:
    """The stored GPU record, or None when the repository has none."""
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def claim_verdicts(record: dict | None) -> dict[str, dict]:
    """``{claim id: {"verdict", "text", "chapter", "status", "run", "source"}}`` of a GPU record (empty without
    one); ``run`` names the run the chapter's entry came from, ``source`` the digest of its code then."""
    out = {}
    for chapter, entry in (record or {}).get("chapters", {}).items():
        for claim_id, claim in entry.get("claims", {}).items():
            out[claim_id] = dict(claim, chapter=chapter, status=entry.get("status"), run=run_of(record, entry),
                                 source=entry.get("source"))
    return out


# ------------------------------------------------------------------------------------------- command line
_USAGE = """Run the GPU tests and every chapter's GPU settings on a CUDA machine; record and compare (make test-gpu).

    .venv/bin/python -m booktools.gpu_run                     # GPU tests, then every chapter, compared with the record
    .venv/bin/python -m booktools.gpu_run --chapters chapters/10_translation.ipynb --skip-tests
    .venv/bin/python -m booktools.gpu_run --update            # also write the run as the new record
    .venv/bin/python -m booktools.gpu_run --import-dir DIR --summary FILE --meta device=... torch=... date=...

1. pytest tests/test_gpu_path.py -m gpu (skipped with --skip-tests).
2. Each chapter of _toc.yml in turn, alone on the GPU, with its GPU settings in full (a copy; the stored chapter is
   not touched), under a wall-clock limit on the whole chapter (--limit, default 240 s): seconds, peak GPU memory,
   status. The executed copies go to _build/gpu-run/ (--out). A chapter over the budget of 180 s is flagged.
   --jobs N runs N chapters at a time (a GPU with memory to spare, little time): their seconds are then upper
   bounds, and timings measured inside the chapters are not those of a quiet GPU.
3. The glued values and claims of the run are compared with the record in the repository,
   gpu-runs/reference.json: verdicts and text exactly, numbers within each chapter's declared tolerances.
   --update (or no record yet) writes the run into the record (chapters not run keep their earlier entries, each
   naming its run); commit it.

Without CUDA it stops at once. --import-dir builds a record from chapters executed elsewhere (no CUDA needed).
Exit status 1 when a test fails, a chapter fails or runs out of time, or the run differs from the record.
"""

OUT = notebooks.ROOT / "_build" / "gpu-run"


def parse_meta(items: list[str]) -> dict:
    meta = {}
    for item in items:
        if "=" not in item:
            raise SystemExit(f"--meta takes key=value pairs, got {item!r}")
        key, value = item.split("=", 1)
        meta[key.strip()] = value.strip()
    return meta


def import_dir(folder: Path, summary: Path | None, meta: dict) -> dict:
    """A record from chapters executed elsewhere (e.g. the H200 run of 2026-11-25), with their stated statuses."""
    statuses = json.loads(summary.read_text(encoding="utf-8")) if summary else {}
    if "jobs" in meta:
        meta = dict(meta, jobs=int(meta["jobs"]))
    if "commit" in meta and "library" not in meta:           # the library as committed then, where git knows it
        try:
            meta = dict(meta, library=library_digest(library_sources(meta["commit"])))
        except subprocess.CalledProcessError:
            pass
    record = {"environment": meta, "chapters": {}}
    for path in sorted(folder.glob("*.ipynb")):
        nb = json.loads(path.read_text(encoding="utf-8"))
        info = statuses.get(path.stem, {})
        record["chapters"][path.stem] = chapter_entry(
            nb, {"status": info.get("status", "ok"), "seconds": info.get("seconds"), "peak_gib": info.get("peak_gib")},
            meta)
    return record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=_USAGE.split("\n\n")[0])
    parser.add_argument("--chapters", nargs="*", help="chapters to run (default: all of _toc.yml)")
    parser.add_argument("--limit", type=float, default=240.0, help="seconds per chapter before it is stopped")
    parser.add_argument("--jobs", type=int, default=1,
                        help="chapters run at a time (default 1: each alone, the times the budget is about)")
    parser.add_argument("--out", type=Path, default=OUT, help="folder for the executed copies and run.json")
    parser.add_argument("--skip-tests", action="store_true", help="do not run pytest -m gpu first")
    parser.add_argument("--update", action="store_true", help="write this run as gpu-runs/reference.json")
    parser.add_argument("--reference", type=Path, default=REFERENCE, help="the record to compare with")
    parser.add_argument("--import-dir", type=Path, help="build a record from executed chapters in this folder")
    parser.add_argument("--summary", type=Path, help="with --import-dir: JSON {chapter: {status, seconds}}")
    parser.add_argument("--meta", nargs="*", default=[], help="with --import-dir: key=value (device, torch, date…)")
    parser.add_argument("--merge", action="store_true",
                        help="with --import-dir: keep the record's entries of the chapters not in the folder")
    args = parser.parse_args(argv)

    if args.import_dir:
        record = import_dir(args.import_dir, args.summary, parse_meta(args.meta))
        if args.merge:
            record = merge(load_reference(args.reference), record)
        args.reference.parent.mkdir(parents=True, exist_ok=True)
        write_json(args.reference, record)
        print(f"wrote {notebooks.relative(args.reference)}: {len(record['chapters'])} chapters")
        return 0

    if args.jobs < 1:
        parser.error(f"--jobs must be a positive number of chapters, got {args.jobs}")
    import torch

    if not torch.cuda.is_available():
        print("make test-gpu needs a CUDA GPU, and torch.cuda.is_available() is False here "
              f"(torch {torch.__version__}, CUDA build: {torch.version.cuda or 'none'}). Run it on a GPU machine: "
              "README.md, 'Running the GPU settings'.", file=sys.stderr)
        return 2

    failed = False
    if not args.skip_tests:
        tests = subprocess.run([sys.executable, "-m", "pytest", "tests/test_gpu_path.py", "-m", "gpu", "-q",
                                "-p", "no:randomly"], cwd=notebooks.ROOT)
        failed |= tests.returncode != 0

    if args.chapters:
        chapters = [Path(c).resolve() for c in args.chapters]
    else:
        try:
            chapters = notebooks.toc_chapters()
        except ImportError as err:                  # a GPU machine with PyTorch but without Jupyter Book
            print(f"reading _toc.yml needs Jupyter Book's sphinx-external-toc ({err}); install the book's "
                  "requirements (pip install -r requirements.txt) or name the chapters: --chapters "
                  "chapters/*.ipynb", file=sys.stderr)
            return 2
    record = {"environment": dict(environment(), jobs=args.jobs), "chapters": {}}
    if args.jobs > 1:
        record["environment"]["note"] = (f"{args.jobs} chapters ran at a time on the one GPU: their seconds are upper "
                                         "bounds of the time alone, and their timings are not those of a quiet GPU")
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    print(f"{'chapter':<32} {'status':<24} {'seconds':>8} {'peak GiB':>9}")
    for path, nb, info in run_chapters(chapters, args.limit, args.jobs):
        write_json(out / path.name, nb)
        record["chapters"][path.stem] = chapter_entry(nb, info, record["environment"])
        # written after every chapter: a run stopped from outside still leaves what it finished
        write_json(out / "run.json", record)
        over = f"  OVER {CHAPTER_BUDGET_S:.0f} s" if info["seconds"] > CHAPTER_BUDGET_S else ""
        print(f"{path.stem:<32} {info['status'][:24]:<24} {info['seconds']:>8.1f} {info['peak_gib']:>9.2f}{over}",
              flush=True)
        failed |= info["status"] != "ok"
    record["chapters"] = dict(sorted(record["chapters"].items()))
    total = sum(c["seconds"] for c in record["chapters"].values())
    print(f"total {total:.0f} s on {record['environment']['device']}"
          + (f" ({args.jobs} chapters at a time)" if args.jobs > 1 else ""))
    write_json(out / "run.json", record)

    reference = load_reference(args.reference)
    if reference is not None:
        problems = compare(reference, record)
        for line in problems:
            print(f"differs from {notebooks.relative(args.reference)}: {line}")
        print(f"{len(problems)} difference(s) from the record of {reference['environment'].get('date')} on "
              f"{reference['environment'].get('device')}")
        failed |= bool(problems)
    if args.update or reference is None:
        args.reference.parent.mkdir(parents=True, exist_ok=True)
        merged = merge(reference, record)                 # chapters not run this time keep their earlier entries
        write_json(args.reference, merged)
        print(f"wrote {notebooks.relative(args.reference)}: {len(record['chapters'])} chapter(s) from this run"
              + (f", {len(merged['chapters']) - len(record['chapters'])} kept from earlier runs"
                 if len(merged["chapters"]) > len(record["chapters"]) else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
