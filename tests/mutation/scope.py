"""Which lines of a driver file are driver code, the only lines worth mutating.

Kept: the classes the module defines and the module-level functions they call
(directly or through each other). Left out: imports, docstrings, logging calls,
type annotations (never evaluated under ``from __future__ import annotations``),
and whatever else sits at module level, such as the compliance hooks (the
harness's view of the backend, not the driver under test).
"""

from __future__ import annotations

import ast

__all__ = ["Scope", "driver_lines"]

Position = tuple[int, int]  # (line from 1, column from 0), as ast and parso count

_LOGGERS = {"LOG", "log", "logger", "LOGGER", "logging"}


def _is_docstring(node: ast.stmt) -> bool:
    return (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str))


def _is_logging(node: ast.stmt) -> bool:
    if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)):
        return False
    func = node.value.func
    return (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
            and func.value.id in _LOGGERS)


def _lines(node: ast.AST) -> set[int]:
    """The lines of ``node`` less its docstrings and logging calls."""
    out = set(range(node.lineno, node.end_lineno + 1))
    for inner in ast.walk(node):
        if isinstance(inner, ast.stmt) and (_is_docstring(inner) or _is_logging(inner)):
            out -= set(range(inner.lineno, inner.end_lineno + 1))
    return out


def driver_lines(source: str) -> set[int]:
    """Line numbers of the driver code in ``source`` (a module's text)."""
    tree = ast.parse(source)
    functions = {n.name: n for n in tree.body
                 if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    todo: list[ast.AST] = [n for n in tree.body if isinstance(n, ast.ClassDef)]
    kept: list[ast.AST] = []
    while todo:
        node = todo.pop()
        kept.append(node)
        for name in {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}:
            called = functions.pop(name, None)
            if called is not None:
                todo.append(called)
    return set().union(*(_lines(n) for n in kept)) if kept else set()


def _annotations(tree: ast.AST) -> list[tuple[Position, Position]]:
    spans = []
    for node in ast.walk(tree):
        found = [getattr(node, "returns", None), getattr(node, "annotation", None)]
        spans += [((a.lineno, a.col_offset), (a.end_lineno, a.end_col_offset))
                  for a in found if isinstance(a, ast.expr)]
    return spans


class Scope:
    """Where in one module's text a mutation changes driver code."""

    def __init__(self, source: str) -> None:
        self.lines = driver_lines(source)
        self.annotations = _annotations(ast.parse(source))

    def contains(self, start: Position, end: Position) -> bool:
        """True when the mutation from ``start`` to ``end`` touches driver code."""
        if not any(line in self.lines for line in range(start[0], end[0] + 1)):
            return False
        return not any(a <= tuple(start) and tuple(end) <= b for a, b in self.annotations)
