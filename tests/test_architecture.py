"""What the layout promises (docs/layout.md) beyond what import-linter checks.

The layering rules themselves — no import cycle between siblings at any depth, the harness's
rooms only looking down, the harness never importing the broker, kio and pyspark each imported
by one room, sans-IO modules doing no I/O, the broker's layers — are import-linter contracts in
pyproject.toml: here they are run, and each is shown to break on a planted violation, so a
contract that has stopped matching anything cannot pass unnoticed. What import-linter cannot
say is checked on the source tree: which imports happen inside a function, and how long a
module is.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("harness", "reference_broker")
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
MAX_LINES = 600

LAZY_IMPORTS = {
    ("harness.cli.check", "harness.checker.command"):
        "`check` alone needs the checker (pyarrow and both engines); --help must not load it",
    ("harness.cli.demo", "harness.run.demo"):
        "`demo` alone needs confluent-kafka and a broker process",
    ("harness.cli.run", "harness.run.runner"):
        "`run` alone needs every cluster kind, the clients and the checker",
    ("harness.cli.cluster", "harness.supervisor.owner"):
        "`up --foreground` runs the supervisor (every cluster kind) in the command's process; "
        "`up` launches it as a process of its own and other commands only talk to it",
    ("harness.checker.engine", "harness.checker.spark"):
        "the Spark engine: pyspark and py4j take a second to import, a JVM to run",
    ("harness.checker.engine", "harness.checker.spark_session"):
        "the same import statement as the Spark engine's",
    ("harness.plugin.pytest_plugin", "harness.cluster.targets"):
        "pytest loads the plugin into every session of the environment; the cluster machinery "
        "(kio, kazoo, the docker SDK: a third of a second) only once a test asks for a target",
    ("harness.plugin.pytest_plugin", "harness.raw_client"):
        "kio (under harness.wire) only for a test that asks for raw clients",
    ("harness.plugin.pytest_plugin", "harness.plugin.cleanup"):
        "confluent-kafka's admin client only when a session has something to delete",
    ("reference_broker.__main__", "reference_broker.server.kafka_server"):
        "every request handler and kio (0.3 s): not for `reference-broker --help` "
        "or a configuration refused with exit 2",
}
"""Imports of harness or broker modules inside a function: each for a heavy dependency that most
uses of the importing module never need, with the reason. Never to dodge an import cycle (the
contracts would then show the cycle)."""

MAX_LAZY_STATEMENTS = 10


def _modules():
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            yield module.removesuffix(".__init__"), path


MODULES = list(_modules())


def _imported(node: ast.Import | ast.ImportFrom, package: str) -> list[str]:
    """The modules (or, for ``from x import name``, the candidates ``x.name`` and ``x``) an
    import statement names."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        parts = package.split(".")
        base = ".".join(parts[: len(parts) - node.level + 1] + ([node.module] if node.module
                                                                 else []))
    else:
        base = node.module or ""
    return [f"{base}.{alias.name}" for alias in node.names] + [base]


def _known(name: str) -> str | None:
    """``name`` as a module of this tree (a ``from x import y`` names either)."""
    known = {module for module, _ in MODULES}
    return name if name in known else None


def lazy_imports() -> list[tuple[str, str, int]]:
    """(importer, imported module, line) for every import of a harness or broker module made
    inside a function, each import statement once per module it names."""
    found = []
    for module, path in MODULES:
        tree = ast.parse(path.read_text(), filename=str(path))
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for function in ast.walk(tree):
            if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(function):
                if not isinstance(node, ast.Import | ast.ImportFrom):
                    continue
                names = _imported(node, package)
                targets = {t for name in names if (t := _known(name)) is not None}
                if isinstance(node, ast.ImportFrom) and len(targets) > 1:
                    targets.discard(names[-1])  # `from pkg import mod`: the module, not pkg
                found += [(module, target, node.lineno) for target in sorted(targets)]
    return sorted(set(found))


def test_the_scan_sees_the_tree():
    assert len(MODULES) > 100
    assert ("harness.cli.run", "harness.run.runner") in {(a, b) for a, b, _ in lazy_imports()}


