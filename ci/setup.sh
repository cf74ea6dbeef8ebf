#!/usr/bin/env bash
# Installs what the project needs on a fresh Debian 12 machine (run as root): Java (the JDK: the
# checker builds its compiled passes with javac, harness/checker/jvm_passes.py), ZooKeeper,
# Chromium (report screenshots), kcat (a native Kafka client for benchmarks), a virtualenv at
# .venv with the project and its dev extras, then Apache Kafka's jars, the real Toxiproxy server
# and the kfake peer (ci/fetch_vendor.sh, into .harness/vendor/). Idempotent: a second run only
# checks.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(openjdk-17-jdk-headless zookeeper chromium iproute2 iptables kcat libfuse2 fuse3)
missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  "$PYTHON" -m venv .venv
fi
stamp=.venv/.installed-$(sha1sum pyproject.toml | cut -c1-12)
if [ ! -f "$stamp" ]; then
  echo "setup: installing the project into .venv"
  .venv/bin/pip install -q --upgrade pip >/dev/null
  .venv/bin/pip install -q -e '.[dev]'
  rm -f .venv/.installed-*
  touch "$stamp"
fi

bash ci/fetch_vendor.sh
