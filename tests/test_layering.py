"""The import rules of docs/architecture.md ("Layering"), checked on the source (issue 11, item 8):

- ``control_tables`` imports no other package of the project;
- ``synopses`` imports only ``control_tables``;
- ``scheduler`` imports no ``dsms`` (nor ``web``): it sees operators through their control tables and
  ``SchedOperator``;
- the ``dsms`` core imports no ``web`` (``dsms/cli.py``, the command line on top of everything, reaches the
  server through ``web.server.serve`` alone);
- no two modules import each other, directly or through others (imports under ``TYPE_CHECKING`` are type
  hints, not imports, and do not count; a package's ``__init__`` re-exporting its modules is not an edge
  back from them).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("control_tables", "synopses", "scheduler", "dsms", "web")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def all_modules() -> dict[str, Path]:
    return {module_name(p): p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))}


def _type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or \
        (isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


def imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The project modules ``name`` imports (anywhere in it, lazily too, but not for type checking only)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    is_pkg = path.name == "__init__.py"
    out: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            for a in node.names:
                out.add(a.name)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                pkg = name.split(".") if is_pkg else name.split(".")[:-1]
                pkg = pkg[: len(pkg) - node.level + 1]
                base = ".".join([*pkg, base] if base else pkg)
            for a in node.names:
                sub = f"{base}.{a.name}"
                out.add(sub if sub in modules else base)
        for child in ast.iter_child_nodes(node):
            visit(child)
    visit(tree)
    return {m for m in out if m.split(".")[0] in PACKAGES and m != name}


def graph() -> dict[str, set[str]]:
    modules = all_modules()
    return {name: {m for m in imports(name, path, modules) if m in modules} for name, path in modules.items()}


def top(m: str) -> str:
    return m.split(".")[0]


def violations(g: dict[str, set[str]]) -> list[str]:
    allowed = {"control_tables": set(), "synopses": {"control_tables"},
               "scheduler": {"control_tables", "synopses"}}
    bad = []
    for m, deps in sorted(g.items()):
        for d in sorted(deps):
            if top(m) in allowed and top(d) != top(m) and top(d) not in allowed[top(m)]:
                bad.append(f"{m} imports {d}")
            if top(m) == "dsms" and top(d) == "web" and m != "dsms.cli":
                bad.append(f"{m} imports {d} (the core never imports web/)")
    return bad


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), an import edge from a package's
    ``__init__`` to its own modules left out (it re-exports them; the modules do not go through it)."""
    def edges(m: str) -> set[str]:
        return {d for d in g.get(m, ()) if not d.startswith(m + ".")}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges(v):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))
    for v in sorted(g):
        if v not in index:
            strong(v)
    return out


def test_the_checker_sees_what_it_should():
    g = {"control_tables.a": {"dsms.engine"}, "synopses.b": {"control_tables.a", "scheduler.c"},
         "scheduler.c": {"dsms.x"}, "dsms.x": {"web.y"}, "dsms.cli": {"web.y"}, "web.y": {"dsms.x"},
         "dsms.p": {"dsms.p.q"}, "dsms.p.q": {"dsms.p"}}
    assert violations(g) == ["control_tables.a imports dsms.engine", "dsms.x imports web.y (the core never "
                             "imports web/)", "scheduler.c imports dsms.x", "synopses.b imports scheduler.c"]
    assert cycles(g) == [["dsms.x", "web.y"]]
    modules = all_modules()
    assert "dsms.runtime.runtime" in modules and "dsms.runtime" in modules
    assert "dsms.runtime.pump" in imports("dsms.runtime.runtime", modules["dsms.runtime.runtime"], modules)


def test_imports_point_down():
    assert violations(graph()) == []


def test_no_import_cycles():
    assert cycles(graph()) == []
