"""Images for the docker backend, built on a machine that has no image registry.

Nothing is pulled. The base is a Debian rootfs made by ``debootstrap --variant=minbase`` from
the mirror this machine's apt already uses, turned into an image by ``docker import``; the one
project image on top (``ci/docker/Dockerfile``) adds Python, a JRE, Debian's ZooKeeper and
iptables with apt from that same mirror, the host directories the broker kinds need in it
(:meth:`~harness.cluster.kinds.BrokerKind.image_directories`: Apache Kafka's jars), and the
project from a wheel built here. The same image runs ZooKeeper, the brokers of every kind and
the Toxiproxy server, so a cluster needs one build.

Both steps are cached: the base is made once (its tag exists → skipped), and the project image
is tagged with a hash of the project's sources and of those directories, so it is rebuilt only
when they change.

The engine itself is found or started by :mod:`harness.cluster.docker.engine`.

    python -m harness.cluster.docker.images          # engine + base + project image; prints tag
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path

import docker
import docker.errors

from harness.cluster.docker.engine import EngineUnavailable, ensure_engine
from harness.cluster.options import DOCKER_KINDS
from harness.cluster.registry import BROKER_KINDS

PROJECT_ROOT = Path(__file__).resolve().parents[3]  # the checkout holding harness/cluster/docker/
DOCKER_DIR = PROJECT_ROOT / "ci" / "docker"
BASE_IMAGE = "kafka-harness-base:bookworm"
PROJECT_REPOSITORY = "kafka-harness"
SUITE = "bookworm"
# What the containers import (reference_broker, harness.net, harness.wire): the harness-side
# dependencies (pyspark, pyarrow, confluent-kafka, ...) would triple the image for nothing.
CONTAINER_REQUIREMENTS = ("kio", "crc32c", "kazoo")
# What the containers run: the broker, the built-in Toxiproxy server and what they import
# (see the import contracts). The rest of harness/ is in the wheel too but never runs there,
# so an edit to it (the checker, the CLI) does not cost an image build.
_SOURCE_GLOBS = ("pyproject.toml", "harness/__init__.py", "harness/net/**/*.py",
                 "harness/wire/**/*.py", "reference_broker/**/*.py", "ci/docker/Dockerfile",
                 "ci/docker/*.py")
IMAGE_FILES = "image-files"  # in the build context: copied to / of the image


def _log(message: str) -> None:
    print(f"[docker-images] {message}", file=sys.stderr, flush=True)


# --- the base image --------------------------------------------------------------------------

def debian_mirror(apt_dir: Path = Path("/etc/apt")) -> str:
    """The Debian mirror apt uses here, read from its config (one-line or deb822 sources),
    so nothing in the repository names a mirror host."""
    files = [apt_dir / "sources.list", *sorted((apt_dir / "sources.list.d").glob("*.list")),
             *sorted((apt_dir / "sources.list.d").glob("*.sources"))]
    for path in files:
        if not path.is_file():
            continue
        text = path.read_text(errors="replace")
        for uri, suites in _sources(text, deb822=path.suffix == ".sources"):
            if SUITE in suites and "security" not in uri:
                return uri.rstrip("/")
    raise RuntimeError(f"no apt source for Debian {SUITE} found under {apt_dir}")


def _sources(text: str, *, deb822: bool) -> Iterable[tuple[str, list[str]]]:
    if not deb822:
        for line in text.splitlines():
            match = re.match(r"\s*deb\s+(?:\[[^\]]*\]\s+)?(\S+)\s+(\S+)", line)
            if match:
                yield match[1], [match[2]]
        return
    for stanza in re.split(r"\n\s*\n", text):
        fields = dict(re.findall(r"^(\w[\w-]*):\s*(.*)$", stanza, flags=re.MULTILINE))
        if "deb" in fields.get("Types", "").split() and fields.get("URIs"):
            yield fields["URIs"].split()[0], fields.get("Suites", "").split()


def image_exists(client: docker.DockerClient, tag: str) -> bool:
    try:
        client.images.get(tag)
    except docker.errors.ImageNotFound:
        return False
    return True


def ensure_base_image(client: docker.DockerClient, mirror: str | None = None) -> str:
    """``kafka-harness-base:bookworm`` from a debootstrap rootfs, made unless it exists."""
    if image_exists(client, BASE_IMAGE):
        return BASE_IMAGE
    if shutil.which("debootstrap") is None:
        _log("installing debootstrap (apt-get)")
        subprocess.run(["apt-get", "install", "-y", "debootstrap"], check=True,
                       env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
    mirror = mirror or debian_mirror()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="kafka-harness-rootfs-") as rootfs:
        _log(f"debootstrap --variant=minbase {SUITE} from {mirror}")
        subprocess.run(["debootstrap", "--variant=minbase", SUITE, rootfs, mirror], check=True,
                       stdout=subprocess.DEVNULL)
        _log(f"docker import -> {BASE_IMAGE}")
        tar = subprocess.Popen(["tar", "-C", rootfs, "-c", "."], stdout=subprocess.PIPE)
        assert tar.stdout is not None
        client.api.import_image(src=tar.stdout, repository=BASE_IMAGE.split(":")[0],
                                tag=BASE_IMAGE.split(":")[1], stream_src=True)
        if tar.wait() != 0:
            raise RuntimeError("tar of the debootstrap rootfs failed")
    _log(f"base image made in {time.monotonic() - started:.0f}s")
    return BASE_IMAGE


# --- the project image -----------------------------------------------------------------------

def image_directories() -> dict[str, Path]:
    """Image path -> host directory, for every kind the docker backend runs: what the kinds
    need in the image besides the project (asked of each kind, so this module knows none)."""
    wanted: dict[str, Path] = {}
    for name in sorted(DOCKER_KINDS):
        wanted.update(BROKER_KINDS[name]().image_directories())
    return wanted


def source_hash(root: Path = PROJECT_ROOT,
                directories: Mapping[str, Path] | None = None) -> str:
    """A hash of everything that goes into the project image — the sources that run in it and
    ``directories`` (default :func:`image_directories`) —: a new one means a rebuild."""
    digest = hashlib.sha256()
    paths = sorted({path for pattern in _SOURCE_GLOBS for path in root.glob(pattern)
                    if path.is_file() and "__pycache__" not in path.parts})
    for path in paths:
        digest.update(str(path.relative_to(root)).encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    if directories is None:
        directories = image_directories()
    for inside, directory in sorted(directories.items()):
        for path in sorted(directory.rglob("*")):
            if path.is_file():
                digest.update(f"{inside}/{path.relative_to(directory)}".encode() + b"\0")
                digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def project_image_tag(root: Path = PROJECT_ROOT) -> str:
    return f"{PROJECT_REPOSITORY}:{source_hash(root)}"


def stage_image_directories(context: Path,
                            directories: Mapping[str, Path] | None = None) -> None:
    """Copy ``directories`` (default :func:`image_directories`) to ``context/image-files``
    at their paths in the image, for the Dockerfile's ``COPY image-files/ /``; the directory
    exists, empty, when nothing is wanted."""
    staged = context / IMAGE_FILES
    staged.mkdir()
    for inside, directory in (image_directories() if directories is None
                              else directories).items():
        shutil.copytree(directory, staged / inside.lstrip("/"), symlinks=False)


def container_requirements(root: Path = PROJECT_ROOT) -> list[str]:
    """The project's own pins (from pyproject) of what the containers import."""
    with open(root / "pyproject.toml", "rb") as file:
        dependencies = tomllib.load(file)["project"]["dependencies"]
    wanted = []
    for requirement in dependencies:
        name = re.split(r"[<>=!~ \[;]", requirement, maxsplit=1)[0]
        if name.lower() in CONTAINER_REQUIREMENTS:
            wanted.append(requirement)
    return wanted


