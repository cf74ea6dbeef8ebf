#!/usr/bin/env bash
# The README's test command: set up, lint, then run the test suite. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/setup.sh
echo "== ruff"
.venv/bin/ruff check harness reference_broker tests suites ci
echo "== mypy"
.venv/bin/mypy harness reference_broker
echo "== pytest"
set +e
.venv/bin/pytest -m "not slow and not docker" tests suites "$@"
status=$?
set -e
if [ "$status" -eq 5 ]; then
  echo "pytest collected no tests: that is a failure, not a pass" >&2
  exit 1
fi
echo "== docker backend smoke"
set +e
bash ci/docker_smoke.sh
smoke=$?
set -e
if [ "$status" -ne 0 ]; then
  exit "$status"
fi
exit "$smoke"
