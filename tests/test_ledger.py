import pytest

from transformer_lib.ledger import (NOT_TESTABLE, TRAINS_NOTHING, Adequacy, Text, accuracy_saturated,
                                    adequacy_key, beats_baseline, claim_keys, claim_label, find_claims, late_improvement,
                                    loss_flattened, mean_sd, record_claim, welch_t)


def recorded(capsys, *args, **kwargs):
    """The line that record_claim(*args, **kwargs) prints (it returns None: a notebook cell shows the line once)."""
    assert record_claim(*args, **kwargs) is None
    return capsys.readouterr().out.rstrip("\n")


def test_record_claim_summary_without_glue(capsys):
    line = recorded(capsys, "08_var_qk", "Var(qk) = d_k", "1.01 d_k", "confirmed", adequacy=TRAINS_NOTHING,
                    glue=False)
    assert line == "[confirmed] Var(qk) = d_k — measured: 1.01 d_k"


def test_keys_and_label():
    assert claim_keys("06_minus_1e5") == ("claim_06_minus_1e5_text", "claim_06_minus_1e5_value",
                                          "claim_06_minus_1e5_verdict")
    assert claim_label("06_minus_1e5") == "claim-06-minus-1e5"


def test_text_displays_without_quotes():
    assert repr(Text("a b")) == "a b" and Text("x")._repr_markdown_() == "x"


def test_find_claims_in_notebook_json():
    nb = {"cells": [{"cell_type": "code", "outputs": [
        {"output_type": "display_data", "metadata": {"scrapbook": {"name": "claim_02_grad_text"}}},
        {"output_type": "display_data", "metadata": {"scrapbook": {"name": "claim_02_grad_value"}}},
        {"output_type": "display_data", "metadata": {"scrapbook": {"name": "c02_other"}}}]}]}
    assert find_claims(nb) == ["02_grad"]


@pytest.mark.parametrize("args, match", [
    (("2_x", "c", "v", "confirmed"), "claim_id must look like"),
    (("02_x", "", "v", "confirmed"), "claim must be a non-empty str"),
    (("02_x", "c", "v", "true"), "verdict must be one of"),
])
def test_bad_input(args, match):
    with pytest.raises(ValueError, match=match):
        record_claim(*args, adequacy=TRAINS_NOTHING, glue=False)


def test_adequacy_is_required_and_typed():
    with pytest.raises(TypeError, match="adequacy"):
        record_claim("02_x", "c", "v", "confirmed", glue=False)
    with pytest.raises(TypeError, match="adequacy must be an Adequacy .* got str 'yes'"):
        record_claim("02_x", "c", "v", "confirmed", adequacy="yes", glue=False)


def test_failed_adequacy_turns_any_verdict_into_not_testable(capsys):
    failed = Adequacy("every model ≥ 0.10 nats below the bigram", "smallest margin -0.02", False)
    for verdict in ("confirmed", "nuanced", "corrected"):
        line = recorded(capsys, "09_ladder", "each part helps", "2.35 vs 2.37", verdict, adequacy=failed, glue=False)
        assert line.startswith(f"[{NOT_TESTABLE}]"), line
        assert "✗ every model ≥ 0.10 nats below the bigram: smallest margin -0.02" in line


def test_passed_adequacy_keeps_the_verdict(capsys):
    passed = Adequacy("loss flat", "0.001", True)
    line = recorded(capsys, "09_ladder", "each part helps", "1.9 vs 2.37", "nuanced", adequacy=passed, glue=False)
    assert line.startswith("[nuanced]") and line.endswith("trained enough? ✓ loss flat: 0.001")
    # A claim may be untestable for another reason (a saturated task) even with adequate models.
    line = recorded(capsys, "10_x", "c", "v", NOT_TESTABLE, adequacy=passed, glue=False)
    assert line.startswith(f"[{NOT_TESTABLE}]")


def test_record_claim_glues_adequacy_only_for_trained_claims(monkeypatch):
    import transformer_lib.notebook as notebook

    glued = {}
    monkeypatch.setattr(notebook, "glue", lambda key, value, display=True: glued.__setitem__(key, repr(value)))
    record_claim("08_a", "c", "v", "confirmed", adequacy=TRAINS_NOTHING)
    assert set(glued) == set(claim_keys("08_a"))
    glued.clear()
    record_claim("08_b", "c", "v", "confirmed", adequacy=Adequacy("flat", "0.01", False))
    assert set(glued) == set(claim_keys("08_b")) | {adequacy_key("08_b")}
    assert glued["claim_08_b_verdict"] == NOT_TESTABLE and glued["claim_08_b_adequacy"] == "✗ flat: 0.01"


