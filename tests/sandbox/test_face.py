"""`execrl.sandbox`'s face: every name it exports resolves, and its three lists agree (the lazy
tables, `__all__`, and the TYPE_CHECKING imports type checkers read), so a name added to one and
not the others fails here rather than in a user's import."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import execrl.sandbox as face


def _type_checking_names() -> set[str]:
    tree = ast.parse(Path(face.__file__).read_text())
    block = next(
        n for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING"
    )
    return {
        a.asname or a.name for n in block.body if isinstance(n, ast.ImportFrom) for a in n.names
    }


def test_the_tables_all_and_the_type_checking_imports_name_the_same():
    tables = set(face._EXPORTS) | set(face._RENAMED)
    assert not set(face._EXPORTS) & set(face._RENAMED)
    assert face.__all__ == sorted(tables)
    assert _type_checking_names() == tables


def test_every_name_is_its_modules_own():
    for name, module in face._EXPORTS.items():
        if name == "serve" and importlib.util.find_spec("fastapi") is None:
            continue  # the server's extra is not installed
        assert getattr(face, name) is getattr(importlib.import_module(module), name)
    for name, (module, attr) in face._RENAMED.items():
        assert getattr(face, name) is getattr(importlib.import_module(module), attr)


def test_an_unknown_name_is_an_attribute_error():
    try:
        face.no_such_name  # noqa: B018
    except AttributeError as exc:
        assert "no_such_name" in str(exc)
    else:
        raise AssertionError("an unknown name resolved")


def test_importing_the_face_loads_no_wing():
    # the worker imports `execrl.sandbox` on its way to `execrl.sandbox.run.worker`
    code = "import sys, execrl.sandbox; print(sorted(m for m in sys.modules if 'sandbox.' in m))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
