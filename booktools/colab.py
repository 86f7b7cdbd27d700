"""The Colab edition: every chapter of `_toc.yml` as a notebook that reads like the book in Colab.

Colab renders plain Markdown, not MyST, so the chapter's markdown is converted:

- ``{glue:text}`name``` (and ``{glue}``, ``{glue:md}``) -> the value of the book's stored run, in bold
  with a † marker (the top cell explains it; the reader's own run prints ``name = value`` below the
  cells, see ``transformer_lib.notebook.glue``); ``{glue:figure}`` -> the stored image, as a cell
  attachment;
- ``{cite:p}`` / ``{cite:t}`` -> author-year text from `references.bib`;
- ``{ref}``, ``{numref}``, ``{doc}``, ``{term}``, ``{eq}`` -> links to the HTML book (`html.baseurl`);
  ``{func}`~transformer_lib.x.y``` and the other Python roles -> code text, linked to the API page
  when it documents the name;
- ``(label)=`` -> ``<a id="label"></a>``; ``{exercise}`` -> a ``### Exercise N.k: title`` section;
  ``{solution}`` -> ``<details>``; a gated solution (``{solution-start}`` ... ``{solution-end}``)
  -> a "Solution (code)" heading, its prose folded and its code cells in Colab's form view;
- admonitions (``{note}``, ``{tip}``, ``{margin}``, ...) -> block quotes; math stays math.

Cells tagged ``remove-cell`` are dropped, except the Colab set-up cell, which becomes the template of
:mod:`booktools.notebooks`. Code cells keep their stored outputs. The MyST is parsed by
:mod:`booktools.myst`, the book's one MyST reader (myst-parser's own parser); a construct this
converter does not know raises :class:`ConversionError` naming the chapter and cell, rather than
leaking raw MyST into the edition.

``booktools/make_colab_edition.py`` writes ``colab/``; ``tests/test_colab_edition.py`` checks it.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from booktools import myst, notebooks as nbt

EDITION_DIR = nbt.COLAB_DIR
BOOK_RUN_MARK = "<sup>†</sup>"
FORM_TITLE = "# @title Solution"

ADMONITIONS = {"note": "Note", "tip": "Tip", "hint": "Hint", "important": "Important",
               "warning": "Warning", "caution": "Caution", "attention": "Attention", "danger": "Danger",
               "error": "Error", "seealso": "See also", "admonition": "", "margin": "", "sidebar": "",
               "topic": "", "epigraph": "", "pull-quote": "", "highlights": ""}
PY_ROLES = {"func", "meth", "class", "mod", "attr", "data", "exc", "obj", "const", "any"}
CALLABLE_ROLES = {"func", "meth"}
#: Patterns of raw MyST that must not survive in a markdown cell of the edition.
RAW_MYST = {
    "role": re.compile(r"\{[a-z][a-z0-9:_-]*\}`"),
    "colon fence": re.compile(r"^\s*:::", re.MULTILINE),
    "directive fence": re.compile(r"^\s*```+\s*\{", re.MULTILINE),
    "target": re.compile(r"^\s*\(.*\)=\s*$", re.MULTILINE),
}


class ConversionError(ValueError):
    """A MyST construct the converter cannot turn into plain markdown."""


_ROLE_AT = re.compile(r"\{(?P<name>[a-zA-Z0-9_:+-]+)\}(?P<ticks>`+)(?P<content>.*?)(?<!`)(?P=ticks)(?!`)", re.DOTALL)
_TICKS = re.compile(r"`+")


def _scan_roles(text: str):
    """(start, end, name, content) of each MyST role of ``text``, skipping code spans: a role starts
    at ``{name}`` directly followed by backticks; any other backtick run opens a code span."""
    found, pos = [], 0
    while pos < len(text):
        ch = text[pos]
        if ch == "\\":
            pos += 2
            continue
        if ch == "{":
            match = _ROLE_AT.match(text, pos)
            if match:
                found.append((match.start(), match.end(), match["name"], match["content"]))
                pos = match.end()
                continue
        if ch == "`":
            run = _TICKS.match(text, pos).group()
            close = re.compile(rf"(?<!`){run}(?!`)").search(text, pos + len(run))
            pos = close.end() if close else pos + len(run)
            continue
        pos += 1
    return found


# --------------------------------------------------------------------------- book-wide indexes
@dataclass
class Target:
    docname: str
    anchor: str
    title: str


def _make_id(text: str) -> str:
    from docutils.nodes import make_id

    return make_id(text)


def _strip_roles(text: str) -> str:
    return re.sub(r"\{[^}]+\}`([^`]*)`", r"\1", text).strip()


def _doc_markdown(docname: str) -> list[str]:
    """The markdown sources of a document of the book (a .md page or the markdown cells of a notebook)."""
    for suffix in (".ipynb", ".md"):
        path = nbt.ROOT / f"{docname}{suffix}"
        if path.is_file():
            if suffix == ".md":
                return [path.read_text(encoding="utf-8")]
            nb = nbt.read_notebook(path)
            return [nbt.cell_source(c) for c in nb.cells if c.cell_type == "markdown"]
    return []


_LABEL = re.compile(r"^\((?P<label>[^()\s]+)\)=\s*$")
_HEADING = re.compile(r"^#{1,6}\s+(?P<title>.+?)\s*#*\s*$")
_OPTION_LABEL = re.compile(r"^\s*:(?:label|name):\s*(?P<label>\S+)\s*$")
_DIRECTIVE = re.compile(r"^\s*(?:`{3,}|:{3,})\s*\{(?P<name>[a-z:-]+)\}\s*(?P<arg>.*?)\s*$")


@lru_cache(maxsize=1)
def book_index() -> tuple[dict[str, Target], dict[str, str], dict[str, str]]:
    """(labels, doc titles, glossary terms) of every document of `_toc.yml`.

    labels: label -> Target (document, HTML anchor, title); exercises are titled "Exercise N.k".
    glossary terms: lower-cased term -> its HTML anchor on the glossary page.
    """
    from sphinx.util.nodes import _make_id as sphinx_make_id

    labels: dict[str, Target] = {}
    titles: dict[str, str] = {}
    terms: dict[str, str] = {}
    for docname in nbt.toc_docnames():
        number = nbt.chapter_number(Path(docname)) if docname.startswith("chapters/") else None
        exercise = 0
        for source in _doc_markdown(docname):
            lines = source.splitlines()
            pending: list[str] = []
            in_glossary = False
            for n, line in enumerate(lines):
                directive = _DIRECTIVE.match(line)
                if directive and directive["name"] in ("exercise", "exercise-start"):
                    exercise += 1
                    for option in lines[n + 1:n + 6]:
                        match = _OPTION_LABEL.match(option)
                        if match:
                            title = f"Exercise {number}.{exercise}" if number else "Exercise"
                            labels[match["label"]] = Target(docname, _make_id(match["label"]), title)
                            break
                if directive and directive["name"] == "glossary":
                    in_glossary = True
                    continue
                if in_glossary:
                    if re.match(r"^\s*(`{3,}|:{3,})\s*$", line):
                        in_glossary = False
                    elif line.strip() and not line[0].isspace():
                        terms[line.strip().lower()] = sphinx_make_id(f"term-{line.strip()}")
                    continue
                label = _LABEL.match(line)
                if label:
                    pending.append(label["label"])
                    continue
                heading = _HEADING.match(line)
                if heading:
                    title = _strip_roles(heading["title"])
                    titles.setdefault(docname, title)
                    for name in pending:
                        labels[name] = Target(docname, _make_id(name), title)
                    pending = []
                elif line.strip() and pending and not line.startswith("%"):
                    for name in pending:  # a label above something else than a heading
                        labels.setdefault(name, Target(docname, _make_id(name), name))
                    pending = []
    return labels, titles, terms


@lru_cache(maxsize=1)
def bibliography() -> dict[str, tuple[str, str]]:
    """Citation key -> (authors as cited, year) from `references.bib`."""
    from pybtex.database import parse_file
    from pybtex.richtext import Text

    def plain(latex: str) -> str:
        return str(Text.from_latex(latex)).strip()

    entries = {}
    data = parse_file(str(nbt.REFERENCES), bib_format="bibtex")
    for key, entry in data.entries.items():
        people = entry.persons.get("author") or entry.persons.get("editor") or []
        names = [plain(" ".join(p.prelast_names + p.last_names)) for p in people]
        others = any(n.lower() == "others" for n in names)
        names = [n for n in names if n.lower() != "others"]
        if not names:
            authors = plain(entry.fields.get("organization", entry.fields.get("title", key)))
        elif len(names) == 1 and not others:
            authors = names[0]
        elif len(names) == 2 and not others:
            authors = f"{names[0]} and {names[1]}"
        else:
            authors = f"{names[0]} et al."
        entries[key] = (authors, plain(entry.fields.get("year", "n.d.")))
    return entries


@lru_cache(maxsize=None)
def api_page(target: str) -> tuple[str, str]:
    """(docname, anchor) of the API page that documents ``target``, a dotted name in ``transformer_lib``.

    Each module has its page, ``api/<module>`` (the API reference, ``booktools/api_modules.py``); a name is documented
    on the page of the module that defines it, which is not the package that re-exports it
    (``transformer_lib.training.fit`` is ``api/transformer_lib.training.loop#transformer_lib.training.loop.fit``).
    """
    import importlib

    parts = target.split(".")
    for count in range(len(parts), 0, -1):
        try:
            module = importlib.import_module(".".join(parts[:count]))
            break
        except ImportError:
            continue
    else:
        raise ConversionError(f"{target}: no module of it can be imported")
    home, qualname, obj = module.__name__, [], module
    for part in parts[count:]:
        obj = getattr(obj, part, None)
        if obj is None:
            raise ConversionError(f"{target}: {home} has no attribute {part!r}")
        if isinstance(obj, type) or callable(obj) and hasattr(obj, "__qualname__"):
            home, qualname = obj.__module__, obj.__qualname__.split(".")
        else:  # a constant or an attribute: documented where it is reached
            qualname.append(part)
    return f"api/{home}", ".".join([home, *qualname]) if qualname else f"module-{home}"


# --------------------------------------------------------------------------- one chapter
def _escape(text: str) -> str:
    return re.sub(r"([\\`*_\[\]<>|])", r"\\\1", text)


def _format_plain(text: str, fmt: str) -> str:
    """What myst-nb's ``{glue:text}`key:fmt``` shows: the literal-evaluated value, formatted."""
    import ast

    try:
        value = ast.literal_eval(text)
    except (SyntaxError, ValueError):
        value = text
    if not fmt:
        return str(value)
    kind = fmt[-1]
    if kind == "s":
        value = str(value)
    elif kind in "bcdoxX":
        value = int(value)
    elif kind in "eEfFgGn%":
        value = float(value)
    return format(value, fmt)


@dataclass
class Chapter:
    """What the conversion of one chapter needs and accumulates."""

    path: Path
    nb: object
    number: int
    docname: str
    glued: dict = field(default_factory=dict)
    exercises: int = 0
    attachments: dict = field(default_factory=dict)  # of the markdown cell being converted
    where: str = ""


class Converter:
    def __init__(self, chapter: Chapter, config: dict):
        self.ch = chapter
        self.base = nbt.html_baseurl(config)
        self.config = config
        self.labels, self.titles, self.terms = book_index()
        self.solution_has_code: list[bool] = []

    # ---------------------------------------------------------------- errors and links
    def fail(self, message: str):
        raise ConversionError(f"{nbt.relative(self.ch.path)}, {self.ch.where}: {message}")

    def html(self, docname: str, anchor: str = "") -> str:
        return f"{self.base}{docname}.html" + (f"#{anchor}" if anchor else "")

    def resolve_doc(self, target: str) -> str:
        target = re.sub(r"\.(md|ipynb)$", "", target)
        if target.startswith("/"):
            return target.lstrip("/")
        parent = Path(self.ch.docname).parent
        return Path(parent, target).as_posix() if parent.as_posix() != "." else target

    # ---------------------------------------------------------------- roles
    @staticmethod
    def _text_and_target(content: str) -> tuple[str | None, str]:
        match = re.fullmatch(r"(?s)(?P<text>.*?)\s*<(?P<target>[^<>]+)>", content.strip())
        if match and match["text"]:
            return match["text"], match["target"].strip()
        return None, content.strip()

    def glue_value(self, content: str, role: str) -> str:
        key, fmt = content, ""
        if role in ("glue:text", "glue") and ":" in content.replace("::", "\0"):
            key, fmt = content.rsplit(":", 1)
        values = self.ch.glued
        if "::" in key:
            doc, key = key.split("::", 1)
            path = nbt.ROOT / f"{self.resolve_doc(doc)}.ipynb"
            if not path.is_file():
                self.fail(f"{{{role}}}`{content}` names a missing notebook {doc}")
            values = nbt.glued_outputs(nbt.read_notebook(path))
        bundle = values.get(key)
        if bundle is None:
            self.fail(f"{{{role}}}`{content}`: no value glued as {key!r} in the stored run")
        if role == "glue:md" or ("text/markdown" in bundle and "text/plain" not in bundle):
            return f"{nbt._text(bundle['text/markdown']).strip()}{BOOK_RUN_MARK}"
        if "text/plain" not in bundle:
            self.fail(f"{{{role}}}`{content}`: the glued value {key!r} has no text")
        text = _format_plain(nbt._text(bundle["text/plain"]), fmt if role != "glue" else "")
        return f"**{_escape(text)}**{BOOK_RUN_MARK}"

    def cite(self, role: str, content: str) -> str:
        bib = bibliography()
        parts = []
        for key in [k.strip() for k in content.split(",") if k.strip()]:
            if key not in bib:
                self.fail(f"{{{role}}}`{content}`: {key!r} is not in references.bib")
            parts.append(bib[key])
        kind = role.split(":", 1)[1] if ":" in role else "p"
        if kind in ("t", "ts"):
            return "; ".join(f"{a} ({y})" for a, y in parts)
        if kind in ("author", "authors"):
            return "; ".join(a for a, _ in parts)
        if kind == "year":
            return "; ".join(y for _, y in parts)
        return "(" + "; ".join(f"{a}, {y}" for a, y in parts) + ")"

    def python_role(self, name: str, content: str) -> str:
        text, target = self._text_and_target(content)
        short = target.startswith("~")
        target = target.lstrip("~.!")
        shown = text or (target.rsplit(".", 1)[-1] if short else target)
        if not text and name in CALLABLE_ROLES and not shown.endswith(")"):
            shown += "()"
        code = f"`{shown}`"
        if target.startswith("transformer_lib"):
            return f"[{code}]({self.html(*api_page(target))})"
        return code

    def role(self, name: str, content: str) -> str:
        name = name.removeprefix("py:")
        if name in ("glue", "glue:text", "glue:md"):
            return self.glue_value(content, name)
        if name == "cite" or name.startswith("cite:"):
            return self.cite(name, content)
        if name in ("ref", "numref", "eq"):
            text, label = self._text_and_target(content)
            target = self.labels.get(label)
            if target is None:
                self.fail(f"{{{name}}}`{content}`: no label {label!r} in the book")
            if name == "eq":
                return f"[({label})]({self.html(target.docname, target.anchor)})"
            shown = text or target.title
            shown = shown.replace("{number}", "").replace("%s", "").strip() or target.title
            return f"[{shown}]({self.html(target.docname, target.anchor)})"
        if name == "doc":
            text, target = self._text_and_target(content)
            docname = self.resolve_doc(target)
            if docname not in self.titles and not (nbt.ROOT / f"{docname}.md").is_file() \
                    and not (nbt.ROOT / f"{docname}.ipynb").is_file():
                self.fail(f"{{doc}}`{content}`: no document {docname!r}")
            return f"[{text or self.titles.get(docname, docname)}]({self.html(docname)})"
        if name == "term":
            text, target = self._text_and_target(content)
            anchor = self.terms.get(target.lower())
            if anchor is None:
                self.fail(f"{{term}}`{content}`: {target!r} is not in the glossary")
            return f"[{text or target}]({self.html('glossary', anchor)})"
        if name in PY_ROLES:
            return self.python_role(name, content)
        if name == "math":
            return f"${content}$"
        if name in ("sub", "sup", "kbd"):
            return f"<{name}>{content}</{name}>"
        if name in ("abbr", "guilabel", "menuselection", "file", "samp", "command", "program",
                    "code", "literal"):
            return f"`{content}`" if name in ("file", "samp", "command", "program", "code", "literal") \
                else re.sub(r"\s*\(.*\)$", "", content) if name == "abbr" else content
        if name == "download":
            text, target = self._text_and_target(content)
            path = self.resolve_doc(target)
            repo, branch = nbt.github_repo(nbt.repository_url(self.config)), nbt.repository_branch(self.config)
            return f"[{text or Path(target).name}](https://github.com/{repo}/raw/{branch}/{path})"
        self.fail(f"unsupported role {{{name}}}`{content}`")

    def inline(self, text: str, expected=None) -> str:
        """``text`` with every MyST role replaced; ``expected``: the roles markdown-it found."""
        found = _scan_roles(text)

        def norm(pairs):
            return [(name, " ".join(content.split())) for name, content in pairs]

        if expected is not None and norm((n, c) for _, _, n, c in found) != norm(expected):
            self.fail(f"the MyST roles found ({[n for _, _, n, _ in found]}) differ from markdown-it's "
                      f"({[n for n, _ in expected]}) in {text[:80]!r}")
        out, pos = [], 0
        for start, end, name, content in found:
            content = content if name == "math" else " ".join(content.split())
            out += [text[pos:start], self.role(name, content)]
            pos = end
        out.append(text[pos:])
        return "".join(out)

    # ---------------------------------------------------------------- directives
    def anchor(self, options: dict) -> str:
        label = options.get("label") or options.get("name")
        return f'<a id="{label}"></a>\n' if label else ""

    @staticmethod
    def quote(text: str) -> str:
        return "\n".join(f"> {line}" if line.strip() else ">" for line in text.strip("\n").split("\n"))

    def glue_figure(self, key: str, options: dict, caption: str) -> str:
        bundle = self.ch.glued.get(key)
        if bundle is None:
            self.fail(f"{{glue:figure}} {key}: no value glued as {key!r} in the stored run")
        for mime, ext in (("image/png", "png"), ("image/jpeg", "jpg"), ("image/svg+xml", "svg")):
            if mime in bundle:
                name = f"{key}.{ext}"
                self.ch.attachments[name] = {mime: nbt._text(bundle[mime]).replace("\n", "")}
                alt = _strip_roles(caption.strip().split("\n")[0]) if caption.strip() else key
                text = f"{self.anchor(options)}![{_escape(alt)}](attachment:{name})"
                if caption.strip():
                    text += f"\n\n*{self.fragment(caption).strip()}* (figure from the book's run)"
                return text
        self.fail(f"{{glue:figure}} {key}: the glued value has no image")

    def directive(self, name: str, arg: str, content: str) -> str:
        options, body = myst.split_options(content)
        if name == "exercise":
            return self.exercise_heading(arg, options) + "\n\n" + self.fragment(body).strip("\n")
        if name == "solution":
            return (f"<details><summary>Solution</summary>\n\n{self.fragment(body).strip()}\n\n</details>")
        if name in ADMONITIONS:
            title = self.inline(arg) if arg else ADMONITIONS[name]
            text = self.fragment(body).strip("\n")
            head = f"**{title}.**" if title and not title.endswith((".", "?", "!", ":")) else \
                (f"**{title}**" if title else "")
            return self.anchor(options) + self.quote(f"{head}\n\n{text}" if head else text)
        if name in ("dropdown", "toggle"):
            return (f"<details><summary>{self.inline(arg) or 'Details'}</summary>\n\n"
                    f"{self.fragment(body).strip()}\n\n</details>")
        if name == "math":
            return f"{self.anchor(options)}$$\n{body.strip()}\n$$"
        if name in ("code", "code-block", "sourcecode", "code-cell"):
            return f"```{arg}\n{body.rstrip()}\n```"
        if name in ("glue:figure", "glue:any", "glue"):
            return self.glue_figure(arg.strip(), options, body)
        if name in ("figure", "image"):
            path = self.resolve_doc(arg.strip())
            repo, branch = nbt.github_repo(nbt.repository_url(self.config)), nbt.repository_branch(self.config)
            url = f"https://raw.githubusercontent.com/{repo}/{branch}/{path}"
            caption = self.fragment(body).strip()
            return f"{self.anchor(options)}![{_escape(options.get('alt', Path(arg).stem))}]({url})" + \
                (f"\n\n*{caption}*" if caption else "")
        if name == "raw":
            return body if arg.strip() == "html" else ""
        self.fail(f"unsupported directive {{{name}}} {arg}")

    def exercise_heading(self, arg: str, options: dict) -> str:
        self.ch.exercises += 1
        title = self.inline(arg.strip())
        heading = f"### Exercise {self.ch.number}.{self.ch.exercises}" + (f": {title}" if title else "")
        return self.anchor(options) + heading

    # ---------------------------------------------------------------- blocks
    def convert(self, text: str, gated: list | None = None) -> list[tuple[str, str]]:
        """Convert MyST ``text`` into (mode, markdown) pieces. ``gated`` is the state shared across
        the cells of a notebook ([mode], mode "plain" or "solution"); None inside a directive."""
        lines = text.split("\n")
        pieces: list[tuple[str, str]] = []
        state = gated if gated is not None else ["plain"]
        pos = 0

        def emit(chunk: str, mode: str | None = None):
            pieces.append((mode or state[0], chunk))

        for token, span, roles in myst.blocks(text):
            if span is None:
                continue
            start, end = span
            if start > pos:
                emit("\n".join(lines[pos:start]))
            raw = "\n".join(lines[start:end])
            pos = end
            kind = token.type
            if kind == "myst_target":
                emit(f'<a id="{token.content.strip()}"></a>')
            elif kind in ("myst_line_comment", "myst_block_break"):
                continue
            elif directive := myst.directive_of(token):
                name, arg = directive
                if name in myst.GATED:
                    if gated is None:
                        self.fail(f"gated {{{name}}} inside another directive")
                    options, _ = myst.split_options(token.content)
                    if name == "solution-start":
                        if self.solution_has_code.pop(0):
                            emit("#### Solution (code)", "plain")
                        state[0] = "solution"
                    elif name == "solution-end":
                        state[0] = "plain"
                    elif name == "exercise-start":
                        emit(self.exercise_heading(arg, options), "plain")
                    continue
                emit(self.directive(name, arg, token.content))
            elif kind in ("math_block", "math_block_label"):
                label = token.info.strip() if kind == "math_block_label" else ""
                emit((f'<a id="{label}"></a>\n' if label else "") + f"$$\n{token.content.strip()}\n$$")
            elif kind in ("fence", "code_block", "amsmath", "html_block"):
                emit(raw)
            else:
                emit(self.inline(raw, roles))
        if pos < len(lines):
            emit("\n".join(lines[pos:]))
        return pieces

    def fragment(self, text: str) -> str:
        """The body of a directive, converted (no gated blocks inside)."""
        return "\n".join(chunk for _, chunk in self.convert(text, None))

    def markdown_cell(self, source: str, gated: list) -> str:
        parts: list[str] = []
        current_mode, current = None, []

        def flush():
            body = re.sub(r"\n{3,}", "\n\n", "\n".join(current)).strip("\n")
            if body.strip():
                parts.append(body if current_mode == "plain" else
                             f"<details><summary>Solution</summary>\n\n{body}\n\n</details>")

        for mode, chunk in self.convert(source, gated):
            if mode != current_mode:
                if current_mode is not None:
                    flush()
                current_mode, current = mode, []
            current.append(chunk)
        if current_mode is not None:
            flush()
        return "\n\n".join(parts)

    # ---------------------------------------------------------------- look-ahead of gated blocks
    def scan_gated(self) -> list[bool]:
        """For each gated solution of the chapter, in order: does it hold a code cell?"""
        has_code: list[bool] = []
        inside = False
        for cell in self.ch.nb.cells:
            if cell.cell_type == "code":
                if inside and nbt.BOOTSTRAP_TAG not in nbt.cell_tags(cell):
                    has_code[-1] = True
            elif cell.cell_type == "markdown":
                for token, _, _ in myst.blocks(nbt.cell_source(cell)):
                    name, _ = myst.directive_of(token) or (None, "")
                    if name == "solution-start":
                        inside = True
                        has_code.append(False)
                    elif name == "solution-end":
                        inside = False
        return has_code


# --------------------------------------------------------------------------- notebooks
def edition_path(chapter: Path) -> Path:
    """colab/NN_topic.ipynb for chapters/NN_topic.ipynb."""
    return EDITION_DIR / Path(chapter).name


def _drop_first_h1(text: str) -> str:
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if line.startswith("# "):
            del lines[i]
            return "\n".join(lines).strip("\n")
    return text


def top_cell(chapter: Chapter, title: str, config: dict) -> str:
    book = config.get("title", "the book")
    page = f"{nbt.html_baseurl(config)}{chapter.docname}.html"
    return "\n".join([
        f"# {chapter.number}. {title}",
        "",
        f"*{book}*: this notebook is the Colab edition of [chapter {chapter.number} of the book]({page}).",
        "",
        "Run the cells from the top. The first code cell installs the book's library, `transformer_lib`, "
        "from the book's repository (and does nothing outside Colab). The chapter runs with small CPU "
        "settings; on a GPU runtime (*Runtime → Change runtime type*) it takes its larger GPU settings.",
        "",
        f"Numbers in **bold** marked {BOOK_RUN_MARK} are from the book's run, stored "
        "with the book (CPU settings). When you run a cell that computes one, it prints your own run's "
        "value below the cell as `name = value`. The outputs shown under the cells are also the book's "
        "until you run them.",
    ])


def _colab_code_cell(cell, gated: list):
    """A code cell of the Colab edition: the test harness stays in the book's copy; solution code and the checks
    cells (``hide-input``) in form view."""
    new = copy.deepcopy(cell)
    new.source = nbt.reader_source(nbt.cell_source(cell))
    if gated[0] == "solution" or "solution" in nbt.cell_tags(cell):
        new.metadata["cellView"] = "form"
        new.source = f"{FORM_TITLE}\n{new.source}"
    else:
        nbt.fold_checks(new)
    return new


def convert_cells(chapter: Chapter, converter: "Converter", cells, code_cell) -> tuple[list, list]:
    """The cells of an edition after its title and set-up cells: the set-up cell and other ``remove-cell`` cells
    dropped, each code cell made by ``code_cell(cell, gated)``, each markdown cell converted to plain Markdown
    (the first level-one heading dropped). Shared by the Colab edition and the student edition.

    Returns:
        (the new cells, the gate state: ``['plain']`` unless a solution was left open).
    """
    import nbformat

    out, gated, dropped_h1 = [], ["plain"], False
    for index, cell in enumerate(cells):
        chapter.where = f"cell {index}"
        if cell.cell_type == "code":
            if nbt.is_bootstrap_cell(cell) or nbt.BOOTSTRAP_TAG in nbt.cell_tags(cell):
                continue  # the set-up cell is the edition's own template; other remove-cell cells are the book's
            out.append(code_cell(cell, gated))
            continue
        if cell.cell_type != "markdown":
            out.append(copy.deepcopy(cell))
            continue
        if nbt.BOOTSTRAP_TAG in nbt.cell_tags(cell):
            continue
        chapter.attachments = {}
        source = nbt.cell_source(cell)
        if not dropped_h1 and re.search(r"^# ", source, re.MULTILINE):
            source, dropped_h1 = _drop_first_h1(source), True
        text = converter.markdown_cell(source, gated)
        if not text.strip():
            continue
        new = nbformat.v4.new_markdown_cell(text, id=cell.get("id") or f"md-{index}")
        attachments = {**(cell.get("attachments") or {}), **chapter.attachments}
        if attachments:
            new["attachments"] = attachments
        out.append(new)
    return out, gated


def convert_chapter(path: Path, config: dict | None = None):
    """The Colab edition of one chapter notebook, as an nbformat node."""
    import nbformat

    config = nbt.load_config() if config is None else config
    nb = nbt.read_notebook(path)
    chapter = Chapter(path=Path(path), nb=nb, number=nbt.chapter_number(path),
                      docname=f"chapters/{Path(path).stem}", glued=nbt.glued_outputs(nb))
    converter = Converter(chapter, config)
    converter.solution_has_code = converter.scan_gated()
    title = nbt.chapter_title(nb)
    title_text = converter.inline(title) if title else Path(path).stem

    cells = [nbformat.v4.new_markdown_cell(top_cell(chapter, title_text, config), id="colab-title"),
             nbformat.v4.new_code_cell(nbt.bootstrap_source(nbt.repository_url(config)), id="colab-setup",
                                       metadata={"tags": [nbt.BOOTSTRAP_TAG]})]
    body, gated = convert_cells(chapter, converter, nb.cells, code_cell=_colab_code_cell)
    cells += body
    if gated[0] != "plain":
        raise ConversionError(f"{nbt.relative(path)}: a {{solution-start}} has no {{solution-end}}")

    edition = nbformat.v4.new_notebook(cells=cells)
    edition.metadata = copy.deepcopy(nb.metadata)
    edition.metadata["colab"] = {"provenance": [], "toc_visible": True}
    edition.metadata["accelerator"] = "GPU"
    nbformat.validate(edition)
    return edition


def render(nb) -> str:
    import nbformat

    return nbformat.writes(nb) + "\n"


def stale(files: dict) -> list:
    """The paths of ``files`` (path -> text, as :func:`build` returns) whose file is missing or differs."""
    return [p for p, text in files.items() if not p.is_file() or p.read_text(encoding="utf-8") != text]


def build(chapters: list[Path] | None = None, config: dict | None = None) -> dict[Path, str]:
    """Every edition file's path -> its text, for the chapters of `_toc.yml` that exist."""
    config = nbt.load_config() if config is None else config
    chapters = [p for p in (chapters or nbt.toc_chapters()) if Path(p).is_file()]
    return {edition_path(p): render(convert_chapter(p, config)) for p in chapters}


def write(files: dict[Path, str], prune: bool = True) -> list[Path]:
    """Write the edition; with ``prune``, remove colab/*.ipynb that no chapter produces. Returns
    the files whose content changed."""
    changed = []
    EDITION_DIR.mkdir(exist_ok=True)
    for path, text in files.items():
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            changed.append(path)
    if prune:
        for stale in sorted(EDITION_DIR.glob("*.ipynb")):
            if stale not in files:
                stale.unlink()
                changed.append(stale)
    return changed


def raw_myst(text: str) -> list[str]:
    """The raw MyST constructs left in a markdown text (code blocks and code spans excepted)."""
    stripped = re.sub(r"(?ms)^\s*(`{3,}|~{3,})(?!`*\s*\{)[^\n]*\n.*?^\s*\1\s*$", "", text)
    found = [f"role: {{{name}}}`{content}`" for _, _, name, content in _scan_roles(stripped)]
    for what, pattern in RAW_MYST.items():
        if what != "role":
            found += [f"{what}: {m.group(0).strip()!r}" for m in pattern.finditer(stripped)]
    return found
