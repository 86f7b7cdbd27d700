"""Sphinx directive ``api-modules``: one API section per ``transformer_lib`` module.

Used by ``api.md`` so that adding a library module to the API reference is one line::

    ```{eval-rst}
    .. api-modules::

       attention
       multihead
    ```

Each line names a module of ``transformer_lib``; the directive makes a section titled
``transformer_lib.<name>`` that holds ``.. automodule:: transformer_lib.<name>`` (members,
as configured by ``autodoc_default_options`` in ``_config.yml``). A package's section documents only what its
``__init__`` defines itself: the names it imports from its modules are documented there.
"""

from __future__ import annotations

import importlib.util
import re

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.util.docutils import SphinxDirective

PACKAGE = "transformer_lib"

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


class ApiModules(SphinxDirective):
    """Expand each content line ``name`` into a section documenting ``transformer_lib.name``."""

    has_content = True

    def run(self) -> list[nodes.Node]:
        sections: list[nodes.Node] = []
        source, _ = self.get_source_info()
        for offset, line in enumerate(self.content):
            name = line.strip()
            if not name or name.startswith("#"):
                continue
            module = f"{PACKAGE}.{name}"
            section_id = nodes.make_id(f"api-{name}")
            section = nodes.section(ids=[section_id], names=[nodes.fully_normalize_name(module)])
            section += nodes.title(module, "", nodes.literal(module, module))
            lines = [f".. automodule:: {module}"]
            if importlib.util.find_spec(module).submodule_search_locations is not None:
                # A package: its __init__ imports its modules' names (its __all__); they are documented in their
                # own modules' sections, so the package's section shows only what __init__ itself defines.
                lines.append("   :ignore-module-all:")
            body = StringList(lines, source=source, items=[(source, self.content_offset + offset)] * len(lines))
            self.state.nested_parse(body, self.content_offset + offset, section)
            self.state.document.note_implicit_target(section, section)
            sections.append(section)
        return sections


def setup(app):
    app.add_directive("api-modules", ApiModules)
    app.connect("autodoc-process-docstring", escape_absolute_value_bars)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "1.0"}
