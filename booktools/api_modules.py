"""The API reference: one page per module of ``transformer_lib``, made by ``sphinx.ext.autosummary``.

``api.md`` holds, after its introduction::

    ```{eval-rst}
    .. package-modules:: transformer_lib
       :toctree: api
       :recursive:
    ```

``package-modules`` is autosummary's table (each module's name and the first sentence of its docstring) whose
entries are the package's public modules and subpackages, found by walking the package (``pkgutil``; a name that
starts with ``_`` is private): no list of modules is kept by hand. It takes autosummary's options. With
``:toctree:``, before the sources are read (``builder-inited``), autosummary's generator writes a page for each
entry into that folder (``api/``, git-ignored) from the template ``_templates/autosummary/module.rst``; a package's
page holds a ``package-modules`` table of its own modules, whose pages are generated in turn. A page of the folder
that no table leads to any more (its module was removed or renamed) is deleted.

What autosummary alone would not do here:

- Its generator finds entries only in ``.. autosummary::`` directives: ``generate_module_pages`` hands it the
  entries of each table.
- A module's summary is read in the module's own namespace (as in its page), so that ``:func:`fit``` in the summary
  of ``transformer_lib.training.loop`` resolves in the table of ``transformer_lib.training``.
- The generated pages are the table's toctree, as with autosummary. sphinx-external-toc warns of any toctree
  in a page, since ``_toc.yml`` is meant to make them all; the table's toctree is added after that check
  (``TableToctree``), and the folder stays part of the book although ``_toc.yml`` does not list it
  (``only_build_toc_files`` would exclude the pages an earlier build left there). In the navigation a module is
  listed by its short name, under its package.
- The reference used to be one page, so links such as ``api.html#transformer_lib.attention.attention_reference``
  (the Colab edition's) are sent on to the object on its module's page by a small script on the table's page.

``escape_absolute_value_bars`` (``autodoc-process-docstring``): ``|i - j|`` in a docstring is an absolute value, not
a reStructuredText substitution reference.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
import posixpath
import re
import tempfile
from pathlib import Path

from docutils import nodes
from docutils.statemachine import StringList
from sphinx import addnodes
from sphinx.ext.autosummary import Autosummary, autosummary_table, autosummary_toc, get_rst_suffix
from sphinx.ext.autosummary.generate import generate_autosummary_docs
from sphinx.transforms import SphinxTransform
from sphinx.util import logging

logger = logging.getLogger(__name__)

DIRECTIVE = "package-modules"
DIRECTIVE_LINE = re.compile(rf"^(?P<indent>\s*)\.\.\s+{DIRECTIVE}::\s*(?P<package>\S+)\s*$")
OPTION_LINE = re.compile(r"^\s+:(?P<name>[\w-]+):\s*(?P<value>.*?)\s*$")

# |x| outside ``literals``: not preceded by a backslash or backquote, not a |name|_ link.
BARS = re.compile(r"(?<![\\`|])\|(?=\S)([^|`\n]*?\S)\|(?![`|_])")


def escape_absolute_value_bars(app, what, name, obj, options, lines):
    """autodoc-process-docstring: render ``|i - j|`` literally instead of as a substitution."""
    for number, line in enumerate(lines):
        if "|" not in line or line.lstrip().startswith(("+", "|")):  # leave tables alone
            continue
        parts = line.split("``")
        for i in range(0, len(parts), 2):  # even parts lie outside ``literals``
            parts[i] = BARS.sub(r"\\|\1\\|", parts[i])
        lines[number] = "``".join(parts)


def public_modules(package: str) -> list[str]:
    """The full names of ``package``'s public modules and subpackages, in alphabetical order."""
    path = importlib.import_module(package).__path__
    return [f"{package}.{info.name}" for info in pkgutil.iter_modules(path) if not info.name.startswith("_")]


# ----------------------------------------------------------------------------------------------- the table
class table_toctree(nodes.General, nodes.Element):
    """Where a ``package-modules`` table's toctree goes (``TableToctree``); the toctree is its ``toctree``."""


