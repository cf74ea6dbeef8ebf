"""The import rules of DESIGN.md, checked on the source tree (no import side effects)."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("harness", "reference_broker")


def _modules():
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            yield module.removesuffix(".__init__"), path


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    package = ".".join(path.relative_to(ROOT).parent.parts)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                names.add(".".join(base + ([node.module] if node.module else [])))
            elif node.module:
                names.add(node.module)
    return names


def _under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


MODULES = list(_modules())


def _violations(rule):
    return [f"{module} imports {name}" for module, path in MODULES
            for name in sorted(_imports(path)) if rule(module, name)]


def test_the_scan_sees_the_tree():
    assert len(MODULES) > 20
    assert any(_under(n, "kio") for m, p in MODULES if m.startswith("harness.wire")
               for n in _imports(p))


@pytest.mark.parametrize("description,rule", [
    ("harness never imports reference_broker",
     lambda m, n: _under(m, "harness") and _under(n, "reference_broker")),
    ("reference_broker imports only harness.wire from the harness",
     lambda m, n: _under(m, "reference_broker") and _under(n, "harness")
     and not _under(n, "harness.wire")),
    ("only harness.wire imports kio",
     lambda m, n: _under(n, "kio") and not _under(m, "harness.wire")),
    ("only the Spark engine (harness.checker.spark and its session) imports pyspark",
     lambda m, n: _under(n, "pyspark")
     and m not in ("harness.checker.spark", "harness.checker.spark_session")),
    ("the log layer does not look up",
     lambda m, n: _under(m, "reference_broker.log") and (
         _under(n, "reference_broker.cluster") or _under(n, "reference_broker.server")
         or _under(n, "reference_broker.network"))),
    ("partition does not look up at the server",
     lambda m, n: _under(m, "reference_broker.cluster") and _under(n, "reference_broker.server")),
])
def test_import_rule(description, rule):
    assert _violations(rule) == [], description


NO_IO = ("harness.wire", "harness.net.grudge", "harness.checker.rules",
         "reference_broker.coordinator.group.group_metadata",
         "reference_broker.controller.election")
IO_MODULES = ("socket", "asyncio", "subprocess", "os", "pathlib", "shutil", "selectors")


def test_sans_io_modules_do_no_io():
    bad = [f"{m} imports {n}" for m, p in MODULES if any(_under(m, x) for x in NO_IO)
           for n in _imports(p) if n in IO_MODULES]
    assert bad == []


def _harness_part(name: str) -> str | None:
    """The harness subpackage or top-level module ``name`` belongs to (``harness.cluster``)."""
    parts = name.split(".")
    return ".".join(parts[:2]) if parts[0] == "harness" and len(parts) > 1 else None


def test_no_import_cycle_between_parts_of_the_harness():
    """Subpackages and top-level modules import each other one way only: the cluster layer
    never reaches up to the nemesis or the supervisor that drive it (lazy imports included)."""
    edges: dict[str, set[str]] = {}
    for module, path in MODULES:
        source = _harness_part(module)
        if source is None:
            continue
        for name in _imports(path):
            target = _harness_part(name)
            if target is not None and target != source:
                edges.setdefault(source, set()).add(target)

    def reaches(start: str, goal: str) -> bool:
        seen, todo = set(), [start]
        while todo:
            node = todo.pop()
            if node == goal:
                return True
            if node not in seen:
                seen.add(node)
                todo.extend(edges.get(node, ()))
        return False

    cycles = sorted(f"{a} <-> {b}" for a, targets in edges.items() for b in targets
                    if a < b and reaches(b, a))
    assert cycles == []
