#!/usr/bin/env python
"""Measure how far each chapter's printed and glued numbers move on other platforms.

    .venv/bin/python -m booktools.measure_spread run [chapters ...] [--configs default compat seed1 seed2] [--jobs 2]
    .venv/bin/python -m booktools.measure_spread report [chapters ...]

``run`` executes copies of the chapters (never the stored notebooks) under each configuration and
keeps them in ``_build/spread/<config>/``:

- ``native``: this machine as it is;
- ``default``: ``ATEN_CPU_CAPABILITY=default`` (ATen's non-vectorised kernels, as on a CPU
  without AVX2, and other matmul blockings);
- ``compat``: ``default`` plus ``MKL_CBWR=COMPATIBLE`` (MKL's most conservative code path);
- ``avx2``: ``ATEN_CPU_CAPABILITY=avx2`` (on an AVX-512 machine: the narrower kernels);
- ``seedN``: the chapter's ``SEED = 0`` replaced by ``SEED = N``: a different initialisation and
  batch order, the size of change that a different floating-point path produces after a few
  hundred chaotic training steps.

``report`` compares every number of every code cell with the stored notebook (as
:mod:`booktools.nbval_plugin` would) and writes ``_build/spread/report.json`` and a table per
chapter: the largest absolute and relative change of each cell across CPU configurations and
across seeds, the tolerance the cell declares, and whether the CPU spread fits inside it.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
from booktools import notebooks as bookkit  # noqa: E402
from booktools.tolerance import parse_declaration, split_numbers  # noqa: E402

OUT = ROOT / "_build" / "spread"
CPU_CONFIGS = {
    "native": {},
    "default": {"ATEN_CPU_CAPABILITY": "default"},
    "compat": {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE"},
    "avx2": {"ATEN_CPU_CAPABILITY": "avx2"},
}
SKIP = {"metadata", "traceback", "output_type", "name", "execution_count", "transient",
        "application/vnd.jupyter.widget-view+json", "image/png", "image/jpeg", "image/svg+xml"}


def execute(args: tuple[str, str, int]) -> str:
    chapter, config, timeout = args
    from nbclient import NotebookClient

    path = ROOT / chapter
    nb = nbformat.read(path, as_version=4)
    env = {}
    if config.startswith("seed"):
        seed = int(config[4:])
        for cell in nb.cells:
            if cell.cell_type == "code" and "SEED = 0" in cell.source:
                cell.source = cell.source.replace("SEED = 0", f"SEED = {seed}", 1)
    else:
        env = CPU_CONFIGS[config]
    for key in ("ATEN_CPU_CAPABILITY", "MKL_CBWR"):  # a worker process runs several configurations
        os.environ.pop(key, None)
    os.environ.update(env)
    os.environ.pop("MPLBACKEND", None)
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}}, allow_errors=True)
    bookkit.without_output_widgets(client)
    start = time.perf_counter()
    client.execute()
    target = OUT / config / path.name
    target.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, target)
    return f"{config:>8} {path.name}: {time.perf_counter() - start:.1f} s"


def sanitizers() -> list[tuple[str, str]]:
    """(regex, replacement) pairs of tests/nbval_sanitize.cfg, applied before comparing, as nbval does."""
    import configparser

    parser = configparser.ConfigParser(interpolation=None)
    parser.read(ROOT / "tests" / "nbval_sanitize.cfg")
    return [(parser[s]["regex"], parser[s]["replace"]) for s in parser.sections()]


SANITIZERS = sanitizers()


def sanitize(text: str) -> str:
    for regex, replace in SANITIZERS:
        text = re.sub(regex, replace, text)
    return text


def flatten(cell) -> dict[str, list[tuple[str, str | None]]]:
    """{mime key: [(text, glue name)]} of a code cell's outputs (sanitized), streams merged per name."""
    flat: dict[str, list] = {}
    streams: dict[str, str] = {}
    for output in cell.get("outputs", []):
        if output.get("output_type") == "stream":
            streams[output["name"]] = streams.get(output["name"], "") + bookkit.cell_source({"source": output["text"]})
            continue
        if output.get("output_type") == "error":
            flat.setdefault("error", []).append((output.get("ename", "") + ": " + output.get("evalue", ""), None))
            continue
        name = (output.get("metadata") or {}).get("scrapbook", {}).get("name")
        for key, value in (output.get("data") or {}).items():
            if key not in SKIP:
                text = "".join(value) if isinstance(value, list) else value
                flat.setdefault(key, []).append((sanitize(text) if isinstance(text, str) else json.dumps(text), name))
    for name, text in streams.items():
        flat.setdefault(f"stream:{name}", []).append((sanitize(text), None))
    return flat


