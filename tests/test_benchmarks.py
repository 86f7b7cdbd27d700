"""Smoke tests of the benchmarks (benchmarks/): each runs in --quick mode and prints its figures; the
correctness parts pass (identical tokens, the reference attention path only with weights); the committed results
(benchmarks/results/) agree with the tables and plots of the appendix page.

The --quick runs take 5-20 s each on the 2-core machine, so they are marked ``slow``; the rest is fast.
"""
import json
import re
import statistics
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"
RESULTS = BENCH / "results"

import benchkit  # noqa: E402
import run_all  # noqa: E402


def run_quick(module: str, capsys, *extra) -> tuple:
    """Run ``benchmarks/<module>.py --quick`` in this process: (its return value, the figures it recorded)."""
    mod = __import__(module)
    benchkit.FIGURES.clear()
    result = mod.main(["--quick", *extra])
    capsys.readouterr()
    return result, dict(benchkit.FIGURES)


def value(figures: dict, name: str) -> float:
    return float(figures[name]["value"].rstrip("x").replace(",", ""))


def check_figure(figures: dict, name: str, measured: float, decimals: int, target=None, at_most=True) -> None:
    """The printed figure is the run's own measurement (rounded as printed), and its verdict follows the target:
    what run_all publishes in latest.json and the appendix agrees with what was measured."""
    assert value(figures, name) == pytest.approx(measured, abs=0.51 * 10 ** -decimals), name
    if target is None:
        assert figures[name]["verdict"] is None, name
    else:
        met = measured <= target if at_most else measured >= target
        assert figures[name]["verdict"] == ("PASS" if met else "MISS"), name


# ------------------------------------------------------------------------------------------- helpers
def test_figures_are_recorded_as_data(capsys, tmp_path, monkeypatch):
    """figure() prints a line for a person and records the figure as data, in FIGURES and in the JSON file
    named by BENCH_FIGURES_JSON, which run_all reads back."""
    target = tmp_path / "figures.json"
    monkeypatch.setenv(benchkit.FIGURES_ENV, str(target))
    monkeypatch.setattr(benchkit, "FIGURES", {})
    line = benchkit.figure("ratio_T128", "0.590", "ours 1.0 ms / theirs 1.7 ms, target <= 0.9", "PASS")
    benchkit.figure("x", "1")
    assert capsys.readouterr().out.splitlines() == [line, "x: 1"]
    assert line == "ratio_T128: 0.590 (ours 1.0 ms / theirs 1.7 ms, target <= 0.9) PASS"
    expected = {"ratio_T128": {"value": "0.590", "detail": "ours 1.0 ms / theirs 1.7 ms, target <= 0.9",
                               "verdict": "PASS"}, "x": {"value": "1", "detail": None, "verdict": None}}
    assert benchkit.FIGURES == expected and benchkit.read_figures(target) == expected
    assert benchkit.read_figures(tmp_path / "none.json") == {}
    for bad in (dict(name="has spaces", value="1"), dict(name="y", value="1 x"), dict(name="y", value="1", result="OK")):
        with pytest.raises(ValueError, match="figure needs"):
            benchkit.figure(**bad)


def test_interleaved_medians_times_every_function(monkeypatch):
    clock = [0.0]  # a fake clock: each call advances it by its own next duration
    monkeypatch.setattr(benchkit.time, "perf_counter", lambda: clock[0])
    durations = {"a": iter([9.0, 5.0, 1.0, 3.0]), "b": iter([9.0, 2.0, 4.0, 2.0])}  # first: the warm-up
    calls = {"a": 0, "b": 0}

    def tick(name):
        calls[name] += 1
        clock[0] += next(durations[name])

    medians = benchkit.interleaved_medians({"a": lambda: tick("a"), "b": lambda: tick("b")}, repeats=3, warmup=1)
    assert calls == {"a": 4, "b": 4}
    assert medians == {"a": 3.0, "b": 2.0}  # medians of the timed calls; the 9 s warm-ups are not counted


