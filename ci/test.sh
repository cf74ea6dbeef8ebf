#!/usr/bin/env bash
# The README's test command: set up, lint, then run the test suite. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/setup.sh
echo "== ruff"
.venv/bin/ruff check harness reference_broker tests suites ci
echo "== pytest"
set +e
.venv/bin/pytest -m "not slow and not docker" tests suites "$@"
status=$?
set -e
if [ "$status" -eq 5 ]; then
  echo "pytest collected no tests: that is a failure, not a pass" >&2
  exit 1
fi
exit "$status"