def test_beats_baseline_uses_the_worst_model():
    a = beats_baseline({"one head": 2.10, "multi-head": 2.30}, baseline=2.369, margin=0.10)
    assert not a.passed and a.measured == "smallest margin 0.07 (multi-head)"
    assert a.check == "every model checked (one head / multi-head) ≥ 0.10 nats below the counted bigram (2.369)"
    assert beats_baseline([2.0, 2.1], baseline=2.369, margin=0.10).check.startswith("every model ≥ 0.10")
    many = beats_baseline({f"seed {s}": 2.0 for s in range(4)}, baseline=2.369, margin=0.10)
    assert many.check.startswith("every model checked (4 runs) ≥")      # named models beyond three: a count
    assert beats_baseline([2.0, 2.1], baseline=2.369, margin=0.10).passed
    assert beats_baseline([2.269], baseline=2.369, margin=0.10).passed is (2.369 - 2.269 >= 0.10)
    # each value already the worst of several seeds: the caller says what the check covers
    rungs = beats_baseline({"one head": 2.10, "multi-head": 2.20}, baseline=2.369, margin=0.10,
                           checked="every run (the worst seed of each of 2 rungs)")
    assert rungs.check == "every run (the worst seed of each of 2 rungs) ≥ 0.10 nats below the counted bigram (2.369)"
    with pytest.raises(ValueError, match="checked must be a non-empty str"):
        beats_baseline([2.0], baseline=2.369, margin=0.10, checked=" ")


def test_unnamed_drops_the_worst_models_name():
    a = beats_baseline({"seed 0": 2.0, "seed 1": 2.2}, baseline=2.369, margin=0.10)
    assert a.unnamed().measured == "smallest margin 0.17" and a.unnamed().check == a.check
    b = a.unnamed("every masked model beats the bigram")
    assert (b.check, b.passed) == ("every masked model beats the bigram", a.passed)


def test_loss_flattened_measures_the_last_fifth():
    flat = [3.0, 2.0, 1.6, 1.5, 1.45, 1.44, 1.44, 1.439, 1.438, 1.438]
    a = loss_flattened(flat, tolerance=0.01)
    assert a.passed and a.measured == "largest improvement 0.001"
    falling = [3.0, 2.8, 2.6, 2.4, 2.2, 2.0, 1.8, 1.6, 1.4, 1.2]
    b = loss_flattened({"flat": flat, "falling": falling}, tolerance=0.01)
    assert not b.passed and b.measured == "largest improvement 0.400 (falling)"
    rising = [3.0, 2.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.1, 1.2]
    assert loss_flattened(rising, tolerance=0.01).passed


def test_late_improvement_is_what_loss_flattened_measures():
    assert late_improvement([3.0, 2.0, 1.6, 1.5, 1.45, 1.44, 1.44, 1.439, 1.438, 1.438]) == pytest.approx(0.001)
    assert late_improvement([3.0, 2.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.1, 1.2]) < 0          # it went up
    with pytest.raises(ValueError, match="at least 3 losses"):
        late_improvement([2.0, 1.0])


def test_loss_flattened_fails_on_a_curve_too_short_to_tell():
    """A run capped to a few steps (CI's quick run of the GPU branch) has one or two points: not flat, not judged."""
    a = loss_flattened([4.2], tolerance=0.05)
    assert not a.passed and a.measured == "1 point(s), too few to tell"
    b = loss_flattened({"long": [3.0, 2.0, 1.9, 1.9, 1.9], "capped": [4.0, 3.9]}, tolerance=0.05)
    assert not b.passed and b.measured == "2 point(s) (capped), too few to tell"


def test_accuracy_saturated_and_combined():
    a = accuracy_saturated({"RNN": 0.97, "Transformer": 0.999}, threshold=0.95, what="validation accuracy")
    assert a.passed and str(a) == ("✓ every model checked (RNN / Transformer): validation accuracy ≥ 0.95: "
                                   "lowest 0.970 (RNN)")
    assert accuracy_saturated([0.97], threshold=0.95).check == "every model's accuracy ≥ 0.95"
    b = a & accuracy_saturated([0.5], threshold=0.95)
    assert not b.passed and b.check.count(";") == 1 and str(b).startswith("✗")
    c = accuracy_saturated({"RNN": 0.9804, "Transformer": 0.999}, threshold=0.9, what="exact match", percent=True)
    assert c.passed and str(c) == "✓ every model checked (RNN / Transformer): exact match ≥ 90 %: lowest 98.0 % (RNN)"
    assert not accuracy_saturated([0.8995], threshold=0.9, percent=True).passed   # "90.0 %" in words, still below


