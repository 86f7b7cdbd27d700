"""The book's one reader of MyST markdown: myst-parser's own markdown-it parser, with the book's extensions.

The HTML book is built with the same parser, so what this module reads as a directive, an exercise or a solution
is what the book shows as one. Every tool that looks inside the chapters' markdown
reads it here:

- the Colab edition (:mod:`booktools.colab`) converts :func:`blocks` into plain Markdown;
- the student edition, the student book and the instructor guide (:mod:`booktools.exercisekit`) find the
  exercises and take the solutions out with :func:`scan_markdown`, which says of each line of a markdown cell
  which exercise and which solution it belongs to;
- the grader's references and the tests use :mod:`booktools.exercisekit`, hence this reader too.

Exercises and solutions are sphinx-exercise directives, in colon fences (``:::{solution}``) or backtick fences
(````` ````{solution} `````): ``{exercise}`` with ``:label: ex-NN-name``, ``{solution} ex-NN-name``, and the
gated pairs ``{exercise-start}`` ... ``{exercise-end}`` and ``{solution-start} ex-NN-name`` ...
``{solution-end}``, whose content spans cells. A gated block open at the end of one cell carries over to the next
in a :class:`ScanState`.

MyST's rule for nesting holds here as in the book: a fence ends at the first line of its own fence characters at
least as long as its opening, even inside a code block of its body, so a directive whose body holds ``:::`` must
open with ``::::``.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from functools import lru_cache

#: The gated directives: their blocks hold no content, they open or close a region that spans cells.
GATED = ("solution-start", "solution-end", "exercise-start", "exercise-end")

_DIRECTIVE_INFO = re.compile(r"^\{(?P<name>[^}]+)\}\s*(?P<arg>.*)$", re.DOTALL)
_OPTION = re.compile(r"^\s*:(?P<key>[A-Za-z0-9_-]+):\s*(?P<value>.*?)\s*$")


@lru_cache(maxsize=1)
def parser():
    """myst-parser's own markdown-it parser, with the ``myst_enable_extensions`` of the book's ``_config.yml``."""
    from markdown_it.renderer import RendererHTML
    from myst_parser.config.main import MdParserConfig
    from myst_parser.parsers.mdit import create_md_parser

    from booktools import notebooks

    extensions = notebooks.load_config().get("parse", {}).get("myst_enable_extensions", [])
    return create_md_parser(MdParserConfig(enable_extensions=set(extensions)), RendererHTML)


def blocks(text: str) -> list[tuple[object, list | None, list[tuple[str, str]]]]:
    """The top-level blocks of ``text``: for each, its opening token, its line range ``[start, end)`` (None for a
    token without one) and the MyST roles inside it, as (name, content) pairs."""
    tokens = parser().parse(text)
    found, i = [], 0
    while i < len(tokens):
        token = tokens[i]
        j = i
        if token.nesting == 1:  # find the matching close token
            depth = 0
            for j in range(i, len(tokens)):
                depth += tokens[j].nesting
                if depth == 0:
                    break
        roles = [(child.meta["name"], child.content)
                 for t in tokens[i:j + 1] for child in (t.children or []) if child.type == "myst_role"]
        found.append((token, token.map, roles))
        i = j + 1
    return found


def directive_of(token) -> tuple[str, str] | None:
    """(name, argument) of a fence token that opens a directive (``{name} argument``), else None."""
    if token.type not in ("fence", "colon_fence"):
        return None
    match = _DIRECTIVE_INFO.match(token.info.strip())
    return (match["name"], match["arg"]) if match else None


def _options(lines: list[str]) -> tuple[dict, int]:
    """The options at the head of a directive's content lines, and how many lines they take."""
    if lines and lines[0].strip() == "---":
        end = next((i for i in range(1, len(lines)) if lines[i].strip() == "---"), None)
        if end is not None:
            import yaml

            loaded = yaml.safe_load("\n".join(lines[1:end])) or {}
            return {str(k): str(v) for k, v in loaded.items()}, end + 1
    options: dict[str, str] = {}
    for count, line in enumerate(lines):
        match = _OPTION.match(line)
        if not match:
            return options, count
        options[match["key"]] = match["value"]
    return options, len(lines)


