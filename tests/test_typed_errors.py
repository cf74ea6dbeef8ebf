"""The reference broker spells no Kafka error as a string: it carries `ErrorCode` members.

A string such as "NOT_COORDINATOR" is only checked when a response is encoded (or, compared
with `==`, never): the broker once answered RECORD_BATCH_TOO_LARGE, no error code at all, and
closed the connection. Docstrings and comments may name errors; string constants may not.
"""

import ast
from pathlib import Path

from harness.wire.errors import ErrorCode

ROOT = Path(__file__).resolve().parent.parent
NAMES = {code.name.upper() for code in ErrorCode}


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def test_no_error_name_strings_in_the_broker():
    found = []
    for path in sorted((ROOT / "reference_broker").rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        docstrings = _docstrings(tree)
        found += [f"{path.relative_to(ROOT)}:{node.lineno}: {node.value!r}"
                  for node in ast.walk(tree)
                  if isinstance(node, ast.Constant) and isinstance(node.value, str)
                  and id(node) not in docstrings
                  and node.value in NAMES]
    assert found == [], "use harness.wire.errors.ErrorCode members"
