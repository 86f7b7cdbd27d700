#!/usr/bin/env python
"""Run every benchmark of the book with one command, print every figure, write the results and the plots.

    make bench                                       # = .venv/bin/python benchmarks/run_all.py
    .venv/bin/python benchmarks/run_all.py --quick   # smoke run (results in _build/benchmarks-quick)
    .venv/bin/python benchmarks/run_all.py --chapters   # also execute every chapter: seconds and peak memory

Each benchmark runs in its own process (``benchmarks/bench_*.py``); its figures (``benchkit.figure``) come back as
JSON through the file named by ``BENCH_FIGURES_JSON`` and, for the benchmarks that take ``--json``, its detailed
series too. The chapter table is ``benchmarks/chapter_times.py``'s report (seconds from the last ``make nbval`` run,
or stored in the notebooks), called as a function. With ``--chapters`` every chapter of
``_toc.yml`` is also executed here, one at a time, and its wall time and the peak resident memory of its kernel
are stored in ``results/chapters.json`` (a later run without ``--chapters`` reports that file, with its date).

Written to ``--out`` (default ``benchmarks/results``):

* ``latest.json``: everything measured, with the machine and the commit;
* ``summary.md``: the tables of the appendix page ``appendix_performance.md``, generated from ``latest.json``
  by :func:`render_summary` (``tests/test_benchmarks.py`` checks that the two agree);
* ``reference_vs_fused.png``, ``efficient.png``, ``lm_throughput.png``, ``chapters.png``: the page's plots.

The exit status is 1 if a benchmark crashed or a correctness check (``FAIL``) failed; a missed speed target
(``MISS``) is reported, not fatal, unless ``--strict``.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
import benchkit
import chapter_times  # noqa: E402

RESULTS = HERE / "results"
QUICK_RESULTS = ROOT / "_build" / "benchmarks-quick"
NBVAL_REPORT = ROOT / "_build" / "reports" / "nbval.xml"
CHAPTER_BUDGET_S, BOOK_BUDGET_S = chapter_times.CHAPTER_BUDGET_S, chapter_times.BOOK_BUDGET_S
MEMORY_BUDGET = 2 * benchkit.GiB  # peak memory of a chapter at its CPU setting
NO_GPU = "not measured: no GPU in this session"

#: The benchmarks in the order they run: (key, script, takes --json, title, extra arguments).
BENCHMARKS = (
    ("attention", "bench_attention.py", False, "Multi-head attention: fast path vs torch.nn.MultiheadAttention", ()),
    ("reference_vs_fused", "bench_reference_vs_fused.py", True, "Reference vs fused attention against T", ()),
    ("lm_throughput", "bench_lm_throughput.py", True, "Language-model training throughput and MFU (chapter 11)",
     ()),
    ("lm_throughput_wider", "bench_lm_throughput.py", True,
     "The same at a wider setting (d_model 128, 4 layers, batch 32)", ("--settings-from", "default",
                                                                       "--no-compare-threads")),
    ("generation", "bench_generation.py", False, "KV-cache generation", ()),
    ("efficient", "bench_efficient.py", True, "Full vs Linformer vs sparse attention", ()),
)
#: Figure-name prefixes of the benchmarks that rerun a script with other settings.
PREFIXES = {"lm_throughput_wider": "wider_", "lm_throughput_cuda": "cuda_"}
#: Commands of the GPU measurements (run where CUDA is available; recorded as not measured otherwise).
GPU_COMMANDS = (
    "python benchmarks/bench_lm_throughput.py --device cuda --amp bf16",
    "python benchmarks/bench_lm_throughput.py --device cuda --amp bf16 --compile",
    "python benchmarks/bench_reference_vs_fused.py --device cuda",
    "python benchmarks/bench_attention.py --device cuda",
    "python benchmarks/bench_generation.py --device cuda",
    "pytest tests/test_gpu_path.py -m gpu",
)


# ------------------------------------------------------------------------------------------- running
def run_logged(cmd: list, env=None) -> tuple:
    """Run ``cmd``, echo its output line by line, return ``(returncode, output, seconds)``."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT, env=env)
    lines = []
    for line in proc.stdout:
        if line.startswith("USDT:"):  # the profiler's start/stop notices
            continue
        print("    " + line, end="", flush=True)
        lines.append(line)
    proc.wait()
    return proc.returncode, "".join(lines), time.perf_counter() - start