@pytest.mark.skipif(not benchkit.peak_memory_supported(), reason="needs a writable /proc/self/clear_refs")
def test_peak_rss_delta_sees_a_large_buffer():
    big = benchkit.peak_rss_delta(lambda: torch.ones(64 * 2**20 // 4))  # 64 MiB, touched
    assert big >= 48 * benchkit.MiB


def test_memory_crossing_of_a_power_law():
    import bench_reference_vs_fused as rvf

    points = {t: 4.0 * 32 * t * t for t in (256, 512, 1024)}  # 4 float32 score matrices of 8 heads
    t_star, interpolated = rvf.crossing(points, budget=2 * benchkit.GiB, law="power")
    assert t_star == pytest.approx((2 * benchkit.GiB / 128) ** 0.5, rel=1e-6) and not interpolated
    t_mid, interpolated = rvf.crossing(points, budget=4.0 * 32 * 700**2, law="power")
    assert t_mid == pytest.approx(700, rel=1e-6) and interpolated
    t_lin, _ = rvf.crossing({1024: 1e6 + 1024 * 100, 2048: 1e6 + 2048 * 100}, budget=1e6 + 1e8, law="linear")
    assert t_lin == pytest.approx(1e6, rel=1e-6)
    assert rvf.round2(123456) == 120000 and rvf.round2(4096) == 4100


def test_reference_spy_counts_both_paths():
    import bench_reference_vs_fused as rvf
    from transformer_lib.multihead import MultiHeadAttention

    mha = MultiHeadAttention(16, 2)
    x = torch.randn(1, 5, 16)
    with rvf.count_attention_calls() as counts:
        mha(x, causal=True)
        mha(x, return_weights=True)
    assert counts == {"reference": 1, "fused": 1}
    assert rvf.reference_only_with_weights({"a": (0, 2), "b +weights": (1, 0)})
    assert not rvf.reference_only_with_weights({"a": (1, 2), "b +weights": (1, 0)})  # reference without weights
    assert not rvf.reference_only_with_weights({"a": (0, 2), "b +weights": (0, 1)})  # weights but no reference


def test_lm_flops_formula():
    import bench_lm_throughput as lm
    from transformer_lib.models import DecoderLM, DecoderLMConfig

    d, L, T, V = 128, 4, 128, 107
    model = DecoderLM(DecoderLMConfig(vocab_size=V, d_model=d, n_heads=4, n_layers=L, d_ff=4 * d, max_len=T))
    n = L * (3 * d * d + d * d + 2 * d * 4 * d) + V * d  # q|k|v and output projections, feed-forward, tied head
    assert lm.linear_parameters(model) == n
    assert lm.flops_per_token(n, L, T, d) == 6 * n + 12 * L * T * d


def test_lm_benchmark_trains_chapter_11s_model():
    """The benchmark and chapter 11 take the model's settings from one place, transformer_lib.presets."""
    import bench_lm_throughput as lm

    from booktools import notebooks
    from transformer_lib import presets

    settings, source = lm.settings_for(torch.device("cpu"))
    assert settings == {k: presets.LM_CPU_CONFIG[k] for k in lm.MODEL_KEYS}
    assert source == "chapter 11 (transformer_lib.presets.LM_CPU_CONFIG)"
    gpu_settings, _ = lm.settings_for(torch.device("cuda"))
    assert gpu_settings["d_model"] == presets.LM_GPU_CONFIG["d_model"]
    assert lm.settings_for(torch.device("cpu"), "default") == (lm.DEFAULT_CPU, "defaults")
    nb = notebooks.read_notebook(ROOT / "chapters" / "11_language_model.ipynb")
    chapter = "\n".join(notebooks.cell_source(cell) for _, cell in notebooks.code_cells(nb))
    assert "CPU_CONFIG, GPU_CONFIG = tl.presets.LM_CPU_CONFIG, tl.presets.LM_GPU_CONFIG" in chapter


def test_chapter_report_is_data(monkeypatch, tmp_path):
    """chapter_times.report returns the rows run_all publishes; the budgets flag a slow chapter and the book."""
    import chapter_times

    chapters = chapter_times.toc_chapters()
    first, tenth = (chapter_times.relative(p) for p in (chapters[0], chapters[9]))
    runs = tmp_path / "chapters.json"
    runs.write_text(json.dumps({"rows": [{"chapter": first, "seconds": 181.5}, {"chapter": tenth, "seconds": 290.0}]}))
    data = chapter_times.report(runs_file=runs)
    rows = {r["chapter"]: r for r in data["rows"]}
    assert rows[first]["seconds"] == 181.5 and rows[first]["source"] == "run" and rows[first]["over"]
    assert rows[tenth]["budget_s"] == 300.0 and not rows[tenth]["over"]   # chapter 10 is allowed 300 s
    assert first in data["over"] and tenth not in data["over"]
    assert data["total"] == pytest.approx(sum(r["seconds"] for r in data["rows"] if r["seconds"] is not None))
    assert "OVER 180 s" in chapter_times.format_report(data)
    assert chapter_times.main(["--runs", str(runs)]) == 0          # over budget is reported, not fatal
    assert chapter_times.main(["--runs", str(runs), "--strict"]) == 1
    monkeypatch.setattr(run_all, "NBVAL_REPORT", tmp_path / "no-report.xml")
    table = run_all.chapter_table(runs)
    assert table["rows"][0]["seconds"] == 181.5 and table["total"] == pytest.approx(data["total"])
    figs = {f["name"]: f for f in run_all.chapter_figures(table, None)}
    over = figs["chapters_over_budget"]                 # the figure agrees with the report's own budget flags
    assert over["verdict"] == "MISS" and over["value"] == str(sum(r["over"] for r in data["rows"]))
    assert Path(first).stem in over["detail"] and Path(tenth).stem not in over["detail"]
    # chapter 10 alone at 290 s is within its own budget of 300 s: no chapter is over
    table = {"rows": [{"chapter": first, "seconds": 120.0, "source": "run"},
                      {"chapter": tenth, "seconds": 290.0, "source": "run"}]}
    figs = {f["name"]: f for f in run_all.chapter_figures(table, None)}
    assert figs["chapters_over_budget"]["verdict"] == "PASS" and figs["chapters_over_budget"]["value"] == "0"
    assert Path(tenth).stem in figs["chapters_over_budget"]["detail"]    # the closest to its budget is named


# ------------------------------------------------------------------------------------------- committed results
def test_results_summary_in_sync_with_latest_json():
    latest = RESULTS / "latest.json"
    assert latest.is_file(), "benchmarks/results/latest.json is missing: run `make bench` and commit the folder"
    results = json.loads(latest.read_text())
    assert not results["quick"], "the committed results come from a --quick run; run a full `make bench`"
    expected = run_all.render_summary(results)
    assert (RESULTS / "summary.md").read_text() == expected, (
        "benchmarks/results/summary.md is out of sync with latest.json: `make bench BENCH_ARGS=--render`")
    for png in ("reference_vs_fused.png", "efficient.png", "lm_throughput.png", "chapters.png"):
        assert (RESULTS / png).is_file(), png
    names = {f["name"] for f in results["figures"]}
    for required in ("mha_fwd_bwd_ratio_T128", "mha_fwd_bwd_ratio_T512", "fused_over_reference_memory_T4096",
                     "library_reference_only_with_weights", "lm_train_tokens_per_s", "lm_train_mfu",
                     "kv_cache_speedup", "identical_tokens", "book_total_s"):
        assert required in names, required
    assert not [f["name"] for f in results["figures"] if f["verdict"] == "FAIL"]


def test_appendix_page_includes_the_generated_sections():
    page = (ROOT / "appendix_performance.md").read_text()
    summary = (RESULTS / "summary.md").read_text()
    markers = re.findall(r':(?:start-after|end-before): "(<!-- (?:begin|end) \w+ -->)"', page)
    assert len(markers) >= 16 and len(markers) % 2 == 0
    for marker in markers:
        assert summary.count(marker) == 1, marker
    for image in re.findall(r"```\{figure\} (\S+)", page):
        assert (ROOT / image).is_file(), image
    assert "- file: appendix_performance" in (ROOT / "_toc.yml").read_text()


def test_appendix_prose_types_no_measured_number():
    """Numbers come from latest.json through the includes; the hand-written prose quotes none."""
    page = (ROOT / "appendix_performance.md").read_text()
    prose = re.sub(r"\$\$.*?\$\$|\$[^$]*\$|`[^`]*`|<!--.*?-->", "", page, flags=re.S)
    typed = re.findall(r"\d+\.\d+|\d+\s*(?:%|ms\b|s\b|MiB|GiB|GFLOP|tokens|×)", prose)
    assert not typed, f"measured-looking numbers typed into appendix_performance.md: {typed}"


# ------------------------------------------------------------------------------------------- --quick runs
@pytest.mark.slow
def test_attention_quick(capsys):
    ratios, figs = run_quick("bench_attention", capsys)
    for t in (128, 512):
        check_figure(figs, f"mha_fwd_bwd_ratio_T{t}", ratios[t], 3, target=0.9)
    assert figs["reference_path_only_with_weights"]["verdict"] == "PASS"


@pytest.mark.slow
def test_reference_vs_fused_quick(capsys, tmp_path):
    res, figs = run_quick("bench_reference_vs_fused", capsys, "--json", str(tmp_path / "r.json"))
    t = max(res["lengths"])
    assert figs["library_reference_only_with_weights"]["verdict"] == "PASS"
    assert all(v["reference_calls"] == 0 and v["fused_calls"] > 0
               for s, v in res["scenarios"].items() if not s.endswith("+weights"))
    ratio = res["time_s"]["fused"][str(t)] / res["time_s"]["reference"][str(t)]
    assert res["fused_over_reference_time"] == pytest.approx(ratio)
    check_figure(figs, f"fused_over_reference_time_T{t}", ratio, 3, target=1.0)
    if res["peak_bytes"]:  # /proc available
        ref, fused = res["peak_bytes"]["reference"][str(t)], res["peak_bytes"]["fused"][str(t)]
        assert ref > 2 * 4 * 8 * t * t > fused  # at least two (B=1, H=8) float32 score matrices; fused far less
        assert value(figs, "reference_max_T_in_budget") > t
    assert json.loads((tmp_path / "r.json").read_text())["lengths"] == res["lengths"]


@pytest.mark.slow
def test_lm_throughput_quick(capsys, tmp_path):
    res, figs = run_quick("bench_lm_throughput", capsys, "--json", str(tmp_path / "lm.json"))
    check_figure(figs, "lm_train_tokens_per_s", res["tokens_per_s"], 0)
    check_figure(figs, "matmul_peak_gflops", res["peak_flops"] / 1e9, 1)
    # MFU from the run's own numbers: each round's model FLOP/s over the best matmul rate measured after it
    best = [max(max(p.values()), f) for p, f in zip(res["matmul_flops_rounds"], res["ff_matmul_flops_rounds"])]
    mfus = [t * res["flops_per_token"] / b for t, b in zip(res["tokens_per_s_rounds"], best)]
    assert res["mfu"] == pytest.approx(statistics.median(mfus))
    check_figure(figs, "lm_train_mfu", res["mfu"], 3, target=res["target_mfu"], at_most=False)
    assert res["flops_per_token"] == 6 * res["n_linear"] + 12 * res["settings"]["n_layers"] * \
        res["settings"]["block_size"] * res["settings"]["d_model"]


def test_lm_throughput_cuda_needs_cuda():
    import bench_lm_throughput as lm

    if torch.cuda.is_available():
        pytest.skip("CUDA is available here")
    with pytest.raises(SystemExit, match="CUDA is not available"):
        lm.main(["--device", "cuda", "--amp", "bf16", "--quick"])


@pytest.mark.slow
def test_efficient_quick(capsys, tmp_path):
    import bench_efficient

    res, figs = run_quick("bench_efficient", capsys, "--json", str(tmp_path / "e.json"))
    n = max(res["lengths"])
    for kind in ("linformer", "sparse_dense", "sparse_blocked"):
        ratio = res["time_s"][kind][str(n)] / res["time_s"]["full"][str(n)]
        assert res["ratios"][f"{kind}_time"] == pytest.approx(ratio)
        check_figure(figs, f"{kind}_over_full_time_n{n}", ratio, 3, target=bench_efficient.TARGETS.get(kind))
    assert set(res["time_s"]) == {"full", "linformer", "sparse_dense", "sparse_blocked"}


@pytest.mark.slow
def test_run_all_quick_writes_results(tmp_path, capsys):
    """run_all end to end (generation only, to stay short): figures, latest.json, summary.md, plots."""
    code = run_all.main(["--quick", "--only", "generation", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0, out[-3000:]
    results = json.loads((tmp_path / "latest.json").read_text())
    figs = {f["name"]: f for f in results["figures"]}
    assert figs["identical_tokens"]["verdict"] == "PASS"
    # The speed-up itself is a benchmark figure, not a test; it must be the ratio of the two measured rates,
    # and its verdict must follow its target (checked away from the rounding edge of the printed values).
    speedup = value(figs, "kv_cache_speedup")
    rates = value(figs, "tokens_per_s_with_cache") / value(figs, "tokens_per_s_without_cache")
    assert speedup == pytest.approx(rates, rel=0.02, abs=0.06)
    target = float(re.search(r"target >= ([\d.]+)x", figs["kv_cache_speedup"]["detail"])[1])
    if abs(speedup - target) > 0.1:
        assert figs["kv_cache_speedup"]["verdict"] == ("PASS" if speedup >= target else "MISS")
    assert "book_total_s" in figs and results["chapters"]["rows"]
    assert results["gpu"]["status"] == (run_all.NO_GPU if not torch.cuda.is_available() else "measured")
    assert (tmp_path / "summary.md").read_text() == run_all.render_summary(results)
    assert all((tmp_path / p).stat().st_size > 0 for p in ("reference_vs_fused.png", "chapters.png"))
    assert "kv_cache_speedup:" in out and "== Figures" in out


@pytest.mark.slow
def test_fit_overhead_quick(capsys):
    """fit against a minimal hand loop: the figure is the ratio of the run's own median times."""
    res, figs = run_quick("bench_fit_overhead", capsys)
    check_figure(figs, "fit_over_hand_loop_steps_per_s", res["ratio"], 2, target=0.9, at_most=False)


@pytest.mark.slow
def test_map_runs_quick(capsys):
    """map_runs against the loop: bit-identical results, and the printed figures are the run's own ratios."""
    res, figs = run_quick("bench_map_runs", capsys)
    assert figs["map_runs_identical_results"]["verdict"] == "PASS"
    assert value(figs, "map_runs_processes") == res["processes"]
    check_figure(figs, "map_runs_speedup", res["speedup"], 2)
    check_figure(figs, "map_runs_efficiency", res["efficiency"], 2, target=0.75, at_most=False)
