#!/usr/bin/env bash
# Build the docker backend's images.
#
#   ci/docker/build.sh                 no registry: engine (docker.io + dockerd if none answers,
#                                      log in /var/log/kafka-harness-dockerd.log), base image by
#                                      debootstrap + docker import, project image; both cached
#   ci/docker/build.sh --force         rebuild the project image even if its tag exists
#   ci/docker/build.sh --from-registry [BASE]
#                                      a machine with a registry: plain `docker build` of
#                                      ci/docker/Dockerfile FROM BASE (default debian:bookworm-slim)
#
# Prints the project image tag (kafka-harness:<source hash>) on stdout. Exit 3 when no engine
# can be had.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
python="${PYTHON:-$root/.venv/bin/python}"
[ -x "$python" ] || python=python3

if [ "${1:-}" != "--from-registry" ]; then
    exec "$python" -m harness.cluster.docker.images "$@"
fi

base="${2:-debian:bookworm-slim}"
tag="$("$python" -m harness.cluster.docker.images --print-tag)"
context="$(mktemp -d)"
trap 'rm -rf "$context"' EXIT
mkdir "$context/wheels"
cp "$root/ci/docker/Dockerfile" "$context/"
"$python" -m pip wheel --quiet --no-deps -w "$context/wheels" "$root"
"$python" - "$context/wheels" <<'PY'
import subprocess, sys
from pathlib import Path
from harness.cluster.docker.images import container_requirements, stage_image_directories
wheels = Path(sys.argv[1])
stage_image_directories(wheels.parent)
requirements = container_requirements()
(wheels / "container-requirements.txt").write_text("\n".join(requirements) + "\n")
subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--only-binary=:all:",
                "--python-version", "3.11", "-d", str(wheels), *requirements], check=True)
PY
docker build --build-arg "BASE_IMAGE=$base" --build-arg "SOURCE_HASH=${tag#*:}" \
    -t "$tag" "$context" >&2
echo "$tag"