def split_options(content: str) -> tuple[dict, str]:
    """A directive's options (``:key: value`` lines, or a ``---`` YAML block) and the body after them."""
    lines = content.split("\n")
    options, count = _options(lines)
    return options, "\n".join(lines[count:])


# --------------------------------------------------------------------------- exercises and solutions
_SERIAL = itertools.count()


@dataclass
class Directive:
    """An exercise or solution directive met by :func:`scan_markdown`."""

    name: str
    arg: str = ""
    label: str | None = None  # its :label: option
    serial: int = field(default_factory=lambda: next(_SERIAL))  # tells two directives with one label apart

    @property
    def solution_of(self) -> str:
        """The exercise label a solution names (``?`` when it names none)."""
        return self.arg.split()[0] if self.arg.strip() else "?"


@dataclass
class Line:
    """One line of a markdown cell, with the exercise and the solution it belongs to."""

    text: str
    solution: str | None = None        # label of the solution it is part of (fences included)
    exercise: Directive | None = None  # the exercise whose text it is part of (fences included)
    markup: bool = False               # a directive's fence or option line, not content


@dataclass
class ScanState:
    """What carries over from one markdown cell to the next: the open gated blocks."""

    gated_solution: str | None = None
    gated_exercise: Directive | None = None


def _closes(line: str, fence: str) -> bool:
    stripped = line.strip()
    return len(stripped) >= len(fence) and set(stripped) == {fence[0]}


def scan_markdown(source: str, state: ScanState) -> list[Line]:
    """Every line of one markdown cell, with the exercise and solution it belongs to; updates ``state``.

    A line belongs to a solution when it lies in a ``{solution}`` directive or between ``{solution-start}`` and
    ``{solution-end}`` (the fences of both included), to an exercise likewise. The fence and option lines of an
    exercise or solution directive are ``markup``; the lines of its body are content, nested blocks included.
    """
    lines = source.split("\n")
    if lines and lines[-1] == "" and source.endswith("\n"):
        lines.pop()
    kinds: list[tuple[str | None, Directive | None, bool]] = [None] * len(lines)  # type: ignore[list-item]
    position = 0

    def plain(upto: int) -> None:
        for n in range(position, min(upto, len(lines))):
            kinds[n] = (state.gated_solution, state.gated_exercise, False)

    for token, span, _ in blocks(source):
        name, arg = directive_of(token) or (None, "")
        if span is None or name not in ("exercise", "solution", *GATED):
            continue  # its lines take the gated state around them, as the text between blocks
        start, end = span[0], min(span[1], len(lines))
        plain(start)
        position = end
        if name in ("exercise", "solution"):
            options, option_lines = _options(token.content.split("\n"))
            directive = Directive(name, arg, options.get("label"))
            solution = directive.solution_of if name == "solution" else state.gated_solution
            exercise = directive if name == "exercise" else state.gated_exercise
            closed = end - 1 > start and _closes(lines[end - 1], token.markup)
            first_body, last_body = start + 1 + option_lines, (end - 1 if closed else end)
            for n in range(start, end):
                kinds[n] = (solution, exercise, not first_body <= n < last_body)
        elif name in GATED:
            options, _ = split_options(token.content)
            if name == "solution-start":
                label = Directive(name, arg).solution_of
                solution, exercise = label, state.gated_exercise
                state.gated_solution = label
            elif name == "solution-end":
                solution, exercise = state.gated_solution or "?", state.gated_exercise
                state.gated_solution = None
            elif name == "exercise-start":
                state.gated_exercise = Directive(name, arg, options.get("label"))
                solution, exercise = state.gated_solution, state.gated_exercise
            else:
                solution, exercise = state.gated_solution, state.gated_exercise
                state.gated_exercise = None
            for n in range(start, end):
                kinds[n] = (solution, exercise, True)
    plain(len(lines))
    return [Line(text, *kind) for text, kind in zip(lines, kinds)]