def run_benchmark(key: str, script: str, takes_json: bool, quick: bool, extra=()) -> dict:
    """Run one benchmark script; its figures, its JSON details, its exit status and wall time."""
    with tempfile.TemporaryDirectory() as tmp:
        out_json, figures_json = Path(tmp) / f"{key}.json", Path(tmp) / f"{key}-figures.json"
        cmd = [sys.executable, str(HERE / script)] + (["--quick"] if quick else []) + list(extra)
        if takes_json:
            cmd += ["--json", str(out_json)]
        code, _, seconds = run_logged(cmd, env={**os.environ, benchkit.FIGURES_ENV: str(figures_json)})
        details = json.loads(out_json.read_text()) if takes_json and out_json.is_file() else None
        figures = benchkit.read_figures(figures_json)
    if code:
        print(f"!! {script} exited with status {code}")
    return {"script": f"benchmarks/{script}", "args": cmd[2:-2] if takes_json else cmd[2:],
            "returncode": code, "seconds": round(seconds, 1), "figures": figures,
            "details": details}


def chapter_table(runs_file: Optional[Path] = None) -> dict:
    """``benchmarks/chapter_times.py``'s report: its rows, total and printed table.

    ``runs_file``: the chapters.json of a ``--chapters`` run made now; its times take precedence.
    """
    junit = NBVAL_REPORT if NBVAL_REPORT.is_file() else None
    runs = runs_file if runs_file is not None and runs_file.is_file() else None
    data = chapter_times.report(junit, runs)
    shown = ["benchmarks/chapter_times.py"] + [f"{flag} {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}"
                                               for flag, path in (("--junit", junit), ("--runs", runs)) if path]
    table = chapter_times.format_report(data)
    print(table)
    rows = [{"chapter": r["chapter"], "seconds": r["seconds"], "source": r["source"] if r["source"] != "missing"
             else "", "stored": "-" if r["stored"] is None else f"{r['stored']:.1f}"} for r in data["rows"]]
    return {"command": " ".join(shown), "returncode": 0, "table": table, "rows": rows, "total": data["total"],
            "chapter_budget_s": CHAPTER_BUDGET_S, "book_budget_s": BOOK_BUDGET_S}


def execute_chapter(path: str) -> None:
    """(Child process) execute one chapter; print its seconds and the peak RSS of its kernel as JSON."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(ROOT / path, as_version=4)
    client = NotebookClient(nb, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str((ROOT / path).parent)}})
    client.widget_registry = {}  # no Output-widget imitation: booktools.notebooks.without_output_widgets
    start = time.perf_counter()
    client.execute()
    seconds = time.perf_counter() - start
    # The kernel was this process's child and has exited: ru_maxrss of the children is its peak RSS (KiB).
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    print(json.dumps({"chapter": path, "seconds": seconds, "peak_rss_bytes": peak}))


def run_chapters() -> dict:
    """Execute every chapter of ``_toc.yml`` in turn (nothing is written to the notebooks)."""
    rows = []
    for path in chapter_times.toc_chapters():
        name = chapter_times.relative(path)
        if not path.is_file():
            continue
        print(f"  executing {name}", flush=True)
        proc = subprocess.run([sys.executable, __file__, "--chapter-child", name], cwd=ROOT, capture_output=True,
                              text=True)
        if proc.returncode:
            print(proc.stderr[-2000:])
            rows.append({"chapter": name, "error": proc.stderr.strip().splitlines()[-1:]})
            continue
        row = json.loads(proc.stdout.strip().splitlines()[-1])
        print(f"    {row['seconds']:.1f} s, peak {row['peak_rss_bytes'] / benchkit.MiB:.0f} MiB", flush=True)
        rows.append(row)
    return {"measured": now(), "machine": benchkit.machine(), "memory_budget_bytes": MEMORY_BUDGET, "rows": rows}


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def git_commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True).stdout.strip()
        return out.stdout.strip() + (" (with uncommitted changes)" if dirty else "")
    except OSError:
        return "unknown"


def all_figures(results: dict) -> list:
    """Every figure of every benchmark, in run order: dicts with the benchmark's key."""
    out = []
    for key, bench in results["benchmarks"].items():
        prefix = PREFIXES.get(key, "")
        for name, fig in bench.get("figures", {}).items():
            out.append(dict(fig, name=prefix + name, benchmark=key))
    chapters = results.get("chapters") or {}
    for fig in chapter_figures(chapters, results.get("chapter_runs")):
        out.append(dict(fig, benchmark="chapters"))
    return out


