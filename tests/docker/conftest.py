"""Fixtures for the docker backend's tests: an engine (started if it can be), the images, and
one 3-broker :class:`DockerCluster` shared by the module's tests, to keep them affordable.

Every test here is marked ``docker`` (heavy: an engine, image builds on first use, containers)
so CI can place them; without an engine that can start, they skip with the reason why.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from harness.cluster.docker.backend import DockerCluster
from harness.cluster.docker.images import (
    EngineUnavailable,
    build_project_image,
    ensure_base_image,
    ensure_engine,
)
from harness.cluster.spec import ClusterSpec


@pytest.fixture(scope="session")
def engine() -> docker.DockerClient:
    try:
        return ensure_engine()
    except EngineUnavailable as exc:
        pytest.skip(f"no docker engine could be started: {exc}")


@pytest.fixture(scope="session")
def project_image(engine: docker.DockerClient) -> str:
    """The project image for the current sources (built on first use: minutes, then cached)."""
    return build_project_image(engine, ensure_base_image(engine))


@pytest.fixture(scope="module")
def cluster(engine: docker.DockerClient, project_image: str,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[DockerCluster]:
    """3 brokers; a follower falls out of the ISR 1.5 s after it stops fetching."""
    run_dir = tmp_path_factory.mktemp("docker-cluster")
    spec = ClusterSpec(brokers=3, properties={"replica.lag.time.max.ms": 1500})
    with DockerCluster(spec, run_dir=run_dir, image=project_image, client=engine) as started:
        yield started
    print(f"docker cluster logs under {run_dir}: "
          + ", ".join(path.name for path in sorted(Path(run_dir).glob("*.log"))))
