"""The structure of execrl at a git revision, as issue 30's must-show table counts it.

For each revision: files and lines per package, files over 500 lines, functions over 80 lines,
pairs of places sharing six or more lines in src/ and tests/ (the `duplicates` tool, where it is
on PATH), import arrows that run back up the layers or sit in a circle of modules, and the
places that compare with an algorithm's or an environment's name.

    python scripts/structure_report.py 6bca9bf HEAD     # before issue 30, now
"""

from __future__ import annotations

import argparse
import ast
import re
import shutil
import subprocess
import tarfile
import tempfile
from collections import Counter
from pathlib import Path

LAYERS = ["tasks", "models", "sandbox", "rewards", "rl", "eval", "report"]
ALGORITHMS = {"grpo", "dr_grpo", "rloo", "reinforce_pp", "ppo"}
ENVIRONMENTS = {"single", "self_correct", "tool", "harness"}
LONG_FILE, LONG_FUNCTION = 500, 80


def checkout(revision: str, into: Path) -> Path:
    """The tracked files of `revision`, written under `into` (the working tree is untouched)."""
    archive = subprocess.run(["git", "archive", revision, "src", "tests"], check=True,
                             capture_output=True).stdout  # fmt: skip
    path = into / "tree.tar"
    path.write_bytes(archive)
    with tarfile.open(path) as tar:
        tar.extractall(into, filter="data")
    return into


def module_name(src: Path, path: Path) -> str:
    parts = list(path.relative_to(src.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(tree: ast.AST) -> set[str]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return {name for name in found if name.startswith("execrl.")}


def name_tests(tree: ast.AST) -> tuple[int, int]:
    """(comparisons with an algorithm's name, comparisons with an environment's name)."""
    algorithm = environment = 0
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare):
            continue
        strings = {
            c.value
            for side in [node.left, *node.comparators]
            for c in ast.walk(side)
            if isinstance(c, ast.Constant) and isinstance(c.value, str)
        }
        algorithm += bool(strings & ALGORITHMS)
        environment += bool(strings & ENVIRONMENTS)
    return algorithm, environment


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for successor in graph.get(node, ()):
            if successor not in index:
                visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in list(graph):
        if node not in index:
            visit(node)
    return found


def duplicate_pairs(tree: Path) -> str:
    if shutil.which("duplicates") is None:
        return "n/a (no duplicates tool)"
    counts = []
    for part in ("src", "tests"):
        out = subprocess.run(["duplicates", "--repo", str(tree / part), "--most", "1",
                              "--seconds", "300"], capture_output=True, text=True).stdout  # fmt: skip
        first = out.splitlines()[0] if out else ""
        match = re.match(r"(\d+) pairs?", first)
        counts.append(match.group(1) if match else ("0" if "no duplicates" in first else "?"))
    return f"{counts[0]} in src, {counts[1]} in tests"


def report(tree: Path) -> dict[str, object]:
    src = tree / "src" / "execrl"
    files: Counter[str] = Counter()
    lines: Counter[str] = Counter()
    long_files, long_functions = [], []
    graph: dict[str, set[str]] = {}
    upward, algorithm_tests, environment_tests = [], 0, 0
    for path in sorted(src.rglob("*.py")):
        text = path.read_text()
        relative = path.relative_to(src)
        package = relative.parts[0] if len(relative.parts) > 1 else "(root)"
        files[package] += 1
        lines[package] += text.count("\n")
        if text.count("\n") > LONG_FILE:
            long_files.append(f"{relative} ({text.count(chr(10))})")
        tree_ = ast.parse(text)
        for node in ast.walk(tree_):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > LONG_FUNCTION:
                    long_functions.append(f"{relative}:{node.name} ({length})")
        module = module_name(src, path)
        graph[module] = imports(tree_)
        for target in graph[module]:
            layer, to = relative.parts[0], target.split(".")[1]
            if layer in LAYERS and to in LAYERS and LAYERS.index(to) > LAYERS.index(layer):
                upward.append(f"{module} -> {target}")
        a, e = name_tests(tree_)
        algorithm_tests, environment_tests = algorithm_tests + a, environment_tests + e
    modules = set(graph)
    graph = {m: {t for t in targets if t in modules and t != m} for m, targets in graph.items()}
    return {
        "files_lines": {p: (files[p], lines[p]) for p in sorted(files)},
        "long_files": long_files,
        "long_functions": long_functions,
        "duplicate_pairs": duplicate_pairs(tree),
        "upward_arrows": upward,
        "circles": cycles(graph),
        "algorithm_name_tests": algorithm_tests,
        "env_name_tests": environment_tests,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("revisions", nargs="+", help="git revisions, e.g. 6bca9bf HEAD")
    parser.add_argument("--details", action="store_true", help="list each file, function, arrow")
    args = parser.parse_args()
    for revision in args.revisions:
        with tempfile.TemporaryDirectory() as scratch:
            r = report(checkout(revision, Path(scratch)))
        total = (
            sum(f for f, _ in r["files_lines"].values()),
            sum(n for _, n in r["files_lines"].values()),
        )
        print(f"## {revision}")
        print("files/lines per package: " + ", ".join(
            f"{p} {f}/{n}" for p, (f, n) in r["files_lines"].items()) + f"; total {total[0]}/{total[1]}")  # fmt: skip
        print(f"files over {LONG_FILE} lines: {len(r['long_files'])}")
        print(f"functions over {LONG_FUNCTION} lines: {len(r['long_functions'])}")
        print(f"pairs sharing 6+ lines: {r['duplicate_pairs']}")
        print(f"import arrows back up the layers: {len(r['upward_arrows'])}")
        print(f"circles of modules: {len(r['circles'])} "
              f"({sum(len(c) for c in r['circles'])} modules)")  # fmt: skip
        print(f"comparisons with an algorithm's name: {r['algorithm_name_tests']}; "
              f"with an environment's name: {r['env_name_tests']}")  # fmt: skip
        if args.details:
            for key in ("long_files", "long_functions", "upward_arrows", "circles"):
                print(f"{key}:", *r[key], sep="\n  ")


if __name__ == "__main__":
    main()