def _prepare_context(context: Path, root: Path) -> None:
    """Dockerfile, image-files/ (:func:`stage_image_directories`) and wheels/: the project
    wheel and the wheels of :func:`container_requirements` for the engine's CPU and Debian's
    Python (3.11)."""
    wheels = context / "wheels"
    wheels.mkdir()
    shutil.copy(DOCKER_DIR / "Dockerfile", context / "Dockerfile")
    stage_image_directories(context)
    pip = [sys.executable, "-m", "pip"]
    subprocess.run([*pip, "wheel", "--quiet", "--no-deps", "-w", str(wheels), str(root)],
                   check=True)
    requirements = container_requirements(root)
    (wheels / "container-requirements.txt").write_text("\n".join(requirements) + "\n")
    machine = platform.machine()
    subprocess.run([*pip, "download", "--quiet", "--only-binary=:all:", "-d", str(wheels),
                    "--python-version", "3.11", "--implementation", "cp", "--abi", "cp311",
                    "--platform", f"manylinux2014_{machine}", "--platform",
                    f"manylinux_2_17_{machine}", "--platform", f"manylinux_2_28_{machine}",
                    *requirements], check=True)


def build_project_image(client: docker.DockerClient, base: str = BASE_IMAGE,
                        root: Path = PROJECT_ROOT, *, force: bool = False) -> str:
    """The project image for the current sources; built only if that tag does not exist."""
    tag = project_image_tag(root)
    if image_exists(client, tag) and not force:
        _log(f"{tag} is up to date")
        return tag
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="kafka-harness-image-") as context:
        _prepare_context(Path(context), root)
        _log(f"docker build {tag} FROM {base}")
        for chunk in client.api.build(path=context, tag=tag, rm=True, decode=True,
                                      buildargs={"BASE_IMAGE": base,
                                                 "SOURCE_HASH": tag.split(":")[1]}):
            if "error" in chunk:
                raise RuntimeError(f"docker build of {tag} failed: {chunk['error'].strip()}")
            line = chunk.get("stream", "").rstrip()
            if line.startswith("Step "):
                _log(line)
    _log(f"{tag} built in {time.monotonic() - started:.0f}s")
    _remove_older_builds(client, tag)
    return tag


def _remove_older_builds(client: docker.DockerClient, keep: str) -> None:
    """Drop the project images of earlier sources (their shared layers stay); one still used
    by a container is kept."""
    for image in client.images.list(name=PROJECT_REPOSITORY):
        if keep not in image.tags:
            for old in image.tags:
                with contextlib.suppress(docker.errors.APIError):
                    client.images.remove(old)


def ensure_images(*, force: bool = False) -> str:
    """Engine, base and project image; returns the project image tag."""
    client = ensure_engine()
    return build_project_image(client, ensure_base_image(client), force=force)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.cluster.docker.images",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--force", action="store_true", help="rebuild the project image")
    parser.add_argument("--print-tag", action="store_true",
                        help="print the tag the current sources would have, build nothing")
    args = parser.parse_args(argv)
    if args.print_tag:
        print(project_image_tag())
        return 0
    try:
        print(ensure_images(force=args.force))
    except EngineUnavailable as exc:
        print(f"no docker engine: {exc}", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
