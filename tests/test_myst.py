"""booktools.myst, the book's one MyST reader: which lines of a markdown cell belong to an exercise or a solution."""

from __future__ import annotations

from booktools import myst


def scan(*cells: str):
    """(text, solution, exercise label, markup) of every line of the cells, read in order with one state."""
    state = myst.ScanState()
    return [(line.text, line.solution, line.exercise.label if line.exercise else None, line.markup)
            for cell in cells for line in myst.scan_markdown(cell, state)]


def test_a_solution_directive_and_its_fences():
    lines = scan("Before.\n\n:::{solution} ex-01-a\n:class: dropdown\n\nThe answer.\n:::\n\nAfter.")
    assert lines == [
        ("Before.", None, None, False),
        ("", None, None, False),
        (":::{solution} ex-01-a", "ex-01-a", None, True),
        (":class: dropdown", "ex-01-a", None, True),
        ("", "ex-01-a", None, False),
        ("The answer.", "ex-01-a", None, False),
        (":::", "ex-01-a", None, True),
        ("", None, None, False),
        ("After.", None, None, False),
    ]


def test_an_exercise_takes_its_label_from_either_option_syntax():
    for options in (":label: ex-02-b\n:class: x", "---\nlabel: ex-02-b\nclass: x\n---"):
        lines = scan(f"````{{exercise}} Title\n{options}\n\nDo it.\n````")
        assert {label for _, _, label, _ in lines} == {"ex-02-b"}
        assert [text for text, _, _, markup in lines if not markup] == ["", "Do it."]


def test_a_code_block_inside_a_solution_is_content():
    lines = scan("````{solution} ex-03-c\nSee:\n```python\nx = 1\n```\n````\nOut.")
    content = [text for text, solution, _, markup in lines if solution == "ex-03-c" and not markup]
    assert content == ["See:", "```python", "x = 1", "```"]
    assert lines[-1] == ("Out.", None, None, False)


def test_a_fence_ends_at_its_own_fence_characters_even_inside_a_code_block():
    """MyST's rule, as the book renders it: a ``:::`` line closes a ``:::`` directive even inside a code block of
    its body; a longer opening fence keeps it inside."""
    body = "```\n:::\nsecret()\n```\n"
    short = scan(":::{solution} ex-04-d\n" + body + ":::")
    assert ("secret()", None, None, False) in short
    longer = scan("::::{solution} ex-04-d\n" + body + "::::")
    assert ("secret()", "ex-04-d", None, False) in longer


def test_an_unclosed_directive_runs_to_the_end_of_the_cell():
    lines = scan(":::{solution} ex-05-e\nOne.\nTwo.")
    assert [(text, solution, markup) for text, solution, _, markup in lines] == [
        (":::{solution} ex-05-e", "ex-05-e", True), ("One.", "ex-05-e", False), ("Two.", "ex-05-e", False)]


def test_gated_blocks_carry_over_from_cell_to_cell():
    lines = scan(
        "::::{exercise-start} Gated\n:label: ex-06-f\n::::\n\nThe task.\n\n::::{exercise-end}\n::::",
        ":::{solution-start} ex-06-f\n:::\n\nHint.",
        ":::{note}\nInside the solution.\n:::",
        "Still the solution.\n\n:::{solution-end}\n:::\n\nAfter.",
    )
    by_text = {text: (solution, label, markup) for text, solution, label, markup in lines}
    assert by_text["The task."] == (None, "ex-06-f", False)
    assert by_text["::::{exercise-end}"] == (None, "ex-06-f", True)
    assert by_text[":::{solution-start} ex-06-f"] == ("ex-06-f", None, True)
    assert by_text["Hint."] == ("ex-06-f", None, False)
    assert by_text["Inside the solution."] == ("ex-06-f", None, False)
    assert by_text[":::{solution-end}"] == ("ex-06-f", None, True)
    assert by_text["After."] == (None, None, False)


def test_a_solution_that_names_no_exercise_is_marked():
    assert scan(":::{solution}\nText.\n:::")[1] == ("Text.", "?", None, False)


def test_split_options_and_directive_of():
    assert myst.split_options(":label: x\n:class: dropdown\n\nBody\n") == (
        {"label": "x", "class": "dropdown"}, "\nBody\n")
    assert myst.split_options("---\nname: fig\n---\nCaption") == ({"name": "fig"}, "Caption")
    tokens = [token for token, _, _ in myst.blocks("```python\nx\n```\n\n:::{note} Title\nx\n:::\n")]
    assert [myst.directive_of(t) for t in tokens] == [None, ("note", "Title")]
