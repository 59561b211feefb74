"""The layers import one way: tasks -> models -> sandbox -> rewards -> rl -> eval -> report.

Every `import execrl.X` and `from execrl.X import ...` in a layer's modules, at module level or
inside a function, names the same layer or a lower one. Modules outside the layers (cli.py,
train_command.py, progress.py) sit on top."""

from __future__ import annotations

import ast
from pathlib import Path

LAYERS = ["tasks", "models", "sandbox", "rewards", "rl", "eval", "report"]
SRC = Path(__file__).resolve().parents[1] / "src" / "execrl"


def _imports(path: Path) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            found.extend((node.lineno, a.name) for a in node.names)
    return [(line, name) for line, name in found if name.startswith("execrl.")]


def test_no_layer_imports_a_higher_one():
    upward = []
    for path in sorted(SRC.rglob("*.py")):
        layer = path.relative_to(SRC).parts[0]
        if layer not in LAYERS:
            continue
        for line, name in _imports(path):
            target = name.split(".")[1]
            if target in LAYERS and LAYERS.index(target) > LAYERS.index(layer):
                upward.append(f"{path.relative_to(SRC)}:{line}: {layer} imports {name}")
    assert upward == []


def test_the_check_sees_an_upward_import(tmp_path):
    bad = tmp_path / "m.py"
    bad.write_text("def f():\n    from execrl.report.page import build\n")
    assert _imports(bad) == [(2, "execrl.report.page")]
