"""Unreachable code, counted on the syntax tree, so both static-analysis backends (pyflakes and
ruff) count it the same way."""

from __future__ import annotations

import ast

_TERMINAL = (ast.Return, ast.Raise, ast.Continue, ast.Break)


def unreachable_blocks(tree: ast.AST) -> int:
    """Statement lists with statements after a return, raise, continue or break."""
    n = 0
    for node in ast.walk(tree):
        for attr in ("body", "orelse", "finalbody"):
            body = getattr(node, attr, None)
            if not isinstance(body, list):
                continue
            for stmt in body[:-1]:
                if isinstance(stmt, _TERMINAL):
                    n += 1
                    break
        for handler in getattr(node, "handlers", ()) or ():
            for stmt in handler.body[:-1]:
                if isinstance(stmt, _TERMINAL):
                    n += 1
                    break
    return n
