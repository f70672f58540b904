"""memcli's layers hold: a folder or top-level module imports only those of its own layer or below
(docs/architecture.md draws them), and no module imports itself back through others."""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import REPO

# lowest first; a room is a folder (``store/``) or a top-level module (``config``)
LAYERS = [
    ("base", {"errors", "results", "where", "regular", "paths", "trust", "config", "config_files", "store_state",
              "tokens", "terms", "clauses", "dates", "joblock", "deadline", "cpu", "skill", "parsing", "__init__"}),
    ("storage", {"store/", "cache"}),
    ("indexing", {"semantic/", "qa/", "tagging/", "partitions", "index", "session_table", "read_tools"}),
    ("models", {"llm/"}),
    ("pipelines", {"ingest/", "retrieve/", "consolidate/", "kv/", "forget", "forget_caches", "share/"}),
    ("application", {"memory", "asking", "reports", "chat", "doctor", "wiring", "eval/"}),
    ("faces", {"cli/", "mcp_server", "mcp_start", "hooks", "hook_start", "registrations", "session_start", "prompt_recall",
               "__main__"}),
]
LEVEL = {room: level for level, (_, rooms) in enumerate(LAYERS) for room in rooms}


def modules(root: Path) -> dict[str, Path]:
    return {".".join(p.relative_to(root.parent).with_suffix("").parts).removesuffix(".__init__"): p
            for p in root.rglob("*.py")}


def room_of(module: str, names: set[str]) -> str:
    parts = module.split(".")
    if len(parts) == 1:
        return "__init__"
    return f"{parts[1]}/" if any(n.startswith(f"memcli.{parts[1]}.") for n in names) else parts[1]


def imports(path: Path, known: set[str]) -> set[str]:
    """Every memcli module ``path`` imports, at its top or inside a function."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("memcli"):
            inner = {f"{node.module}.{a.name}" for a in node.names} & known
            out |= inner
            if node.module in known and len(inner) < len(node.names):
                out.add(node.module)
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names} & known
    return out


def upward(graph: dict[str, set[str]]) -> list[str]:
    names = set(graph)
    found = []
    for name, targets in graph.items():
        if name == "memcli":
            continue  # the package's front door: the version, and Memory handed out on first use
        source = room_of(name, names)
        for target in targets:
            goes = room_of(target, names)
            if LEVEL[goes] > LEVEL[source]:
                found.append(f"{name} ({LAYERS[LEVEL[source]][0]}) imports {target} ({LAYERS[LEVEL[goes]][0]})")
    return sorted(found)


def graph_of(root: Path) -> dict[str, set[str]]:
    found = modules(root)
    return {name: imports(path, set(found)) for name, path in found.items()}


def test_every_room_has_a_layer():
    names = set(modules(REPO / "memcli"))
    assert {room_of(n, names) for n in names} <= set(LEVEL), {room_of(n, names) for n in names} - set(LEVEL)


def test_no_layer_imports_a_higher_one():
    assert upward(graph_of(REPO / "memcli")) == []


def test_the_layer_check_catches_an_upward_import():
    graph = graph_of(REPO / "memcli")
    graph["memcli.semantic.vectors"] = {*graph["memcli.semantic.vectors"], "memcli.retrieve.evidence"}
    graph["memcli.llm.profile"] = {*graph["memcli.llm.profile"], "memcli.retrieve.ask"}
    assert upward(graph) == ["memcli.llm.profile (models) imports memcli.retrieve.ask (pipelines)",
                             "memcli.semantic.vectors (indexing) imports memcli.retrieve.evidence (pipelines)"]


def test_no_import_cycle_among_memcli_modules():
    graph = graph_of(REPO / "memcli")
    done: set[str] = set()

    def visit(name: str, path: list[str]) -> None:
        if name in path:
            raise AssertionError("import cycle: " + " -> ".join([*path[path.index(name):], name]))
        if name in done:
            return
        for target in sorted(graph[name]):
            visit(target, [*path, name])
        done.add(name)

    for name in sorted(graph):
        visit(name, [])


MODULE_LINES, MEMORY_LINES, FUNCTION_LINES = 600, 500, 80  # the house's limits (issues 43 and 114)


def test_modules_and_functions_stay_small_enough_to_read_in_one_sitting():
    """No module over 600 lines (memory.py, the public API, 500), no function body over 80 (its docstring
    counted): past them code is moved where it belongs, not squeezed."""
    root = REPO / "memcli"
    over = []
    for path in sorted(root.rglob("*.py")):
        text = path.read_text()
        limit = MEMORY_LINES if path == root / "memory.py" else MODULE_LINES
        if text.count("\n") > limit:
            over.append(f"{path.relative_to(REPO)}: {text.count(chr(10))} lines (limit {limit})")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                body = node.end_lineno - node.body[0].lineno + 1
                if body > FUNCTION_LINES:
                    over.append(f"{path.relative_to(REPO)}: {node.name} has a {body}-line body (limit {FUNCTION_LINES})")
    assert not over, "\n".join(over)
