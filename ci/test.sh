#!/usr/bin/env bash
# The README's test command: set up, lint, then run the test suite. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/setup.sh
echo "== ruff"
.venv/bin/ruff check harness reference_broker tests suites ci
echo "== mypy"
.venv/bin/mypy harness reference_broker suites
echo "== import contracts (pyproject.toml, docs/layout.md)"
.venv/bin/lint-imports --no-logo
echo "== pytest"
# Bytecode caches are written even where the environment turns them off: the tests start
# hundreds of broker and CLI processes, and each would compile its modules from source again
# (0.13 s of CPU per reference broker; pytest's rewritten test modules too).
unset PYTHONDONTWRITEBYTECODE
# -rfE: the short summary names failures and errors only (the skips' reasons are in the
# report), so a failure stays near the end of a long log; the JUnit file names them again in
# the last line.
junit="$(mktemp --suffix=.xml)"
# The tests' temporary directories (run directories, cluster logs) in a directory of this run's
# own: pytest keeps only its last three numbered ones, and the tests start pytest sessions of
# their own, so by the end a failed test's logs were gone. Removed if the tests pass.
basetemp="$(mktemp -d /tmp/kh-tests-XXXXXX)"
set +e
# Two pytest-xdist workers: most of a test's time is spent waiting on brokers, clients and
# timeouts, not on the CPU (measured: pytest took 38 min in one process, 28 to 31 in two, on
# 2 cores). --dist loadfile keeps a file's tests, and the cluster its module shares, in one
# worker. Three workers were tried and starved the property tests of Spark (docs/setup.md).
# --no-loadscope-reorder: the files are handed out costliest first, in the order
# tests/scheduling.py gives them, not sorted by how many tests they hold.
workers="${KAFKA_HARNESS_TEST_WORKERS:-2}"
.venv/bin/pytest -m "not slow and not docker" -rfE -n "$workers" --dist loadfile \
  --no-loadscope-reorder --junitxml="$junit" --basetemp="$basetemp" tests suites "$@"
status=$?
if [ "$status" -eq 0 ]; then
  rm -rf "$basetemp"
else
  echo "the tests' run directories and logs are kept in $basetemp"
fi
set -e
failed_tests="$(.venv/bin/python ci/junit_failures.py "$junit")"
echo "== where pytest's time went"
# The per-file seconds are kept in .harness/file-costs.json: copied to tests/file_costs.json,
# they become the order the next runs hand files out in (tests/scheduling.py).
.venv/bin/python ci/junit_times.py "$junit" --costs .harness/file-costs.json || true
rm -f "$junit"
if [ "$status" -eq 5 ]; then
  echo "pytest collected no tests: that is a failure, not a pass" >&2
  exit 1
fi
echo "== fuzz: a short run of ci/fuzz (docs/fuzzing.md); a crash fails the run"
set +e; bash ci/fuzz --runs 30000 --seed 1; fuzz=$?; set -e
echo "== docker backend smoke"
smoke_status="$(mktemp)"
set +e
SMOKE_STATUS_FILE="$smoke_status" bash ci/docker_smoke.sh
smoke=$?
set -e
# One last line naming what did not run, so a skipped part cannot pass unnoticed.
skipped="$(cat "$smoke_status")"
rm -f "$smoke_status"
if [ "$smoke" -ne 0 ]; then docker_part="failed (exit $smoke)"; else docker_part="${skipped:-ran}"; fi
if [ "$status" -ne 0 ]; then pytest_part="failed (exit $status: ${failed_tests:-see above})"; else pytest_part="passed"; fi
if [ "$fuzz" -ne 0 ]; then fuzz_part="failed (exit $fuzz)"; else fuzz_part="passed"; fi
echo "== summary: ruff passed; mypy passed; import contracts kept; pytest (not slow, not docker) $pytest_part; fuzz (30000 executions) $fuzz_part; docker smoke $docker_part; not run here by design: the tests marked slow"
if [ "$status" -ne 0 ]; then
  exit "$status"
fi
if [ "$fuzz" -ne 0 ]; then
  exit "$fuzz"
fi
exit "$smoke"
