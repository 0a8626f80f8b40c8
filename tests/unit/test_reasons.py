"""Every reason the operator writes is a constant of specserve.api.reasons, and each is documented.

The checks read the operator's source: no condition or Event reason is spelled as a string literal outside
api/reasons.py (in a reason's place, or anywhere with a reason's value), so a reason cannot be written that the
list, the docs and the alerts do not know.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from specserve.api import reasons

ROOT = Path(__file__).parents[2]
PACKAGE = ROOT / "operator" / "specserve"
REASONS = PACKAGE / "api" / "reasons.py"
DOCS = ROOT / "docs" / "operations.md"

# The same word in another role: a Gateway API condition type, a pod phase. (path relative to the package, value)
OTHER_MEANINGS = {
    ("status.py", "Accepted"),  # the HTTPRoute's parent condition type (Gateway API)
    ("reconcile/traffic.py", "Accepted"),
    ("policy/types.py", "Pending"),  # the class Pending, in __all__
}
# Calls whose argument at this index (or keyword) is a reason.
REASON_ARGUMENTS = {
    "set_condition": 3,
    "_keep_or_default": 2,
    "Part": 2,
    "step": 0,
    "RolloutStep": 0,
    "Cause": 0,
    "failed": 1,
    "fail": 2,
    "Reading": 1,
    "_warn": 2,
}


def _sources() -> Iterator[tuple[str, ast.Module]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        if path != REASONS:
            yield str(path.relative_to(PACKAGE)), ast.parse(path.read_text(encoding="utf-8"))


def _docstrings(tree: ast.Module) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def _literal(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _called(node: ast.Call) -> str:
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _in_reason_place(tree: ast.Module) -> Iterator[tuple[int, str]]:
    """String literals where a reason goes: (status, reason, message) tuples, reason= keywords, the reason
    argument of the functions that take one."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Tuple) and len(node.elts) >= 2:
            first = node.elts[0]
            owner = first.value if isinstance(first, ast.Attribute) else None
            if isinstance(owner, ast.Name) and owner.id == "ConditionStatus" and (text := _literal(node.elts[1])):
                yield node.lineno, text
        if isinstance(node, ast.Call):
            for keyword in node.keywords:
                if keyword.arg == "reason" and (text := _literal(keyword.value)) is not None:
                    yield node.lineno, text
            index = REASON_ARGUMENTS.get(_called(node))
            if index is not None and index < len(node.args) and (text := _literal(node.args[index])) is not None:
                yield node.lineno, text


def test_no_reason_is_spelled_outside_the_reasons_module() -> None:
    known = reasons.every()
    found = []
    for path, tree in _sources():
        docstrings = _docstrings(tree)
        for node in ast.walk(tree):
            text = _literal(node)
            if text in known and id(node) not in docstrings and (path, text) not in OTHER_MEANINGS:
                found.append(f"{path}:{getattr(node, 'lineno', '?')}: {text!r}")
        found += [f"{path}:{line}: {text!r} in a reason's place" for line, text in _in_reason_place(tree)]
    assert not found, "reasons spelled as literals (use specserve.api.reasons):\n" + "\n".join(sorted(set(found)))


def test_the_check_finds_a_literal_reason() -> None:
    """The place check is not vacuous: a reason written as a literal in each kind of place is found."""
    tree = ast.parse(
        "a = (ConditionStatus.FALSE, 'Broken', 'm')\n"
        "post(x, reason='Broken')\n"
        "set_condition(c, T, ConditionStatus.TRUE, 'Broken', 'm', g, n)\n"
        "draft.step('Broken', 'm')\n"
    )
    assert [text for _, text in _in_reason_place(tree)] == ["Broken"] * 4


@pytest.mark.parametrize("reason", sorted(reasons.every()))
def test_each_reason_is_documented(reason: str) -> None:
    assert f"`{reason}`" in DOCS.read_text(encoding="utf-8"), f"{reason}: add it to {DOCS.name}'s list of reasons"
