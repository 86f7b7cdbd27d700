"""What the grader refuses: a static reading of the submitted code and the tripwires on the library's answers.

- :func:`static_findings` reads the submitted code (the graded function and every function, class and import of
  the notebook it uses) and reports calls of the library functions that answer the exercise, uses of the
  exercise's reference, and dynamic code (``exec``, ``importlib``, frame and closure introspection) that could
  hide such a call; :func:`function_findings` reads a function object the same way.
- :func:`install_tripwires` replaces those library functions (and the ``__init__`` of such classes) by functions
  that report the call and raise :class:`ForbiddenCall`, a ``BaseException`` the student's code does not catch by
  accident; the original objects stay unreachable from the replacement.

Used by the notebook self-check (:mod:`transformer_lib.exercises`) and by the grader (``booktools/grade.py``).
"""
from __future__ import annotations

import ast
import importlib
import inspect
import sys
import textwrap
import types
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Set, Tuple

__all__ = ["ForbiddenCall", "static_findings", "function_findings", "install_tripwires", "display_name",
           "resolve", "torch_reason", "TORCH_ALIASES"]


class ForbiddenCall(BaseException):
    """Raised by a tripwire: the student's code called a library function that answers the exercise."""


# ----------------------------------------------------------------------------------------------------------------
# What the submitted code uses: a static reading
# ----------------------------------------------------------------------------------------------------------------
#: Names whose use in graded code means dynamic code the grader cannot read.
DYNAMIC_NAMES = frozenset({"exec", "eval", "compile", "__import__", "importlib", "runpy", "ctypes", "breakpoint",
                           "__builtins__", "builtins"})
#: Attributes that reach into functions, frames or the interpreter (and so around a tripwire).
INTROSPECTION_ATTRS = frozenset({"__code__", "__closure__", "__globals__", "__wrapped__", "__builtins__",
                                 "cell_contents", "__subclasses__", "f_globals", "f_locals", "f_back", "_getframe",
                                 "get_referrers", "get_referents", "get_objects", "__loader__", "__spec__",
                                 "reload", "__func__"})
#: Modules of the grader, which hold the reference solutions.
GRADER_MODULES = frozenset({"exercise_references", "grade", "grade_sandbox", "exercisekit", "make_editions",
                            "booktools", "scripts"})
LIBRARY = "transformer_lib"


def display_name(qualname: str) -> str:
    """``transformer_lib.attention.causal_mask`` -> ``tl.attention.causal_mask``."""
    return "tl" + qualname[len(LIBRARY):] if qualname.startswith(LIBRARY) else qualname


def _chain(node) -> Optional[List[str]]:
    """``a.b.c`` -> ["a", "b", "c"]; ``getattr(a, "b")`` -> ["a", "b"]; None if the root is not a name."""
    parts: List[str] = []
    while True:
        if isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        elif isinstance(node, ast.Subscript):  # EXERCISES["id"].reference
            node = node.value
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr"
              and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)
              and isinstance(node.args[1].value, str)):
            parts.append(node.args[1].value)
            node = node.args[0]
        elif isinstance(node, ast.Name):
            parts.append(node.id)
            return parts[::-1]
        else:
            return None


def bound_names(stmt) -> List[str]:
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [stmt.name]
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return [(a.asname or a.name.split(".")[0]) for a in stmt.names if a.name != "*"]
    if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        return [t.id for t in targets if isinstance(t, ast.Name)]
    return []


#: Names the grader's prelude (and most notebooks) bind to torch modules.
TORCH_ALIASES = {"torch": "torch", "nn": "torch.nn", "F": "torch.nn.functional"}


def torch_reason(ex, qualname: str) -> Optional[str]:
    """Why the torch function ``qualname`` gets no credit in exercise ``ex`` (None: it is allowed)."""
    return dict(getattr(ex, "forbidden_torch", ()) or ()).get(qualname)


def torch_finding(shown: str, qualname: str, why: str) -> str:
    named = f"`{shown}`" if shown == qualname else f"`{shown}` ({qualname})"
    return f"it calls {named}, which {why}"


