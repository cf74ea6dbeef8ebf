#!/usr/bin/env bash
# The docker backend's smoke test, run by ci/test.sh: up, produce and consume through the
# Toxiproxy container, an iptables partition and its heal, down with nothing left; then up,
# produce, consume and down with one Apache Kafka broker, and with three KRaft nodes (≈ 25 s) —
# whenever a docker engine can be had.
# Images come from the cache (rebuilt only when what runs in the containers changed; a fresh
# machine builds them first, a few minutes).
#
# If no engine answers, one is installed (Debian's docker.io) and started as root; this script
# then stops it again and restores the iptables rules dockerd added (its chains and its
# FORWARD DROP policy), so the machine is left as it was found. When no engine can be started it
# says why and exits 0: the smoke is skipped, loudly, not failed.
set -uo pipefail
cd "$(dirname "$0")/.."
python=.venv/bin/python

started=0
rules=""
if ! "$python" -c 'import sys
from harness.cluster.docker.engine import engine_client
sys.exit(engine_client(timeout=5) is None)' 2>/dev/null; then
  started=1
  if command -v iptables-save >/dev/null; then
    rules="$(mktemp)"
    iptables-save >"$rules"
  fi
fi

# The saved rules, and for each table dockerd writes (filter, nat) that the machine did not have
# yet — a fresh machine's dump is empty, and restoring it changed nothing, so dockerd's chains
# and its FORWARD DROP policy stayed behind — that table as it is when absent: no rules, every
# chain accepting.
restore_rules() {
  {
    cat "$1"
    grep -q '^\*filter$' "$1" ||
      printf '*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\nCOMMIT\n'
    grep -q '^\*nat$' "$1" ||
      printf '*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\nCOMMIT\n'
  } | iptables-restore
}

stop_engine() {
  [ "$started" = 1 ] || return 0
  if [ -f /var/run/docker.pid ]; then
    pid="$(cat /var/run/docker.pid)"
    kill "$pid" 2>/dev/null
    for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
  fi
  if [ -n "$rules" ]; then
    restore_rules "$rules" && rm -f "$rules"
  fi
  ip link delete docker0 2>/dev/null || true
  echo "docker smoke: stopped the engine it started and restored the iptables rules"
}
trap stop_engine EXIT

"$python" -m harness.cluster.docker.images
built=$?
if [ "$built" -eq 3 ]; then
  echo "docker smoke: SKIPPED — no docker engine could be started here (reason above)" >&2
  # ci/test.sh names every part that did not run in its last line.
  [ -n "${SMOKE_STATUS_FILE:-}" ] && echo "SKIPPED (no docker engine could be started)" \
    >"$SMOKE_STATUS_FILE"
  exit 0
elif [ "$built" -ne 0 ]; then
  echo "docker smoke: FAILED — the images could not be built (exit $built)" >&2
  exit 1
fi
.venv/bin/pytest -m docker -p no:cacheprovider -q \
  "tests/docker/test_docker_backend.py::test_clients_reach_the_brokers_only_through_the_published_proxies" \
  "tests/docker/test_docker_cli.py::test_up_partition_heal_down_on_docker" \
  "tests/docker/test_docker_apache_kafka.py::test_one_broker_up_produce_consume_and_down_leaves_nothing" \
  "tests/docker/test_docker_kraft.py::test_acks_all_produce_and_consume_through_the_client_proxies"