def test_imports_inside_functions_are_only_the_reasoned_ones():
    found = lazy_imports()
    unexplained = [f"{importer}:{line} imports {imported}" for importer, imported, line in found
                   if (importer, imported) not in LAZY_IMPORTS]
    assert unexplained == [], ("import these at the top of the module; an import inside a "
                               "function is for a heavy dependency, with its reason in "
                               "LAZY_IMPORTS")
    stale = sorted(set(LAZY_IMPORTS) - {(a, b) for a, b, _ in found})
    assert stale == [], "LAZY_IMPORTS names imports that no longer exist"
    statements = {(importer, line) for importer, _, line in found}
    assert len(statements) <= MAX_LAZY_STATEMENTS


def test_no_module_is_over_the_line_limit():
    long = {str(path.relative_to(ROOT)): n for _, path in MODULES
            if (n := len(path.read_text().splitlines())) > MAX_LINES}
    assert long == {}, f"split these by responsibility (at most {MAX_LINES} lines)"


# --- the import-linter contracts ------------------------------------------------------------

def _contract_names() -> list[str]:
    with open(ROOT / "pyproject.toml", "rb") as file:
        return [c["name"] for c in tomllib.load(file)["tool"]["importlinter"]["contracts"]]


def _lint(tree: Path) -> dict[str, str]:
    """Each contract's verdict (``KEPT``/``BROKEN``) on the tree at ``tree``."""
    done = subprocess.run([str(LINT_IMPORTS), "--no-cache", "--no-logo"], cwd=tree,
                          capture_output=True, text=True, timeout=300)
    # A contract's name may wrap onto a second line; its verdict ends the line it ends on.
    text = " ".join(done.stdout.split())
    verdicts = {}
    for name in _contract_names():
        at = text.find(name)
        assert at >= 0, f"lint-imports did not report {name!r}: {done.stdout}{done.stderr}"
        verdicts[name] = text[at + len(name):].split()[0]
    return verdicts


def test_the_tree_keeps_every_contract():
    verdicts = _lint(ROOT)
    assert {name: v for name, v in verdicts.items() if v != "KEPT"} == {}


PLANTED = {
    "No import cycle between siblings": ("harness/lifecycle/procfs.py",
                                         "from harness.cluster import factory"),
    "The harness's rooms only look down": ("harness/net/ports.py",
                                           "from harness.nemesis import schedule"),
    "The harness never imports the reference broker": ("harness/history.py",
                                                       "import reference_broker.config"),
    "The reference broker imports only harness.wire": ("reference_broker/config.py",
                                                       "from harness import waiting"),
    "Only harness.wire imports kio": ("harness/waiting.py", "import kio"),
    "Only the Spark engine imports pyspark": ("harness/checker/report.py", "import pyspark"),
    "Sans-IO modules do no I/O": ("harness/net/grudge.py", "import socket"),
    "The broker's layers only look down": ("reference_broker/log/segment.py",
                                           "from reference_broker.cluster import partition"),
    "The group coordinator and the controller": ("reference_broker/controller/election.py",
                                                 "from reference_broker.server import "
                                                 "metadata_cache"),
}


def test_every_contract_breaks_on_a_planted_violation(tmp_path: Path):
    """One violation planted per contract in a copy of the tree: each contract, and only the
    ones planted for, must report it (a contract that matches nothing would pass forever)."""
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    for package in PACKAGES:
        shutil.copytree(ROOT / package, tmp_path / package,
                        ignore=shutil.ignore_patterns("__pycache__"))
    for path, line in PLANTED.values():
        with open(tmp_path / path, "a") as module:
            module.write(f"\n{line}  # planted by tests/test_architecture.py\n")
    verdicts = _lint(tmp_path)
    assert set(PLANTED) == {prefix for prefix in PLANTED
                            if any(name.startswith(prefix) for name in verdicts)}
    kept = [name for name, verdict in verdicts.items() if verdict != "BROKEN"]
    assert kept == []


@pytest.mark.parametrize("module", ["harness.cli", "harness.plugin.pytest_plugin"])
def test_a_light_entry_point_loads_no_heavy_library(module: str):
    """``kafka-harness --help`` and every pytest session of the environment load these; the
    libraries they would carry in are the reason for LAZY_IMPORTS."""
    heavy = ("kio", "pyspark", "py4j", "docker", "kazoo", "pyarrow")
    loaded = subprocess.run(
        [sys.executable, "-c", f"import sys, {module}; print(' '.join(sys.modules))"],
        capture_output=True, text=True, check=True, cwd=ROOT).stdout.split()
    assert sorted({name.split(".")[0] for name in loaded} & set(heavy)) == []