def static_findings(ex, statements: Sequence[ast.stmt], target: str, library_aliases: Iterable[str] = ("tl",),
                    extra_library_names: Iterable[str] = (),
                    torch_aliases: Optional[Dict[str, str]] = None) -> List[str]:
    """What the graded function ``target`` and the code it uses do that the grader does not credit.

    Args:
        ex: the exercise (its ``forbidden`` names).
        statements: the notebook's top-level statements in notebook order (the last binding of a name wins).
        target: the name of the graded function.
        library_aliases: names bound to ``transformer_lib`` before the notebook runs (the grader's prelude).
        extra_library_names: other names known to refer to the library (self-check: from the function's globals).
        torch_aliases: name -> the torch module or object it is bound to before the notebook runs (default
            :data:`TORCH_ALIASES`); the notebook's own imports of torch are added.

    Returns:
        A list with one sentence per finding, in the order found; empty when there is nothing to report.
    """
    forbidden_last = {q.rsplit(".", 1)[-1]: q for q in ex.forbidden}
    torch_forbidden = dict(getattr(ex, "forbidden_torch", ()) or ())
    torch_map: Dict[str, str] = dict(TORCH_ALIASES if torch_aliases is None else torch_aliases)
    bindings: Dict[str, ast.stmt] = {}
    aliases: Set[str] = set(library_aliases) | set(extra_library_names) | {LIBRARY}
    for stmt in statements:
        for name in bound_names(stmt):
            bindings[name] = stmt
    findings: List[str] = []

    def library_import(node) -> bool:
        if isinstance(node, ast.Import):
            return any(a.name.split(".")[0] == LIBRARY for a in node.names)
        return isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == LIBRARY

    def note_imports(tree) -> None:
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.split(".")[0] == "torch":
                        if a.asname:
                            torch_map[a.asname] = a.name
                        else:
                            torch_map["torch"] = "torch"
            elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "torch" and not node.level:
                for a in node.names:
                    torch_map[a.asname or a.name] = f"{node.module}.{a.name}"
            if library_import(node):
                for a in node.names:
                    if isinstance(node, ast.Import):
                        aliases.add(a.asname or a.name.split(".")[0])
                    else:
                        aliases.add(a.asname or a.name)

    for stmt in statements:  # module-level imports define the aliases of the library
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            note_imports(stmt)

    start = bindings.get(target)
    if start is None:
        return findings
    seen: Set[int] = set()
    todo = [start]
    while todo:
        stmt = todo.pop()
        if id(stmt) in seen:
            continue
        seen.add(id(stmt))
        note_imports(stmt)
        for node in ast.walk(stmt):
            if torch_forbidden and isinstance(node, (ast.Name, ast.Attribute)):
                chain = _chain(node) if isinstance(node, ast.Attribute) else [node.id]
                shadowed = chain and chain[0] in bindings and \
                    not isinstance(bindings[chain[0]], (ast.Import, ast.ImportFrom))  # the notebook's own name
                if chain and chain[0] in torch_map and not shadowed:
                    qualified = ".".join([torch_map[chain[0]]] + chain[1:])
                    if qualified in torch_forbidden:
                        findings.append(torch_finding(".".join(chain), qualified, torch_forbidden[qualified]))
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                if node.id in bindings:
                    todo.append(bindings[node.id])
                if node.id in DYNAMIC_NAMES:
                    findings.append(f"it uses `{node.id}`, and the grader does not accept dynamic code in graded "
                                    "functions (it could hide a call to the library)")
                if node.id == "EXERCISES":
                    findings.append("it uses the autograder's catalogue of exercises (its reference)")
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                modules = ([a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""])
                for module in modules:
                    parts = set(module.split("."))
                    if parts & GRADER_MODULES:
                        findings.append(f"it imports `{module}`, a module of the grader (the reference solutions)")
                    if parts & DYNAMIC_NAMES:
                        findings.append(f"it imports `{module}`, and the grader does not accept dynamic code in "
                                        "graded functions (it could hide a call to the library)")
                if library_import(node) and isinstance(node, ast.ImportFrom):
                    for a in node.names:
                        if a.name in forbidden_last:
                            findings.append(f"it imports `{display_name(forbidden_last[a.name])}` from the library, "
                                            "which answers this exercise")
            elif isinstance(node, (ast.Attribute, ast.Call)):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "vars" and \
                        node.args and (_chain(node.args[0]) or [""])[0] in aliases:
                    findings.append("it reads the library's variables with `vars`, and the grader does not accept "
                                    "it in graded functions")
                chain = _chain(node)
                if isinstance(node, ast.Attribute) and node.attr in INTROSPECTION_ATTRS:
                    findings.append(f"it uses `.{node.attr}`, and the grader does not accept introspection of "
                                    "functions or frames in graded functions (it could reach around the grader)")
                if not chain:
                    continue
                if chain[:2] == ["sys", "modules"]:
                    findings.append("it uses `sys.modules`, and the grader does not accept it in graded functions")
                if "reference" in chain and ({"exercises", "EXERCISES"} & set(chain) or chain[0] in aliases):
                    findings.append("it uses the exercise's reference solution")
                elif "EXERCISES" in chain[1:]:
                    findings.append("it uses the autograder's catalogue of exercises (its reference)")
                if chain[0] in aliases:
                    for part in chain[1:]:
                        if part in forbidden_last:
                            findings.append(f"it calls `{display_name(forbidden_last[part])}`, the library's own "
                                            "answer to this exercise")
                            break
                        if part == "__dict__":
                            findings.append("it reads the library's `__dict__`, and the grader does not accept it "
                                            "in graded functions")
                    if chain[-1].startswith("_") and chain[-1].endswith("_ref"):
                        findings.append("it uses the exercise's reference solution")
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in forbidden_last:
                findings.append(f"it names `{node.value}`, the library's function for this exercise, in a string")
    return list(dict.fromkeys(findings))