class TableToctree(SphinxTransform):
    """Put each ``package-modules`` table's toctree in its place, after sphinx-external-toc's check (priority 100)."""

    default_priority = 110

    def apply(self, **kwargs):
        for marker in list(self.document.findall(table_toctree)):
            marker.replace_self(marker["toctree"])


class PackageModules(Autosummary):
    """``.. package-modules:: PACKAGE`` with autosummary's options: the table of PACKAGE's public modules."""

    required_arguments = 1
    has_content = False

    def run(self):
        source, line = self.get_source_info()
        current = self.env.ref_context.get("py:module")  # a package's page: its modules by their short names
        names = [name.removeprefix(f"{current}.") if current and name.startswith(f"{current}.") else f"~{name}"
                 for name in public_modules(self.arguments[0])]  # ~: the table shows the short name
        self.content = StringList(names, items=[(source, line)] * len(names))
        self.env.metadata[self.env.docname][DIRECTIVE] = self.arguments[0]
        result = super().run()
        for table in result:
            if isinstance(table, autosummary_table):
                for row in table.findall(nodes.row):
                    module, *summary = [*row.findall(addnodes.pending_xref)] or [None]
                    for reference in summary:  # resolved as in the module's own docstring
                        reference["py:module"], reference["py:class"] = module["reftarget"], None
        for node in result:
            for toctree in node.findall(addnodes.toctree) if isinstance(node, autosummary_toc) else ():
                # the navigation nests a module under its package: its short name is enough there
                toctree["entries"] = [(title or name.rpartition(".")[2], name) for title, name in toctree["entries"]]
        return [table_toctree(toctree=node) if isinstance(node, autosummary_toc) else node for node in result]


# ----------------------------------------------------------------------------------------------- its pages
def tables_in(path: Path) -> list[tuple[str, dict[str, str]]]:
    """(package, options) of each ``package-modules`` directive in the source file ``path``."""
    text = path.read_text(encoding="utf-8") if path.is_file() else ""
    lines = text.splitlines() if DIRECTIVE in text else []
    found: list[tuple[str, dict[str, str]]] = []
    for number, line in enumerate(lines):
        match = DIRECTIVE_LINE.match(line)
        if not match:
            continue
        options: dict[str, str] = {}
        for option in lines[number + 1:]:
            parsed = OPTION_LINE.match(option)
            if not parsed or not option.startswith(match["indent"] + " "):
                break
            options[parsed["name"]] = parsed["value"]
        found.append((match["package"], options))
    return found


def _generate(app, path: Path, package: str, options: dict[str, str]) -> list[Path]:
    """Autosummary's generator on the table of ``package`` in ``path``, written out as the ``.. autosummary::``
    directive it stands for (the ``:toctree:`` folder made absolute: it is relative to ``path``); the pages."""
    listing = [".. autosummary::", f"   :toctree: {(path.parent / options['toctree']).resolve()}"]
    listing += [f"   :{name}: {value}".rstrip() for name, value in options.items() if name != "toctree"]
    listing += [""] + [f"   {name}" for name in public_modules(package)]
    with tempfile.TemporaryDirectory(prefix=f"{DIRECTIVE}-") as tmp:
        source = Path(tmp, f"{DIRECTIVE}.rst")
        source.write_text("\n".join(listing) + "\n", encoding="utf-8")
        pages = generate_autosummary_docs(
            [str(source)], suffix=get_rst_suffix(app), app=app, overwrite=app.config.autosummary_generate_overwrite,
            imported_members=app.config.autosummary_imported_members, encoding=app.config.source_encoding)
    return [Path(page).resolve() for page in pages]