def compare_cell(stored, fresh) -> dict:
    """Largest absolute and relative change of the numbers of one cell, and any text change."""
    a, b = flatten(stored), flatten(fresh)
    result = {"abs": 0.0, "rel": 0.0, "text": [], "by_glue": {}}
    if set(a) != set(b):
        result["text"].append(f"output kinds {sorted(a)} vs {sorted(b)}")
        return result
    for key in a:
        if len(a[key]) != len(b[key]):
            result["text"].append(f"{key}: {len(a[key])} vs {len(b[key])} outputs")
            continue
        for (ref, name), (new, _) in zip(a[key], b[key]):
            ref_parts, ref_numbers = split_numbers(ref)
            new_parts, new_numbers = split_numbers(new)
            if ref_parts != new_parts:
                result["text"].append(f"{key} {name or ''}: {ref[:80]!r} vs {new[:80]!r}")
                continue
            for r, x in zip(ref_numbers, new_numbers):
                d = abs(x - r)
                result["abs"] = max(result["abs"], d)
                result["rel"] = max(result["rel"], d / abs(r) if r else (0.0 if d == 0 else float("inf")))
                if name and d:
                    result["by_glue"][name] = max(result["by_glue"].get(name, 0.0), d)
    return result


def nice_ceil(x: float) -> float:
    """The smallest of 1, 2, 2.5, 5 times a power of ten that is >= x."""
    if x <= 0:
        return 0.0
    power = 10 ** math.floor(math.log10(x))
    return next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= x * (1 - 1e-9))


def propose(row: dict) -> str:
    """A declaration line covering twice the CPU spread and the seed spread (a starting point, to be read)."""
    cpu, seed = row.get("cpu_abs", 0.0), row.get("seed_abs", 0.0)
    if not cpu:
        return "(identical across CPU kernels: compared exactly)"
    tol = nice_ceil(max(2 * cpu, seed))
    return (f"# nbval-tolerance: abs={tol:g}  (measured spread: CPU kernels {cpu:.2g}, seeds {seed:.2g})"
            if tol else "(numbers unchanged; text changed: fix the cause)")


def report(chapters: list[Path]) -> dict:
    configs = sorted(p.name for p in OUT.iterdir() if p.is_dir()) if OUT.exists() else []
    summary = {}
    for chapter in chapters:
        stored = nbformat.read(chapter, as_version=4)
        runs = {c: nbformat.read(OUT / c / chapter.name, as_version=4)
                for c in configs if (OUT / c / chapter.name).exists()}
        if not runs:
            continue
        print(f"\n## {chapter.name} ({', '.join(runs)})")
        print(f"{'cell':>4}  {'CPU abs':>9} {'CPU rel':>8}  {'seed abs':>9} {'seed rel':>8}  declared   first line")
        rows = []
        for index, cell in enumerate(stored.cells):
            if cell.cell_type != "code":
                continue
            row = {"cell": index, "declared": str(parse_declaration(cell.source).default or "")}
            for config, nb in runs.items():
                if index >= len(nb.cells) or nb.cells[index].cell_type != "code":
                    continue
                kind = "seed" if config.startswith("seed") else "cpu"
                c = compare_cell(cell, nb.cells[index])
                row[f"{kind}_abs"] = max(row.get(f"{kind}_abs", 0.0), c["abs"])
                row[f"{kind}_rel"] = max(row.get(f"{kind}_rel", 0.0), c["rel"])
                row.setdefault(f"{kind}_text", []).extend(f"{config}: {t}" for t in c["text"])
                for name, d in c["by_glue"].items():
                    glue = row.setdefault(f"{kind}_glue", {})
                    glue[name] = max(glue.get(name, 0.0), d)
            changed = any(row.get(k) for k in ("cpu_abs", "seed_abs", "cpu_text", "seed_text"))
            if changed:
                row["proposal"] = propose(row)
                first = cell.source.strip().splitlines()[0][:50] if cell.source.strip() else ""
                print(f"{index:>4}  {row.get('cpu_abs', 0):>9.3g} {row.get('cpu_rel', 0):>8.2g}  "
                      f"{row.get('seed_abs', 0):>9.3g} {row.get('seed_rel', 0):>8.2g}  {row['declared']:<10} {first}")
                print(f"        proposal: {row['proposal']}")
                for t in (row.get("cpu_text") or [])[:3] + (row.get("seed_text") or [])[:2]:
                    print(f"        text: {t[:150]}")
            rows.append(row)
        summary[chapter.name] = rows
    (OUT / "report.json").write_text(json.dumps(summary, indent=1))
    return summary


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=["run", "report"])
    parser.add_argument("chapters", nargs="*", type=Path)
    parser.add_argument("--configs", nargs="+", default=["native", "default", "compat", "seed1", "seed2"])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--timeout", type=int, default=600)
    args = parser.parse_args(argv)
    chapters = [p.resolve() for p in args.chapters] or bookkit.toc_chapters()
    if args.action == "run":
        jobs = [(str(c.relative_to(ROOT)), config, args.timeout) for c in chapters for config in args.configs]
        with ProcessPoolExecutor(args.jobs) as pool:
            for line in pool.map(execute, jobs):
                print(line, flush=True)
    else:
        report(chapters)
    return 0


if __name__ == "__main__":
    sys.exit(main())