def _code_names(code: types.CodeType) -> Set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _code_names(const)
    return names


def function_findings(ex, fn: Callable) -> List[str]:
    """:func:`static_findings` for a live function (the notebook self-check): its source, and the library
    objects that the global names it uses refer to."""
    forbidden = {}
    for qualname in ex.forbidden:
        try:
            forbidden[id(resolve(qualname))] = qualname
        except (ImportError, AttributeError):
            continue
    findings: List[str] = []
    if id(fn) in forbidden:
        return [f"it is `{display_name(forbidden[id(fn)])}` itself, the library's own answer to this exercise"]
    held = list(getattr(fn, "__defaults__", None) or ()) + list((getattr(fn, "__kwdefaults__", None) or {}).values())
    for cell in getattr(fn, "__closure__", None) or ():
        try:
            held.append(cell.cell_contents)
        except ValueError:  # an empty cell
            continue
    held += [getattr(fn, "func", None)]  # functools.partial
    for value in held:
        if id(value) in forbidden:
            findings.append(f"it calls `{display_name(forbidden[id(value)])}`, the library's own answer to this "
                            "exercise")
    torch_objects = {}
    for qualname, why in getattr(ex, "forbidden_torch", ()) or ():
        try:
            torch_objects[id(resolve(qualname))] = (qualname, why)
        except (ImportError, AttributeError):
            continue
    library_names: Set[str] = set()
    torch_names: Dict[str, str] = {}
    code = getattr(fn, "__code__", None)
    fn_globals = getattr(fn, "__globals__", {}) or {}
    for value in held:
        if id(value) in torch_objects:
            findings.append(torch_finding(*torch_objects[id(value)][:1], *torch_objects[id(value)]))
    if code is not None:
        for name in sorted(_code_names(code)):
            if name not in fn_globals:
                continue
            value = fn_globals[name]
            if id(value) in torch_objects:
                qualname, why = torch_objects[id(value)]
                findings.append(torch_finding(name, qualname, why))
            if isinstance(value, types.ModuleType) and value.__name__.split(".")[0] == "torch":
                torch_names[name] = value.__name__
            if id(value) in forbidden and name != getattr(fn, "__name__", None):
                findings.append(f"it calls `{display_name(forbidden[id(value)])}` (as `{name}`), the library's own "
                                "answer to this exercise")
            if isinstance(value, types.ModuleType) and value.__name__.split(".")[0] == LIBRARY:
                library_names.add(name)
    try:
        source = textwrap.dedent(inspect.getsource(fn))
        tree = ast.parse(source)
    except (OSError, TypeError, SyntaxError, IndentationError):
        return findings
    target = getattr(fn, "__name__", "")
    statements = list(tree.body)
    if statements and target not in bound_names(statements[0]):  # a lambda: bind it to its name
        target = bound_names(statements[0])[0] if bound_names(statements[0]) else target
    findings += static_findings(ex, statements, target, ("tl",), library_names, torch_names)
    return list(dict.fromkeys(findings))