def generate_module_pages(app) -> None:
    """builder-inited, before autosummary's own generation: write the pages of every ``package-modules`` table
    with ``:toctree:``, then those of the tables on the pages written, and so on."""
    tables = {}
    for docname in sorted(app.env.found_docs):
        path = Path(app.env.doc2path(docname)).resolve()
        tables[path] = [(package, options) for package, options in tables_in(path) if "toctree" in options]
    folders = {(path.parent / options["toctree"]).resolve(): package.partition(".")[0]
               for path, found in tables.items() for package, options in found}

    def generated(page: Path) -> bool:  # a page is named after its module
        return page.parent in folders and page.name.startswith(f"{folders[page.parent]}.")

    todo = [path for path, found in tables.items() if found and not generated(path)]
    written: set[Path] = set()
    while todo:
        path = todo.pop(0)
        for package, options in tables_in(path):
            if "toctree" not in options:
                continue
            for page in _generate(app, path, package, options):
                if page not in written:
                    written.add(page)
                    todo.append(page)
    for folder, package in folders.items():
        for page in folder.glob(f"{package}.*{get_rst_suffix(app)}"):
            if page.resolve() not in written:
                logger.info("[%s] removing %s: no table leads to it", DIRECTIVE, page)
                page.unlink()


def keep_generated_pages(app, config) -> None:
    """config-inited, after sphinx-external-toc (priority 900): with ``only_build_toc_files`` it excludes every source
    file that ``_toc.yml`` does not list, the pages generated by an earlier build included; they stay in the book."""
    site_map = getattr(config, "external_site_map", None)
    if not config.external_toc_exclude_missing or site_map is None:
        return
    folders = set()
    for docname in site_map:
        for suffix in ("", *config.source_suffix):
            folders.update(posixpath.normpath(posixpath.join(posixpath.dirname(docname), options["toctree"]))
                           for _, options in tables_in(Path(app.srcdir, docname + suffix))
                           if "toctree" in options)
    config.exclude_patterns = [pattern for pattern in config.exclude_patterns
                               if not any(pattern.startswith(f"{folder}/") for folder in folders)]


def redirect_old_anchors(app, pagename, templatename, context, doctree) -> None:
    """html-page-context: on a page with a ``package-modules`` table that documents no module itself (``api.md``,
    once the one-page reference), a link to an object of the package (a module's name, ``module-<name>``, an object
    ``<module>.<name>``) or to a section ``api-<module>`` of the one-page reference goes on to its module's page."""
    package = app.env.metadata.get(pagename, {}).get(DIRECTIVE)
    modules = app.env.get_domain("py").modules
    if not package or doctree is None or any(module.docname == pagename for module in modules.values()):
        return
    pages, sections = {}, {}
    for name, module in modules.items():
        if name.startswith(package + "."):
            pages[name] = app.builder.get_relative_uri(pagename, module.docname)
            sections[f"api-{name.removeprefix(package + '.').replace('.', '-')}"] = name
    script = f"""document.addEventListener("DOMContentLoaded", function () {{
  const pages = {json.dumps(pages, sort_keys=True)};
  const sections = {json.dumps(sections, sort_keys=True)};
  const anchor = decodeURIComponent(window.location.hash.slice(1));
  if (!anchor || document.getElementById(anchor)) return;
  const target = sections[anchor] || anchor.replace(/^module-/, "");
  for (let name = target; name; name = name.slice(0, Math.max(name.lastIndexOf("."), 0))) {{
    if (pages[name]) {{
      window.location.replace(pages[name] + "#" + (name === target ? "module-" + name : target));
      return;
    }}
  }}
}});"""
    app.add_js_file(None, body=script, priority=100)


def setup(app):
    app.setup_extension("sphinx.ext.autosummary")
    app.add_node(table_toctree)
    app.add_directive(DIRECTIVE, PackageModules)
    app.add_transform(TableToctree)
    app.connect("autodoc-process-docstring", escape_absolute_value_bars)
    app.connect("config-inited", keep_generated_pages, priority=950)
    app.connect("builder-inited", generate_module_pages, priority=400)
    app.connect("html-page-context", redirect_old_anchors)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "2.0"}