def _seconds(value) -> str:
    """A chapter's seconds as the tables print them (one decimal; '—' when there is no time)."""
    return "—" if value is None else f"{value:.1f}"


def _over_budget(rows: list) -> dict:
    """How many chapters of ``rows`` (dicts with ``chapter`` and ``seconds``) are over their own budget
    (``chapter_times.chapter_budget``): ``value``, ``detail`` (which, or the closest to its budget), ``target`` and
    ``verdict``."""
    budget = chapter_times.chapter_budget
    over = [r for r in rows if r["seconds"] > budget(r["chapter"])]
    closest = max(rows, key=lambda r: r["seconds"] / budget(r["chapter"]))
    named = "; ".join(f"{Path(r['chapter']).stem} {r['seconds']:.0f} s of {budget(r['chapter']):.0f}" for r in over)
    return {"value": str(len(over)),
            "detail": (f"of {len(rows)}: {named}" if over else
                       f"of {len(rows)}; closest: {Path(closest['chapter']).stem} {closest['seconds']:.0f} s of "
                       f"{budget(closest['chapter']):.0f}"),
            "target": f"budget {chapter_times.budget_text()}; target <= 0 chapters over budget",
            "verdict": benchkit.verdict(not over)}


def chapter_figures(chapters: dict, runs) -> list:
    """The book-level figures: the chapters over their budgets and the total, against the budgets; peak memory if
    measured."""
    figs = []
    rows = [r for r in chapters.get("rows", []) if r.get("seconds") is not None]
    if rows:
        sources = sorted({r["source"] for r in rows})
        over = _over_budget(rows)
        figs.append({"name": "chapters_over_budget", "value": over["value"],
                     "detail": f"{over['detail']} (seconds from: {', '.join(sources)}); {over['target']}",
                     "verdict": over["verdict"]})
        total = sum(r["seconds"] for r in rows)
        figs.append({"name": "book_total_s", "value": f"{total:.1f}",
                     "detail": f"{len(rows)} chapters, target <= {BOOK_BUDGET_S:.0f}",
                     "verdict": benchkit.verdict(total <= BOOK_BUDGET_S)})
    measured = [r for r in (runs or {}).get("rows", []) if "peak_rss_bytes" in r]
    if measured:
        over = _over_budget(measured)
        figs.append({"name": "chapters_over_budget_run", "value": over["value"],
                     "detail": f"{over['detail']}, executed alone by run_all.py --chapters on {runs['measured']}; "
                               f"{over['target']}",
                     "verdict": over["verdict"]})
        total = sum(r["seconds"] for r in measured)
        figs.append({"name": "book_total_run_s", "value": f"{total:.1f}",
                     "detail": f"{len(measured)} chapters executed one after the other, target <= {BOOK_BUDGET_S:.0f}",
                     "verdict": benchkit.verdict(total <= BOOK_BUDGET_S)})
        top = max(measured, key=lambda r: r["peak_rss_bytes"])
        figs.append({"name": "chapter_peak_memory_gib", "value": f"{top['peak_rss_bytes'] / benchkit.GiB:.2f}",
                     "detail": f"{top['chapter']}, kernel peak RSS, measured {runs['measured']}, "
                               f"target <= {MEMORY_BUDGET / benchkit.GiB:.0f}",
                     "verdict": benchkit.verdict(top["peak_rss_bytes"] <= MEMORY_BUDGET)})
    return figs


# ------------------------------------------------------------------------------------------- plots
def _save(fig, path: Path) -> None:
    fig.savefig(path, dpi=110, bbox_inches="tight", metadata={"Software": None})
    import matplotlib.pyplot as plt

    plt.close(fig)


def _empty(ax, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes)
    ax.set_xticks([])
    ax.set_yticks([])


