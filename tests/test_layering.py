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



# --- Function length --------------------------------------------------------------------
# No non-test function in crates/*/src runs past this many lines (its `fn` line to its
# closing brace): a longer one is split into named steps.
MAX_FN_LINES = 90
CRATES = Path(__file__).resolve().parent.parent / "crates"


def blank_literals(text: str) -> str:
    """Comments, strings and char literals replaced by spaces (newlines kept), so that
    braces inside them do not count and line numbers stay put."""

    def blank(m: re.Match) -> str:
        return re.sub(r"[^\n]", " ", m.group(0))

    pattern = re.compile(
        r'//[^\n]*|/\*.*?\*/|b?r(#*)".*?"\1|b?"(?:\\.|[^"\\])*"'
        r"|b?'(?:\\.|[^'\\\n])'",
        flags=re.S,
    )
    return pattern.sub(blank, text)


def block_end(text: str, open_at: int) -> int:
    """The offset of the brace closing the one at `open_at`."""
    depth = 0
    for i in range(open_at, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return i
    return len(text) - 1


def cfg_test_files(path: Path, text: str) -> set[Path]:
    """Files of `#[cfg(test)] mod x;` declarations in this file."""
    base = path.parent if path.stem in ("lib", "main", "mod") else path.parent / path.stem
    out = set()
    for name in re.findall(r"#\[cfg\(test\)\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;", text):
        out |= {base / f"{name}.rs", base / name / "mod.rs"}
    return out


def long_functions(root: Path | None = None, limit: int = MAX_FN_LINES) -> list[str]:
    """`file:line name (n lines)` for every non-test function longer than `limit` lines."""
    root = root or CRATES
    files = sorted(root.glob("*/src/**/*.rs"))
    skipped: set[Path] = set()
    texts = {}
    for f in files:
        texts[f] = blank_literals(f.read_text())
        skipped |= cfg_test_files(f, texts[f])
    found = []
    for f in files:
        if f in skipped or "tests" in f.relative_to(root).parts[2:-1]:
            continue
        text = texts[f]
        # Inline `#[cfg(test)] mod x { ... }` blocks are blanked out.
        for m in re.finditer(r"#\[cfg\(test\)\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+\w+\s*\{", text):
            end = block_end(text, m.end() - 1)
            hidden = re.sub(r"[^\n]", " ", text[m.start() : end + 1])
            text = text[: m.start()] + hidden + text[end + 1 :]
        for m in re.finditer(r"\bfn\s+(\w+)", text):
            body = re.compile(r"[{;]").search(text, m.end())
            if body is None or body.group(0) == ";":
                continue
            end = block_end(text, body.start())
            first = text.count("\n", 0, m.start()) + 1
            last = text.count("\n", 0, end) + 1
            if last - first + 1 > limit:
                rel = f.relative_to(root)
                found.append(f"{rel}:{first} {m.group(1)} ({last - first + 1} lines)")
    return found


def test_length_scan_measures_from_fn_to_its_brace():
    src = "fn a() {\n    let s = \"}\";\n    if x { '{' }\n}\n" + "fn b();\n"
    assert blank_literals(src).count("{") == 2
    text = blank_literals(src)
    assert block_end(text, text.index("{")) == text.rindex("}")


def test_no_function_over_the_length_limit(tmp_path):
    # The scan itself: a 3-line limit catches a 4-line function and skips a test module.
    crate = tmp_path / "c" / "src"
    crate.mkdir(parents=True)
    (crate / "lib.rs").write_text(
        "fn long() {\n    a();\n    b();\n}\n#[cfg(test)]\nmod tests {\n"
        "    fn t() {\n        a();\n        b();\n    }\n}\n"
    )
    assert long_functions(tmp_path, limit=3) == ["c/src/lib.rs:1 long (4 lines)"]
    found = long_functions()
    assert not found, "functions over %d lines:\n%s" % (MAX_FN_LINES, "\n".join(found))


if __name__ == "__main__":
    gr = graph()
    for mod in sorted(gr):
        print(f"{mod} -> {', '.join(sorted(gr[mod])) or '-'}")
    print("cycles left:", strongly_connected(gr))
    for line in long_functions(limit=80):
        print(line)