# ----------------------------------------------------------------------------------------------------------------
# Tripwires: the library's answers refuse to run
# ----------------------------------------------------------------------------------------------------------------
def resolve(qualname: str):
    """The object named ``package.module.Name``."""
    module, _, name = qualname.rpartition(".")
    return getattr(importlib.import_module(module), name)


def _tripwire(name: str, on_call: Callable[[str], None], method: bool = False):
    message = (f"{name} does this exercise for you: write the function yourself (the grader gives no credit for "
               "calling it)")

    def tripwire(*args, **kwargs):
        on_call(name)
        raise ForbiddenCall(message)

    tripwire.__name__ = "__init__" if method else name.rsplit(".", 1)[-1]
    tripwire.__qualname__ = tripwire.__name__
    tripwire.__doc__ = f"Disabled while grading: {message}."
    return tripwire


def install_tripwires(qualnames: Iterable[str], on_call: Callable[[str], None],
                      keep_originals: bool = True) -> Callable[[], None]:
    """Replace the library objects ``qualnames`` by tripwires; return a function that restores them.

    A function is replaced in every loaded module of the library that holds it (``tl.causal_mask`` and
    ``tl.attention.causal_mask`` alike); a class keeps its identity and its ``__init__`` becomes the tripwire.
    ``on_call(display name)`` runs before :class:`ForbiddenCall` is raised. With ``keep_originals=False`` (the
    grader's student process) nothing keeps the original objects, and the returned function does nothing.
    """
    undo: List[Tuple[Any, str, Any]] = []
    for qualname in qualnames:
        try:
            obj = resolve(qualname)
        except (ImportError, AttributeError):
            continue
        name = display_name(qualname)
        if qualname.split(".")[0] == "torch" and not isinstance(obj, type):  # a torch function: on its module
            owner = importlib.import_module(qualname.rpartition(".")[0])
            undo.append((owner, qualname.rpartition(".")[2], obj))
            setattr(owner, qualname.rpartition(".")[2], _tripwire(name, on_call))
            del obj
            continue
        if isinstance(obj, type):
            undo.append((obj, "__init__", obj.__dict__.get("__init__")))
            setattr(obj, "__init__", _tripwire(name, on_call, method=True))
            continue
        wire = _tripwire(name, on_call)
        for mod_name, module in list(sys.modules.items()):
            if module is None or not (mod_name == LIBRARY or mod_name.startswith(LIBRARY + ".")):
                continue
            for attr, value in list(vars(module).items()):
                if value is obj:
                    undo.append((module, attr, obj))
                    setattr(module, attr, wire)
        del obj
    if not keep_originals:
        undo.clear()
        return lambda: None

    def restore() -> None:
        for owner, attr, value in reversed(undo):
            if value is None:
                try:
                    delattr(owner, attr)
                except AttributeError:
                    pass
            else:
                setattr(owner, attr, value)
        undo.clear()

    return restore