@pytest.mark.parametrize("call, error, match", [
    (lambda: beats_baseline({}, 2.0, 0.1), ValueError, "losses must hold at least one value"),
    (lambda: beats_baseline({"a": "x"}, 2.0, 0.1), TypeError, r"losses\['a'\] must be a number, got str 'x'"),
    (lambda: beats_baseline([float("nan")], 2.0, 0.1), ValueError, "must be finite"),
    (lambda: beats_baseline([1.0], 2.0, -0.1), ValueError, "margin must be a finite number ≥ 0"),
    (lambda: loss_flattened([1.0, 0.9, 0.8], 0.0), ValueError, "tolerance must be a finite number > 0"),
    (lambda: loss_flattened([1.0, 0.9, 0.8], 0.1, fraction=1.5), ValueError, r"fraction must be in \(0, 1\)"),
    (lambda: loss_flattened(3.0, 0.1), TypeError, "curves must be a list"),
    (lambda: accuracy_saturated([1.2], 0.9), ValueError, r"must be in \[0, 1\], got 1.2"),
    (lambda: accuracy_saturated([0.9], 1.5), ValueError, r"threshold must be in \(0, 1\]"),
    (lambda: accuracy_saturated([0.9], 0.5, percent="yes"), TypeError, "percent must be True or False, got str"),
    (lambda: Adequacy("", "x", True), ValueError, "Adequacy.check must be a non-empty str"),
    (lambda: Adequacy("c", "x", 1), TypeError, "Adequacy.passed must be a bool, got int 1"),
])
def test_adequacy_bad_input(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_record_erratum_glues_four_parts(monkeypatch, capsys):
    import transformer_lib.notebook as notebook
    from transformer_lib.ledger import erratum_keys, erratum_label, find_errata, record_erratum

    glued = {}
    monkeypatch.setattr(notebook, "glue", lambda key, value, display=True: glued.__setitem__(key, repr(value)))
    assert record_erratum("08_ln_mean", "a lecture slide", "μ = Σ x", "μ = (1/d) Σ x", "means reach 1.00") is None
    assert capsys.readouterr().out.rstrip("\n") == "[erratum] a lecture slide: written μ = Σ x; correct μ = (1/d) Σ x — shown by: means reach 1.00"
    assert set(glued) == set(erratum_keys("08_ln_mean")) and glued["erratum_08_ln_mean_correct"] == "μ = (1/d) Σ x"
    assert erratum_label("08_ln_mean") == "erratum-08-ln-mean"
    nb = {"cells": [{"outputs": [{"metadata": {"scrapbook": {"name": k}}} for k in erratum_keys("08_ln_mean")]}]}
    assert find_errata(nb) == ["08_ln_mean"]
    with pytest.raises(ValueError, match="written must be a non-empty str"):
        record_erratum("08_x", "slide", " ", "y", "z", glue=False)
    with pytest.raises(ValueError, match="erratum_id must look like"):
        record_erratum("8_x", "slide", "x", "y", "z", glue=False)


def test_mean_sd_is_the_sample_statistic():
    assert mean_sd([1.0, 2.0, 3.0]) == (2.0, 1.0)
    assert mean_sd((x for x in [4.0])) == (4.0, 0.0)


def test_welch_t():
    # means 2 and 5, sample variances 1 and 1, n = 3 each: t = -3 / sqrt(2/3)
    assert welch_t([1, 2, 3], [4, 5, 6]) == pytest.approx(-3 / (2 / 3) ** 0.5)
    assert welch_t([1, 1], [1, 1]) == 0.0
    assert welch_t([2, 2], [1, 1]) == float("inf") and welch_t([1, 1], [2, 2]) == float("-inf")


@pytest.mark.parametrize("a, b, error, match", [
    ([], [1.0], ValueError, "values must hold at least one value"),
    ([1.0, float("nan")], [1.0], ValueError, r"values\['#1'\] must be finite"),
    (["x"], [1.0], TypeError, r"values\['#0'\] must be a number, got str"),
])
def test_welch_t_bad_input(a, b, error, match):
    with pytest.raises(error, match=match):
        welch_t(a, b)


def test_combined_adequacy_shows_each_value_beside_its_own_check():
    saturated = Adequacy("test accuracy ≥ 0.95", "lowest 0.997 (seed 2)", True)
    flat = Adequacy("the loss falls by < 0.02 nats over the last 20%", "largest improvement 0.048 (seed 1)", False)
    grid = Adequacy("the rate is bracketed", "3 of 3", True)
    both = saturated & grid
    assert both.passed and str(both) == "✓ test accuracy ≥ 0.95: lowest 0.997 (seed 2); the rate is bracketed: 3 of 3"
    failed = saturated & flat & grid              # the part that failed is named, not just the whole
    assert not failed.passed and str(failed) == (
        "✗ test accuracy ≥ 0.95: lowest 0.997 (seed 2) (met); the loss falls by < 0.02 nats over the last 20%: "
        "largest improvement 0.048 (seed 1) (not met); the rate is bracketed: 3 of 3 (met)")
    assert failed.parts == (saturated, flat, grid) and (saturated & (flat & grid)).parts == failed.parts
    # the joined fields stay available, and equality ignores how a check was put together
    assert failed.measured == "lowest 0.997 (seed 2); largest improvement 0.048 (seed 1); 3 of 3"
    assert failed == Adequacy(failed.check, failed.measured, False)
    assert str(failed.unnamed()) == ("✗ test accuracy ≥ 0.95: lowest 0.997 (met); the loss falls by < 0.02 nats over "
                                     "the last 20%: largest improvement 0.048 (not met); the rate is bracketed: 3 of 3 "
                                     "(met)")