def make_plots(results: dict, out: Path) -> list:
    """Write the PNG plots of the appendix; return their names."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    try:
        from transformer_lib.plotting import use_book_style

        use_book_style()
    except ImportError:
        pass
    written = []
    bench = results["benchmarks"]

    # Reference vs fused: time and peak memory against T (log-log), with the memory budget.
    fig, (ax_t, ax_m) = plt.subplots(1, 2, figsize=(10, 3.6))
    det = (bench.get("reference_vs_fused") or {}).get("details")
    if det:
        for path, style in (("reference", "o-"), ("fused", "s-")):
            ts = sorted(int(t) for t in det["time_s"].get(path, {}))
            ax_t.plot(ts, [det["time_s"][path][str(t)] * 1e3 for t in ts], style, label=path)
            mem = det["peak_bytes"].get(path, {})
            tm = sorted(int(t) for t in mem)
            ax_m.plot(tm, [max(mem[str(t)], 1) / benchkit.MiB for t in tm], style, label=path)
        ax_m.axhline(det["config"]["budget_bytes"] / benchkit.MiB, color="grey", ls="--", lw=1,
                     label=f"budget {det['config']['budget_bytes'] / benchkit.GiB:g} GiB")
        for ax, label in ((ax_t, "forward time (ms)"), (ax_m, "peak memory above inputs (MiB)")):
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xlabel("sequence length T")
            ax.set_ylabel(label)
            ax.legend()
        ax_t.set_title("time: both grow as T²")
        ax_m.set_title("memory: reference T², fused T")
    else:
        _empty(ax_t, "not measured")
        _empty(ax_m, "not measured")
    _save(fig, out / "reference_vs_fused.png")
    written.append("reference_vs_fused.png")

    # Efficient attention: time and memory of each kind at each n.
    fig, (ax_t, ax_m) = plt.subplots(1, 2, figsize=(10, 3.4))
    det = (bench.get("efficient") or {}).get("details")
    if det:
        kinds = list(det["time_s"])
        ns = det["lengths"]
        width = 0.8 / len(ns)
        for j, n in enumerate(ns):
            xs = [i + (j - (len(ns) - 1) / 2) * width for i in range(len(kinds))]
            ax_t.bar(xs, [det["time_s"][k][str(n)] * 1e3 for k in kinds], width, label=f"n = {n}")
            if det["peak_bytes"]:
                ax_m.bar(xs, [det["peak_bytes"][k][str(n)] / benchkit.MiB for k in kinds], width, label=f"n = {n}")
        for ax, label in ((ax_t, "forward time (ms)"), (ax_m, "peak memory (MiB)")):
            ax.set_xticks(range(len(kinds)))
            ax.set_xticklabels([k.replace("_", "\n") for k in kinds])
            ax.set_yscale("log")
            ax.set_ylabel(label)
            ax.legend(loc="upper left")
    else:
        _empty(ax_t, "not measured")
        _empty(ax_m, "not measured")
    _save(fig, out / "efficient.png")
    written.append("efficient.png")

    # LM throughput: achieved model FLOP/s against the matmul rates measured in the same run.
    det = (bench.get("lm_throughput") or {}).get("details")
    bars = []
    if det:
        bars = [("training (model FLOPs)", det["achieved_flops"], "#DD8452")]
        if det.get("gemm_flops_in_training"):
            bars.append(("matmuls inside training", det["gemm_flops_in_training"], "#DD8452"))
        wider = (bench.get("lm_throughput_wider") or {}).get("details")
        if wider:
            bars.append((f"training, wider (d_model={wider['settings']['d_model']})", wider["achieved_flops"],
                         "#C44E52"))
        bars.append((f"model's matmul {det['ff_matmul_shape']}", det["ff_matmul_flops"], "#4C72B0"))
        bars += [(f"{n}x{n} matmul", f, "#4C72B0") for n, f in det["peak_by_size"].items()]
    fig, ax = plt.subplots(figsize=(7.5, 0.42 * max(len(bars), 4) + 0.9))
    if det:
        ax.barh([b[0] for b in bars][::-1], [b[1] / 1e9 for b in bars][::-1], color=[b[2] for b in bars][::-1])
        ax.axvline(det["peak_flops"] / 1e9 * det["target_mfu"], color="grey", ls="--", lw=1,
                   label=f"target: {det['target_mfu']:.0%} of the best matmul")
        ax.set_xlabel(f"GFLOP/s ({det['peak_dtype']}, {benchkit.threads_text(det['threads'])})")
        ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))
    else:
        _empty(ax, "not measured")
    _save(fig, out / "lm_throughput.png")
    written.append("lm_throughput.png")

    # Chapters: seconds per chapter against the budget (chapter_times.py, and executed alone when measured), and
    # the peak memory of each chapter's kernel when measured.
    runs = results.get("chapter_runs")
    rows = [r for r in (results.get("chapters") or {}).get("rows", []) if r.get("seconds") is not None]
    measured = {r["chapter"]: r for r in (runs or {}).get("rows", []) if "peak_rss_bytes" in r}
    names = [r["chapter"] for r in rows] + [c for c in measured if c not in {r["chapter"] for r in rows}]
    fig, (ax_t, ax_m) = plt.subplots(1, 2, figsize=(10, 0.45 * max(len(names), 3) + 1.2), sharey=True,
                                     gridspec_kw={"width_ratios": [3, 2]})
    ys = list(range(len(names)))[::-1]
    labels = [Path(c).stem for c in names]
    if names:
        by_name = {r["chapter"]: r["seconds"] for r in rows}
        h = 0.4 if measured else 0.8
        ax_t.barh([y + (h / 2 if measured else 0) for y in ys], [by_name.get(c, 0) for c in names], h,
                  color="#4C72B0", label="chapter_times.py")
        if measured:
            ax_t.barh([y - h / 2 for y in ys], [measured[c]["seconds"] if c in measured else 0 for c in names], h,
                      color="#DD8452", label="executed alone (--chapters)")
        ax_t.axvline(CHAPTER_BUDGET_S, color="grey", ls="--", lw=1, label=f"budget {chapter_times.budget_text()}")
        ax_t.set_yticks(ys)
        ax_t.set_yticklabels(labels)
        ax_t.set_xlabel("seconds")
        ax_t.legend(loc="lower right")
    else:
        _empty(ax_t, "no chapter times")
    if measured:
        ax_m.barh(ys, [measured[c]["peak_rss_bytes"] / benchkit.GiB if c in measured else 0 for c in names],
                  color="#55A868")
        ax_m.axvline(MEMORY_BUDGET / benchkit.GiB, color="grey", ls="--", lw=1,
                     label=f"budget {MEMORY_BUDGET / benchkit.GiB:.0f} GiB")
        ax_m.set_xlabel("peak memory of the kernel (GiB)")
        ax_m.legend(loc="lower right")
    else:
        _empty(ax_m, "peak memory not measured (run_all.py --chapters)")
    _save(fig, out / "chapters.png")
    written.append("chapters.png")
    return written


# ------------------------------------------------------------------------------------------- summary
def _cell(text) -> str:
    return str(text if text is not None else "").replace("|", "\\|")


def _figure_table(figs: list) -> list:
    lines = ["| figure | value | reference and target | result |", "| --- | ---: | --- | --- |"]
    for f in figs:
        lines.append(f"| `{f['name']}` | {_cell(f['value'])} | {_cell(f['detail'])} | {_cell(f['verdict'] or '')} |")
    return lines


def _overview_table(figs: list) -> list:
    """Figure, value, target and result only (the details are in each section's table)."""
    import re

    lines = ["| figure | value | target | result |", "| --- | ---: | --- | --- |"]
    for f in figs:
        target = re.search(r"target (?:<=|>=) [^,;)]+", f.get("detail") or "")
        target = target.group(0) if target else "correctness check" if f["value"] in ("True", "False") else ""
        lines.append(f"| `{f['name']}` | {_cell(f['value'])} | {_cell(target)} | "
                     f"{_cell(f['verdict'])} |")
    return lines


def _section(name: str, body: list) -> list:
    return [f"<!-- begin {name} -->", *body, f"<!-- end {name} -->", ""]


def _bench_figs(results: dict, key: str) -> list:
    return [dict(f, name=n) for n, f in results["benchmarks"].get(key, {}).get("figures", {}).items()]


def _status(results: dict, key: str) -> list:
    b = results["benchmarks"].get(key)
    if not b:
        return ["Not run."]
    args = " ".join(b["args"])
    line = f"`{b['script']}{' ' + args if args else ''}`, {b['seconds']:.0f} s of wall time"
    if b["returncode"]:
        line += f", **exited with status {b['returncode']}**"
    return [line + ".", ""]


def render_summary(results: dict) -> str:
    """The appendix's generated Markdown (``summary.md``) from a results dict (``latest.json``)."""
    m = results["machine"]
    ram = f", {m['ram_bytes'] / benchkit.GiB:.1f} GiB RAM" if m.get("ram_bytes") else ""
    load = f", load average {m['load_average'][0]:.1f} when the run started" if m.get("load_average") else ""
    lines = ["<!-- Generated by benchmarks/run_all.py from latest.json: do not edit. -->", ""]

    lines += _section("machine", [
        f"Measured on {results['generated']} at commit `{results['commit']}`"
        f"{' (quick smoke run)' if results['quick'] else ''}: {m['cpu']}, {m['cores']} cores{ram}, "
        f"PyTorch {m['torch']}, {'GPU ' + m['gpu'] if m.get('gpu') else 'no GPU'}{load}; `make bench` took "
        f"{results['seconds']:.0f} s."])
    overview = [f for f in all_figures(results) if f.get("verdict")]
    lines += _section("overview", _overview_table(overview))

    lines += _section("attention", _status(results, "attention") + _figure_table(_bench_figs(results, "attention")))

    det = results["benchmarks"].get("reference_vs_fused", {}).get("details")
    body = _status(results, "reference_vs_fused")
    if det:
        c = det["config"]
        body += [f"Forward pass, causal, B={c['B']}, H={c['H']}, d_head={c['d_head']}, float32, {c['device']}; "
                 f"time: median of {c['repeats']} interleaved calls; memory: peak above the inputs.", "",
                 "| T | fused (ms) | reference (ms) | fused peak (MiB) | reference peak (MiB) |",
                 "| ---: | ---: | ---: | ---: | ---: |"]
        for t in det["fused_lengths"]:
            ft, rt = det["time_s"]["fused"].get(str(t)), det["time_s"]["reference"].get(str(t))
            fm = det["peak_bytes"].get("fused", {}).get(str(t))
            rm = det["peak_bytes"].get("reference", {}).get(str(t))
            body.append(f"| {t} | {ft * 1e3:.1f} | {f'{rt * 1e3:.1f}' if rt else '—'} | "
                        f"{f'{fm / benchkit.MiB:.1f}' if fm is not None else '—'} | "
                        f"{f'{rm / benchkit.MiB:.1f}' if rm is not None else '—'} |")
        body.append("")
    body += _figure_table(_bench_figs(results, "reference_vs_fused"))
    if det and det.get("scenarios"):
        body += ["", "| run (spy on the library's two attention paths) | reference calls | fused calls |",
                 "| --- | ---: | ---: |"]
        body += [f"| {s} | {v['reference_calls']} | {v['fused_calls']} |" for s, v in det["scenarios"].items()]
    lines += _section("reference", body)

    det = results["benchmarks"].get("lm_throughput", {}).get("details")
    body = _status(results, "lm_throughput")
    if det:
        s = det["settings"]
        body += [f"Setting from {det['settings_source']}: d_model={s['d_model']}, n_layers={s['n_layers']}, "
                 f"n_heads={s['n_heads']}, block T={s['block_size']}, batch {s['batch_size']}, character vocabulary "
                 f"of {det['vocab_size']}; N = {det['n_linear']:,} matmul weights, so 6N + 12LTd = "
                 f"{det['flops_per_token'] / 1e6:.2f} MFLOP per token ({det['attention_flops_fraction']:.0%} of it "
                 f"in attention's q·kᵀ and weights·v); {benchkit.threads_text(det['threads'], 'CPU ')}, "
                 f"{det['rounds']} rounds of {det['steps_per_round']} steps.", ""]
        if det.get("step_profile_s"):
            p = det["step_profile_s"]
            body += [f"One profiled training step: {p['gemm'] / p['total']:.0%} of its time in matmuls, "
                     f"{p['attention'] / p['total']:.0%} in the fused attention kernel, "
                     f"{p['other'] / p['total']:.0%} in everything else (element-wise operations, norms, "
                     "cross-entropy, AdamW, Python).", ""]
    body += _figure_table(_bench_figs(results, "lm_throughput"))
    wider = results["benchmarks"].get("lm_throughput_wider")
    if wider:
        det = wider.get("details") or {}
        s = det.get("settings", {})
        body += ["", f"The same measurement at a wider setting, d_model={s.get('d_model')}, "
                     f"n_layers={s.get('n_layers')}, n_heads={s.get('n_heads')}, block T={s.get('block_size')}, "
                     f"batch {s.get('batch_size')} ({det.get('flops_per_token', 0) / 1e6:.2f} MFLOP per token), "
                     "figures prefixed `wider_`:", ""]
        body += _figure_table([dict(f, name=PREFIXES["lm_throughput_wider"] + f["name"])
                               for f in _bench_figs(results, "lm_throughput_wider")])
    lines += _section("lm", body)

    lines += _section("generation", _status(results, "generation") + _figure_table(_bench_figs(results,
                                                                                                "generation")))

    det = results["benchmarks"].get("efficient", {}).get("details")
    body = _status(results, "efficient")
    if det:
        c = det["config"]
        body += [f"Forward pass, B={c['B']}, D={c['D']}, H={c['H']}, not causal; Linformer k={c['linformer_k']}; "
                 f"sparse: window {c['sparse']['window']}, {c['sparse']['n_global']} global, "
                 f"{c['sparse']['n_random']} random, blocks of {c['sparse']['block']}.", "",
                 "| n | kind | forward (ms) | peak (MiB) |", "| ---: | --- | ---: | ---: |"]
        for n in det["lengths"]:
            for kind in det["time_s"]:
                mem = det["peak_bytes"].get(kind, {}).get(str(n))
                body.append(f"| {n} | {kind} | {det['time_s'][kind][str(n)] * 1e3:.1f} | "
                            f"{f'{mem / benchkit.MiB:.1f}' if mem is not None else '—'} |")
        body.append("")
    body += _figure_table(_bench_figs(results, "efficient"))
    lines += _section("efficient", body)

    ch = results.get("chapters") or {}
    body = [f"`{ch.get('command', 'chapter_times.py')}` (budget {chapter_times.budget_text()}, "
            f"{BOOK_BUDGET_S:.0f} s for the book; source `run` = a fresh execution by `run_all.py --chapters`, "
            "`nbval` = the last `make nbval` run, `stored` = the time recorded by `booktools/run_chapter.py`):", "",
            "| chapter | seconds | source | stored |", "| --- | ---: | --- | ---: |"]
    body += [f"| {r['chapter']} | {_seconds(r['seconds'])} | {r['source']} | "
             f"{r['stored']} |" for r in ch.get("rows", [])]
    body += [""] + _figure_table(chapter_figures(ch, results.get("chapter_runs")))
    runs = results.get("chapter_runs")
    if runs and runs.get("rows"):
        body += ["", f"Executed one at a time by `run_all.py --chapters` on {runs['measured']} (load average "
                     f"{runs['machine'].get('load_average', ['?'])[0]}): wall time and peak resident memory of "
                     "the kernel.", "",
                 "| chapter | seconds | peak memory (MiB) |", "| --- | ---: | ---: |"]
        for r in runs["rows"]:
            if "peak_rss_bytes" in r:
                body.append(f"| {r['chapter']} | {r['seconds']:.1f} | {r['peak_rss_bytes'] / benchkit.MiB:.0f} |")
            else:
                body.append(f"| {r['chapter']} | failed | — |")
    else:
        body += ["", "Peak memory per chapter: not measured in this run (`run_all.py --chapters`)."]
    lines += _section("chapters", body)

    gpu = results["gpu"]
    body = [f"**{gpu['status']}**" + (f" ({gpu['device']})" if gpu.get("device") else "") + ".", "",
            "Commands for a CUDA machine (a Colab GPU):", "", "```bash", *gpu["commands"], "```"]
    lines += _section("gpu", body)
    return "\n".join(lines).rstrip() + "\n"


# ------------------------------------------------------------------------------------------- main
def rewrite_summary(out: Path = RESULTS) -> None:
    """Regenerate ``summary.md`` and the plots from an existing ``latest.json`` (nothing is measured)."""
    results = json.loads((out / "latest.json").read_text())
    (out / "summary.md").write_text(render_summary(results))
    make_plots(results, out)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: short settings, results in "
                        f"{QUICK_RESULTS.relative_to(ROOT)}")
    parser.add_argument("--out", type=Path, help=f"results folder (default {RESULTS.relative_to(ROOT)})")
    parser.add_argument("--only", help="comma-separated benchmarks to run (" + ",".join(b[0] for b in BENCHMARKS)
                        + ")")
    parser.add_argument("--chapters", action="store_true", help="also execute every chapter (time, peak memory)")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--render", action="store_true",
                        help="only regenerate summary.md and the plots from the existing latest.json")
    parser.add_argument("--chapter-child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.chapter_child:
        execute_chapter(args.chapter_child)
        return 0
    out = args.out or (QUICK_RESULTS if args.quick else RESULTS)
    if args.render:
        rewrite_summary(out)
        print(f"rewrote {out / 'summary.md'} and the plots from {out / 'latest.json'}")
        return 0
    import torch

    out.mkdir(parents=True, exist_ok=True)
    only = set(args.only.split(",")) if args.only else None
    if only and only - {b[0] for b in BENCHMARKS}:
        parser.error(f"--only: unknown benchmark(s) {sorted(only - {b[0] for b in BENCHMARKS})}")
    start = time.perf_counter()
    results = {"generated": now(), "quick": args.quick, "commit": git_commit(), "machine": benchkit.machine(),
               "benchmarks": {}}
    cuda = torch.cuda.is_available()
    for key, script, takes_json, title, extra in BENCHMARKS:
        if only and key not in only:
            continue
        print(f"== {title} ({script})", flush=True)
        results["benchmarks"][key] = run_benchmark(key, script, takes_json, args.quick, extra)

    runs_file = out / "chapters.json"
    if args.chapters:
        print("== Executing every chapter (time, peak memory of the kernel)", flush=True)
        benchkit.write_json(runs_file, run_chapters())
    print("== Chapters (chapter_times.py)", flush=True)
    results["chapters"] = chapter_table(runs_file if args.chapters else None)
    results["chapter_runs"] = json.loads(runs_file.read_text()) if runs_file.is_file() else None

    results["gpu"] = {"status": "measured" if cuda else NO_GPU, "commands": list(GPU_COMMANDS),
                      "device": torch.cuda.get_device_name(0) if cuda else None}
    if cuda:
        print("== GPU: language-model throughput with bf16 autocast", flush=True)
        results["benchmarks"]["lm_throughput_cuda"] = run_benchmark(
            "lm_throughput_cuda", "bench_lm_throughput.py", True, args.quick, ["--device", "cuda", "--amp", "bf16"])
    else:
        print(f"== GPU: {NO_GPU}", flush=True)
    results["seconds"] = time.perf_counter() - start
    results["figures"] = all_figures(results)

    benchkit.write_json(out / "latest.json", results)
    (out / "summary.md").write_text(render_summary(results))
    plots = make_plots(results, out)

    print("\n== Figures")
    for f in results["figures"]:
        print(f"{f['name']}: {f['value']}" + (f" ({f['detail']})" if f["detail"] else "")
              + (f" {f['verdict']}" if f["verdict"] else ""))
    print("\n" + results["chapters"]["table"])
    print(f"GPU: {results['gpu']['status']}")
    print(f"\nwrote {out / 'latest.json'}, {out / 'summary.md'} and {', '.join(plots)} "
          f"in {results['seconds']:.0f} s")
    crashed = [b["script"] for b in results["benchmarks"].values() if b["returncode"]]
    failed = [f["name"] for f in results["figures"] if f["verdict"] == "FAIL"]
    missed = [f["name"] for f in results["figures"] if f["verdict"] == "MISS"]
    for label, names in (("crashed", crashed), ("failed", failed), ("missed", missed)):
        if names:
            print(f"{label}: {', '.join(names)}")
    return 1 if crashed or failed or (args.strict and missed) else 0


if __name__ == "__main__":
    sys.exit(main())
