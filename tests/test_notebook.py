"""transformer_lib.notebook: glue without myst-nb, and the choice of a chapter's settings."""
import pytest

from transformer_lib import notebook

CPU = dict(d_model=32, steps=200, train_steps=100, lengths=(128, 256))
GPU = dict(d_model=256, steps=3_000, train_steps=1_000, lengths=(1024, 16384))


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    monkeypatch.delenv("BOOK_SETTINGS", raising=False)
    monkeypatch.delenv("BOOK_MAX_STEPS", raising=False)
    monkeypatch.delenv("BOOK_SMOKE", raising=False)


def test_cpu_settings_without_cuda_or_override():
    if notebook.use_gpu_settings():
        pytest.skip("CUDA present")
    assert notebook.pick_settings(CPU, GPU) == CPU


def test_book_settings_gpu_takes_the_gpu_settings_and_the_cap_applies_to_steps_only(monkeypatch):
    monkeypatch.setenv("BOOK_SETTINGS", "gpu")
    assert notebook.pick_settings(CPU, GPU) == GPU
    monkeypatch.setenv("BOOK_MAX_STEPS", "3")
    monkeypatch.setenv("BOOK_SMOKE", '{"lengths": [64]}')
    chosen = notebook.pick_settings(CPU, GPU)
    assert chosen == dict(d_model=256, steps=3, train_steps=3, lengths=(64,))   # a JSON list replaces a tuple
    assert GPU["steps"] == 3_000  # the chapter's dict is not modified


def test_smoke_overrides_apply_only_under_the_cap(monkeypatch):
    monkeypatch.setenv("BOOK_SETTINGS", "gpu")
    monkeypatch.setenv("BOOK_SMOKE", '{"lengths": [64], "d_model": 16}')
    assert notebook.pick_settings(CPU, GPU) == GPU
    monkeypatch.setenv("BOOK_MAX_STEPS", "1000")
    assert notebook.pick_settings(CPU, GPU) == dict(d_model=16, steps=1_000, train_steps=1_000, lengths=(64,))


@pytest.mark.parametrize("var, value, message", [
    ("BOOK_SETTINGS", "big", "BOOK_SETTINGS must be 'cpu' or 'gpu'"),
    ("BOOK_MAX_STEPS", "0", "BOOK_MAX_STEPS must be a positive integer"),
    ("BOOK_MAX_STEPS", "ten", "BOOK_MAX_STEPS must be a positive integer"),
])
def test_bad_environment_is_named(monkeypatch, var, value, message):
    monkeypatch.setenv(var, value)
    with pytest.raises(ValueError, match=message):
        notebook.pick_settings(CPU, GPU)


@pytest.mark.parametrize("value, message", [
    ("{seeds: 2}", r"BOOK_SMOKE must be a JSON object of settings, got '\{seeds: 2\}'"),
    ("[1, 2]", "BOOK_SMOKE must be a JSON object of settings, got list"),
    ('{"nope": 1}', r"BOOK_SMOKE must name settings among \['d_model', 'lengths', 'steps', 'train_steps'\], "
                    r"got unknown \['nope'\]"),
])
def test_bad_smoke_settings_are_named_under_the_cap(monkeypatch, value, message):
    monkeypatch.setenv("BOOK_MAX_STEPS", "3")
    monkeypatch.setenv("BOOK_SMOKE", value)
    with pytest.raises(ValueError, match=message):
        notebook.pick_settings(CPU, GPU)


def test_mismatched_keys_are_named():
    with pytest.raises(ValueError, match="only in GPU: \\['extra'\\]"):
        notebook.pick_settings(CPU, {**GPU, "extra": 1})


