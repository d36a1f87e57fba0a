"""The module graph of crates/smb-server has no cycle through the handlers or the pipeline.

Layers: utilities and state modules -> request (what a handler sees) -> handlers ->
commands (the command table) -> pipeline -> reader/listener (transport). An edge back up
(a state module calling a handler, a handler reaching into the pipeline) shows up here as a
cycle. Modules are the top-level ones of src/ (handlers/* count as `handlers`); an edge is
any `crate::x` path (in `use` lines or inline) in a module's files, comments excluded.
"""

from __future__ import annotations

import re
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "crates" / "smb-server" / "src"
# The modules no cycle may pass through.
GUARDED = ("handlers", "pipeline", "commands", "request")


def module_of(path: Path, src: Path) -> str:
    rel = path.relative_to(src)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def use_targets(text: str) -> set[str]:
    """Top-level modules named by `crate::x` paths and `use crate::{x, y::z}` groups."""
    found = set(re.findall(r"\bcrate::([a-z_][a-z0-9_]*)", text))
    for group in re.findall(r"\bcrate::\{([^}]*)\}", text, flags=re.S):
        found.update(re.findall(r"(?:^|,)\s*([a-z_][a-z0-9_]*)", group))
    # `super::x` inside a module's own directory stays inside the module.
    return found


def graph(src: Path | None = None) -> dict[str, set[str]]:
    src = src or SRC
    g: dict[str, set[str]] = {}
    for f in sorted(src.rglob("*.rs")):
        m = module_of(f, src)
        if m == "lib":
            continue
        deps = use_targets(strip_comments(f.read_text()))
        g.setdefault(m, set()).update(d for d in deps if d != m)
    for deps in list(g.values()):
        for d in deps:
            g.setdefault(d, set())
    return g


def cycle_through(g: dict[str, set[str]], start: str) -> list[str] | None:
    """A shortest path start -> ... -> start, if any (breadth-first)."""
    prev: dict[str, str] = {}
    queue = [start]
    seen = {start}
    while queue:
        node = queue.pop(0)
        for nxt in sorted(g.get(node, ())):
            if nxt == start:
                path = [node]
                while path[-1] != start:
                    path.append(prev[path[-1]])
                return [start] + path[::-1][1:] + [start]
            if nxt not in seen:
                seen.add(nxt)
                prev[nxt] = node
                queue.append(nxt)
    return None


def strongly_connected(g: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's components of more than one module (for the report below)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(g[v]):
            if w not in index:
                visit(w)
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
            visit(v)
    return out


def test_parser_sees_use_groups_and_inline_paths():
    text = "use crate::{a, b::C};\nfn f() { crate::c::d(); } // crate::e\n"
    assert use_targets(strip_comments(text)) == {"a", "b", "c"}


def test_cycle_finder_reports_the_path():
    assert cycle_through({"x": {"y"}, "y": {"z"}, "z": {"x"}}, "x") == ["x", "y", "z", "x"]
    assert cycle_through({"x": {"y"}, "y": set()}, "x") is None


def test_no_cycle_through_handlers_or_pipeline():
    g = graph()
    assert "handlers" in g and "pipeline" in g, sorted(g)
    cycles = {m: c for m in GUARDED if m in g and (c := cycle_through(g, m))}
    if cycles:
        left = strongly_connected(g)
        msg = "\n".join(" -> ".join(c) for c in cycles.values())
        raise AssertionError(f"module cycles:\n{msg}\nstrongly connected groups: {left}")


if __name__ == "__main__":
    gr = graph()
    for mod in sorted(gr):
        print(f"{mod} -> {', '.join(sorted(gr[mod])) or '-'}")
    print("cycles left:", strongly_connected(gr))
