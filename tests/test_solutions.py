"""The code that a solution shows in prose (a fenced block inside a ``{solution}`` directive) uses the chapter's own
names, as the chapter defines them.

Solutions with autograded code are code cells, which nbval executes with the chapter and
``test_editions.test_chapter_solutions_pass_the_grader`` grades. A solution of an experiment exercise instead shows a
few lines of code in its text, meant to be pasted into the chapter after its cells have run: those lines are
read here against the chapter. Every name they read must be bound by the chapter's code cells (an assignment, a
``def``, an import, a loop target) or by the snippet itself, or be a builtin; every call of a function the chapter
defines must fit its signature (the positional arguments, the keywords, the required parameters). This is how
``make_transformer()`` and ``train_model(transformer)`` — names chapter 10 never had — would have been caught.
"""
from __future__ import annotations

import ast
import builtins
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = sorted((ROOT / "chapters").glob("[0-9][0-9]_*.ipynb"))

# A MyST solution directive: an opening colon fence with {solution}, closed by a fence of the same length.
SOLUTION = re.compile(r"^(?P<fence>:{3,})\{solution\}[^\n]*\n(?P<body>.*?)^(?P=fence)[ \t]*$", re.M | re.S)
CODE_FENCE = re.compile(r"^(?P<fence>`{3,})(?:python|py|ipython3?)?[ \t]*\n(?P<code>.*?)^(?P=fence)[ \t]*$",
                        re.M | re.S)


def cells(path: Path, kind: str) -> list[str]:
    nb = json.loads(path.read_text(encoding="utf-8"))
    return ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == kind]


def solution_snippets(path: Path) -> list[str]:
    """The fenced code blocks inside the chapter's solution directives."""
    return [fence["code"] for text in cells(path, "markdown") for solution in SOLUTION.finditer(text)
            for fence in CODE_FENCE.finditer(solution["body"])]


def parse_python(source: str, where: str) -> ast.Module:
    """A code cell without its IPython magics (``%matplotlib``, ``!pip``), parsed."""
    lines = [("pass" + " " * (len(line) - 4) if line.lstrip().startswith(("%", "!")) else line)
             for line in source.splitlines()]
    return ast.parse("\n".join(lines), filename=where)


def bound_names(tree: ast.AST) -> set[str]:
    """The names a module binds at its top level, as a notebook's cells leave them for the next cell: assignments,
    defs, classes, imports, loop and with targets; not the parameters and locals of its functions, nor the
    variables of its comprehensions."""
    names: set[str] = set()
    scoped = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.ListComp, ast.SetComp,
              ast.DictComp, ast.GeneratorExp)
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        elif isinstance(node, ast.NamedExpr):
            names.add(node.target.id)
        if node is tree or not isinstance(node, scoped):
            stack.extend(ast.iter_child_nodes(node))
    return names


def any_bound(tree: ast.AST) -> set[str]:
    """Every name a snippet binds anywhere, its comprehensions' and lambdas' variables included."""
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)} | \
        {a.arg for a in ast.walk(tree) if isinstance(a, ast.arg)} | bound_names(tree)


def read_names(tree: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def chapter_functions(trees: list[ast.Module]) -> dict[str, ast.FunctionDef]:
    """The chapter's top-level functions, the last definition of each name winning (as when the cells run)."""
    functions = {}
    for tree in trees:
        for node in tree.body:
            if isinstance(node, ast.FunctionDef):
                functions[node.name] = node
    return functions


def call_problem(call: ast.Call, fn: ast.FunctionDef) -> str | None:
    """Why `call` does not fit the signature of `fn`, or None."""
    args = fn.args
    positional = [a.arg for a in args.posonlyargs + args.args]
    if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        return None                                   # *args / **kwargs at the call: cannot be read statically
    if len(call.args) > len(positional) and args.vararg is None:
        return f"{len(call.args)} positional arguments, {fn.name} takes at most {len(positional)}"
    given = set(positional[:len(call.args)])
    for keyword in call.keywords:
        if keyword.arg not in positional + [a.arg for a in args.kwonlyargs] and args.kwarg is None:
            return f"{fn.name} has no parameter {keyword.arg!r}"
        given.add(keyword.arg)
    required = positional[:len(positional) - len(args.defaults)]
    required += [a.arg for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is None]
    missing = [name for name in required if name not in given]
    return f"{fn.name} needs {', '.join(missing)}" if missing else None


def snippet_problems(snippet: str, chapter: Path) -> list[str]:
    trees = [parse_python(src, f"{chapter.name}, code cell {i}") for i, src in enumerate(cells(chapter, "code"))]
    known = set(dir(builtins)).union(*(bound_names(t) for t in trees))
    tree = parse_python(snippet, f"{chapter.name}, a solution")
    problems = [f"{name!r} is not defined by the chapter" for name in
                sorted(read_names(tree) - known - any_bound(tree))]
    functions = chapter_functions(trees)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in functions \
                and node.func.id not in bound_names(tree):
            problem = call_problem(node, functions[node.func.id])
            if problem:
                problems.append(f"line {node.lineno}: {problem}")
    return problems


SNIPPETS = [(chapter, i, code) for chapter in CHAPTERS for i, code in enumerate(solution_snippets(chapter))]


def test_solution_snippets_are_found():
    """The reader finds the solution code in prose that the book has (chapter 10's experiment exercise)."""
    assert any(chapter.name.startswith("10_") for chapter, _, _ in SNIPPETS)


@pytest.mark.parametrize("chapter, index, code", SNIPPETS,
                         ids=[f"{c.stem}-{i}" for c, i, _ in SNIPPETS])
def test_solution_code_uses_the_chapters_names(chapter, index, code):
    problems = snippet_problems(code, chapter)
    assert not problems, f"{chapter.name}, solution snippet {index}: " + "; ".join(problems)


def test_the_check_catches_names_the_chapter_never_had(tmp_path):
    """The two slips of an earlier chapter 10 solution, and a call with a missing argument, are reported."""
    chapter = tmp_path / "99_demo.ipynb"
    chapter.write_text(json.dumps({"cells": [
        {"cell_type": "code", "source": "import torch\nSEED = 0\n\ndef train_model(model, steps, lr, seed=0):\n"
                                        "    return model\n\ndef make_model(name, seed):\n    return name\n",
         "metadata": {}, "outputs": [], "execution_count": None},
        {"cell_type": "markdown", "source": ":::{solution} ex-99\n```python\nt = make_transformer()\n"
                                            "train_model(t)\nm = make_model('T', SEED)\nprint(torch.zeros(1))\n"
                                            "print([x + steps for x in range(2)])\n"
                                            "```\n:::\n", "metadata": {}}],
        "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    (snippet,) = solution_snippets(chapter)
    problems = snippet_problems(snippet, chapter)
    # `steps` is a parameter of train_model, not a name the chapter's cells leave behind; `x` is the snippet's own
    assert problems == ["'make_transformer' is not defined by the chapter", "'steps' is not defined by the chapter",
                        "line 2: train_model needs steps, lr"]