def test_glue_writes_what_myst_nb_writes(monkeypatch):
    shown = []
    monkeypatch.setattr("IPython.display.display", lambda data, raw, metadata: shown.append((data, metadata)))
    notebook.glue("c99_value", "0.87", display=False)
    data, metadata = shown[0]
    assert data == {"application/papermill.record/text/plain": "'0.87'"}
    assert metadata["scrapbook"] == {"name": "c99_value", "mime_prefix": "application/papermill.record/"}
    myst_nb = pytest.importorskip("myst_nb")
    shown.clear()
    monkeypatch.setattr("myst_nb.ext.glue.ipy_display", lambda data, raw, metadata: shown.append((data, metadata)))
    myst_nb.glue("c99_value", "0.87", display=False)
    assert shown[0] == (data, metadata)


def test_glue_rejects_a_bad_name():
    with pytest.raises(TypeError, match="glue name must be a non-empty string"):
        notebook.glue("", 1)


# --------------------------------------------------------------------------- the chapters' formatting helpers
def test_md_table_renders_a_markdown_table():
    table = notebook.md_table(["model", "loss"], [["RNN", "1.25"], ["Transformer", 0.5]])
    assert table.data == "| model | loss |\n| --- | --- |\n| RNN | 1.25 |\n| Transformer | 0.5 |"


def test_md_table_escapes_pipes_inside_cells():
    # "max |x|" must stay one cell: an unescaped pipe would split it and shift the row's other cells
    table = notebook.md_table(["quantity", "value"], [["max |token mean|", "< 1e-12"]])
    assert table.data.splitlines()[2] == "| max \\|token mean\\| | < 1e-12 |"
    from markdown_it import MarkdownIt

    html = MarkdownIt("commonmark").enable("table").render(table.data)
    assert "<td>max |token mean|</td>" in html and "<td>&lt; 1e-12</td>" in html


@pytest.mark.parametrize("header, rows, match", [
    ([], [], "header must name at least one column"),
    (["a", "b"], [["1", "2"], ["3"]], r"rows\[1\] must have 2 cells .* got 1"),
])
def test_md_table_bad_input(header, rows, match):
    with pytest.raises(ValueError, match=match):
        notebook.md_table(header, rows)


@pytest.mark.parametrize("items, text", [(["a"], "a"), (["a", "b"], "a and b"), (["a", "b", "c"], "a, b and c"),
                                         ([0.5, 1], "0.5 and 1")])
def test_listing(items, text):
    assert notebook.listing(items) == text


def test_listing_needs_an_item():
    with pytest.raises(ValueError, match="items must hold at least one item"):
        notebook.listing([])


@pytest.mark.parametrize("x, kwargs, text", [
    (3.3e18, {}, "3.3 × 10¹⁸"),
    (7.2e-6, {}, "7.2 × 10⁻⁶"),
    (-1.234e5, dict(digits=2), "-1.23 × 10⁵"),
    (0.25, dict(plain=(0.01, 1000)), "0.25"),
    (0.0, dict(plain=(0.0, 1.0)), "0.0"),
    (5e-3, dict(plain=(0.01, 1000)), "5.0 × 10⁻³"),
    (45.72, dict(plain=(0.01, 1000)), "46"),           # two significant digits, and no bare point after them
    (4.0, dict(plain=(0.01, 1000)), "4.0"),
])
def test_sci(x, kwargs, text):
    assert notebook.sci(x, **kwargs) == text


@pytest.mark.parametrize("x, kwargs, match", [
    (0.0, {}, "x must be a finite, non-zero number .* got 0.0"),
    (float("nan"), {}, "x must be a finite, non-zero number"),
    (1.0, dict(digits=-1), "digits must be an integer >= 0, got -1"),
])
def test_sci_bad_input(x, kwargs, match):
    with pytest.raises(ValueError, match=match):
        notebook.sci(x, **kwargs)


def test_glue_text_records_without_displaying(monkeypatch):
    calls = []
    monkeypatch.setattr(notebook, "glue", lambda name, value, display=True: calls.append((name, value, display)))
    notebook.glue_text("c01_n", "3")
    assert calls == [("c01_n", "3", False)]
