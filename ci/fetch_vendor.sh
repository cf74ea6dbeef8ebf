#!/usr/bin/env bash
# Fetches the third-party programs the harness runs, into .harness/vendor/ (git-ignored):
#   kafka-3.9/libs        Apache Kafka 3.9 (ZooKeeper mode) + kafka-tools, from the Maven registry
#   kafka-4/libs          Apache Kafka 4.x (KRaft only), from the Maven registry
#   bin/toxiproxy-server  the real Toxiproxy server, built from its Go module at a pinned version
#   bin/kfake             franz-go's fake cluster (the kfake peer target), built from ci/kfake/
# The exact Kafka versions are pinned in ci/apache-kafka/pom.xml (one profile per line), the
# Toxiproxy version below, kfake's modules in ci/kfake/go.mod and go.sum. Each lands in a
# temporary directory first and is renamed into place only when complete, with a `.complete`
# stamp saying what it was made from: a second run finds the stamps and only checks. A fetch
# that fails stops here with one line naming what could not be fetched and how to retry.
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

# go_build NAME WHAT BUILT COMMAND...: run COMMAND, a Go build that writes BUILT into
# $VENDOR/.NAME.partial (the caller names that directory in COMMAND), and move the result to
# $VENDOR/bin/NAME; a failed build stops set-up naming WHAT and the build's first error.
go_build() {
  local name=$1 what=$2 built=$3
  shift 3
  command -v go >/dev/null || fail "$what" "go is not installed"
  echo "setup: building $what"
  local tmp="$VENDOR/.$name.partial" failed="$VENDOR/$name.failed.log"
  rm -rf "$tmp" && mkdir -p "$tmp"
  if ! "$@" >"$tmp/go.log" 2>&1; then
    cp "$tmp/go.log" "$failed"
    rm -rf "$tmp"
    fail "$what" "$failed: $(grep -m1 -v '^go: downloading' "$failed")"
  fi
  mkdir -p "$VENDOR/bin"
  mv "$tmp/$built" "$VENDOR/bin/$name"
  rm -rf "$tmp"
}

fetch_toxiproxy() {
  local stamp="$VENDOR/bin/.toxiproxy-$TOXIPROXY_VERSION.complete"
  if [ "$(cat "$stamp" 2>/dev/null)" = "$TOXIPROXY_LDFLAGS" ] \
      && [ -x "$VENDOR/bin/toxiproxy-server" ]; then
    return
  fi
  go_build toxiproxy-server "Toxiproxy $TOXIPROXY_VERSION ($TOXIPROXY_MODULE)" server \
    env GOBIN="$VENDOR/.toxiproxy-server.partial" GOFLAGS=-mod=mod \
    go install -ldflags="$TOXIPROXY_LDFLAGS" "$TOXIPROXY_MODULE@$TOXIPROXY_VERSION"
  rm -f "$VENDOR"/bin/.toxiproxy-*.complete
  echo "$TOXIPROXY_LDFLAGS" >"$stamp"
}

# fetch_kfake: ci/kfake/main.go, a small program of ours around the kfake library, built with
# exactly the modules ci/kfake/go.sum pins (-mod=readonly: a build never edits them). The stamp
# is the hash of the three files, so any change to them rebuilds it.
fetch_kfake() {
  local src=ci/kfake stamp="$VENDOR/bin/.kfake.complete" module made_from
  module=$(grep -o -m1 'github.com/twmb/franz-go/pkg/kfake v[^ ]*' "$src/go.mod" | tr ' ' @)
  made_from="kfake $(cat "$src/go.mod" "$src/go.sum" "$src/main.go" | sha1sum | cut -c1-12)"
  if [ "$(cat "$stamp" 2>/dev/null)" = "$made_from" ] && [ -x "$VENDOR/bin/kfake" ]; then
    return
  fi
  go_build kfake "the kfake peer from $src ($module and the modules $src/go.sum pins)" kfake \
    go -C "$src" build -mod=readonly -buildvcs=false -trimpath -o "$VENDOR/.kfake.partial/kfake" .
  echo "$made_from" >"$stamp"
}

fetch_kafka 3.9
fetch_kafka 4
fetch_toxiproxy
fetch_kfake
