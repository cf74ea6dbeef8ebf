#!/usr/bin/env bash
# Fetches the third-party programs the harness runs, into .harness/vendor/ (git-ignored):
#   kafka-3.9/libs        Apache Kafka 3.9 (ZooKeeper mode) + kafka-tools, from the Maven registry
#   kafka-4/libs          Apache Kafka 4.x (KRaft only), from the Maven registry
#   bin/toxiproxy-server  the real Toxiproxy server, built from its Go module at a pinned version
# The exact Kafka versions are pinned in ci/apache-kafka/pom.xml (one profile per line), the
# Toxiproxy version below. Each lands in a temporary directory first and is renamed into place
# only when complete, with a `.complete` stamp saying what it was made from: a second run finds
# the stamps and only checks. A fetch that fails stops here with one line naming what could not
# be fetched and how to retry.
set -euo pipefail
cd "$(dirname "$0")/.."

VENDOR=${KAFKA_HARNESS_VENDOR:-.harness/vendor}
case "$VENDOR" in /*) ;; *) VENDOR="$PWD/$VENDOR" ;; esac
TOXIPROXY_MODULE=github.com/Shopify/toxiproxy/v2/cmd/server
TOXIPROXY_VERSION=v2.12.0
# Toxiproxy's releases set its version at link time; without this `GET /version` answers "git".
TOXIPROXY_LDFLAGS="-X github.com/Shopify/toxiproxy/v2.Version=${TOXIPROXY_VERSION#v}"
mkdir -p "$VENDOR"

fail() {
  echo "setup: could not fetch $1; retry with: bash ci/fetch_vendor.sh (details: $2)" >&2
  exit 3
}

POM=ci/apache-kafka/pom.xml
POM_STAMP="pom $(sha1sum "$POM" | cut -c1-12)"

# fetch_kafka LINE: the runtime jars of Kafka's broker (and tools) of profile kafka-LINE
fetch_kafka() {
  local line=$1 profile="kafka-$1"
  local dest="$VENDOR/kafka-$line"
  if [ "$(cat "$dest/.complete" 2>/dev/null)" = "$POM_STAMP" ]; then
    return
  fi
  local version
  version=$(awk -v p="<id>$profile</id>" '$0 ~ p {f=1} f && /kafka_2.13/ {g=1} f && g && /<version>/ {
    gsub(/.*<version>|<\/version>.*/, ""); print; exit}' "$POM")
  command -v mvn >/dev/null || fail "Apache Kafka $version" "mvn is not installed"
  echo "setup: fetching Apache Kafka $version jars with Maven (profile $profile)"
  local tmp="$VENDOR/.kafka-$line.partial"
  rm -rf "$tmp" && mkdir -p "$tmp"
  if ! mvn -B -q -f "$POM" -P"$profile" dependency:copy-dependencies \
      -DincludeScope=runtime -DoutputDirectory="$tmp/libs" >"$tmp/mvn.log" 2>&1; then
    cp "$tmp/mvn.log" "$VENDOR/kafka-$line.failed.log"
    rm -rf "$tmp"
    fail "Apache Kafka $version (org.apache.kafka:kafka_2.13:$version and its dependencies)" \
      "$VENDOR/kafka-$line.failed.log"
  fi
  ls "$tmp/libs" | grep -q "^kafka_2.13-$version.jar$" \
    || fail "Apache Kafka $version" "kafka_2.13-$version.jar missing after Maven ran"
  echo "$POM_STAMP" >"$tmp/.complete"
  rm -f "$tmp/mvn.log"
  rm -rf "$dest" && mv "$tmp" "$dest"
}

fetch_toxiproxy() {
  local dest="$VENDOR/bin/toxiproxy-server"
  local stamp="$VENDOR/bin/.toxiproxy-$TOXIPROXY_VERSION.complete"
  if [ "$(cat "$stamp" 2>/dev/null)" = "$TOXIPROXY_LDFLAGS" ] && [ -x "$dest" ]; then
    return
  fi
  command -v go >/dev/null || fail "Toxiproxy $TOXIPROXY_VERSION" "go is not installed"
  echo "setup: building the Toxiproxy server $TOXIPROXY_VERSION from its Go module"
  local tmp="$VENDOR/.toxiproxy.partial"
  rm -rf "$tmp" && mkdir -p "$tmp"
  if ! GOBIN="$tmp" GOFLAGS=-mod=mod go install -ldflags="$TOXIPROXY_LDFLAGS" \
      "$TOXIPROXY_MODULE@$TOXIPROXY_VERSION" \
      >"$tmp/go.log" 2>&1; then
    cp "$tmp/go.log" "$VENDOR/toxiproxy.failed.log"
    rm -rf "$tmp"
    fail "Toxiproxy $TOXIPROXY_VERSION ($TOXIPROXY_MODULE)" "$VENDOR/toxiproxy.failed.log"
  fi
  mkdir -p "$VENDOR/bin"
  rm -f "$VENDOR"/bin/.toxiproxy-*.complete
  mv "$tmp/server" "$dest"
  rm -rf "$tmp"
  echo "$TOXIPROXY_LDFLAGS" >"$stamp"
}

fetch_kafka 3.9
fetch_kafka 4
fetch_toxiproxy
