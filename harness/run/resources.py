"""What a run's processes hold over time — resident memory and open files — and whether it grew.

A soak is only worth its half hour if it can fail on a slow leak: a broker that keeps a
buffer per connection it once served, a harness that leaves a file open per fault. So a run
samples, every ``interval`` seconds, the resident set (``VmRSS``) and the number of open file
descriptors of every broker, ZooKeeper and the harness process itself, from ``/proc``.

Judging growth needs care because the nemesis restarts brokers: a killed broker comes back
as a new process with a fresh heap, so growth across a restart would hide a leak (the drop)
or invent one (the climb back). Samples are therefore grouped into *lives* — one node, one
pid — and a life is judged only on its samples after its warm-up (the JVM's heap and page
cache settle in the first minutes), from the first such sample to the last. A life too short
to have two samples after warm-up is reported as not judged, never as passing.

The judgement is a pure function of the samples (:func:`judge`), so the soak report can be
recomputed from ``resources.json`` and is tested without processes.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from harness.schema import SCHEMA_VERSION

DEFAULT_INTERVAL_S = 60.0
GROWTH_LIMIT = 0.10  # a soak fails when a life's RSS or open files grew by more than this
HARNESS = "harness"  # the node name of the process running the workload and the nemesis


@dataclass(frozen=True)
class Sample:
    at_s: float  # seconds since sampling started
    node: str  # "broker-1", "zookeeper", "harness"
    pid: int
    rss_bytes: int
    open_files: int


def read_process(pid: int) -> tuple[int, int] | None:
    """(resident bytes, open file descriptors) of ``pid``, or None when it is gone (or a
    zombie, which has no VmRSS)."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as status:
            rss_kb = next((int(line.split()[1]) for line in status
                           if line.startswith("VmRSS:")), None)
        open_files = len(os.listdir(f"/proc/{pid}/fd"))
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    return None if rss_kb is None else (rss_kb * 1024, open_files)


class ResourceSampler:
    """Samples the processes ``pids()`` names (node name -> pid, None for a node that is
    down) at once, then every ``interval_s`` seconds on a daemon thread, and once more at
    :meth:`stop`."""

    def __init__(self, pids: Callable[[], Mapping[str, int | None]],
                 interval_s: float = DEFAULT_INTERVAL_S) -> None:
        if interval_s <= 0:
            raise ValueError(f"sample interval must be > 0 s, got {interval_s}")
        self._pids = pids
        self.interval_s = interval_s
        self.samples: list[Sample] = []
        self._start = time.monotonic()
        self._stopped = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._loop, name="resource-sampler",
                                        daemon=True)

    def start(self) -> ResourceSampler:
        self._start = time.monotonic()
        self._thread.start()
        return self

    def sample_now(self) -> None:
        at = round(time.monotonic() - self._start, 3)
        try:
            pids = dict(self._pids())
        except Exception:  # noqa: BLE001 - a node being restarted; the next round sees it
            return
        taken = []
        for node, pid in sorted(pids.items()):
            if pid is None:
                continue
            read = read_process(pid)
            if read is not None:
                taken.append(Sample(at, node, pid, *read))
        with self._lock:
            self.samples.extend(taken)

    def _loop(self) -> None:
        self.sample_now()
        while not self._stopped.wait(self.interval_s):
            self.sample_now()

    def stop(self) -> list[Sample]:
        """Stop sampling, after one last round; returns every sample taken."""
        if self._thread.is_alive():
            self._stopped.set()
            self._thread.join()
            self.sample_now()
        with self._lock:
            return list(self.samples)


@dataclass(frozen=True)
class Life:
    """One process of one node, from its first sample to its last."""

    node: str
    pid: int
    first_s: float
    last_s: float
    judged_from_s: float | None  # its first sample after warm-up, None when too short
    rss_growth: float | None  # last / first after warm-up - 1
    files_growth: float | None
    rss_bytes: tuple[int, int]  # (first after warm-up or first, last)
    open_files: tuple[int, int]

    @property
    def judged(self) -> bool:
        return self.judged_from_s is not None


@dataclass(frozen=True)
class Judgement:
    limit: float
    warmup_s: float
    min_span_s: float
    lives: tuple[Life, ...]
    grown: tuple[Life, ...] = field(default=())  # judged lives that grew past the limit

    @property
    def passed(self) -> bool:
        """Nothing grew past the limit, and something was judged at all."""
        return not self.grown and any(life.judged for life in self.lives)

    def as_dict(self) -> dict[str, object]:
        return {"limit": self.limit, "warmup_s": self.warmup_s, "min_span_s": self.min_span_s,
                "passed": self.passed,
                "lives": [asdict(life) | {"judged": life.judged} for life in self.lives],
                "grown": [f"{life.node} (pid {life.pid})" for life in self.grown]}


def _growth(first: int, last: int) -> float:
    return (last - first) / first if first else 0.0


def judge(samples: Sequence[Sample], *, warmup_s: float, min_span_s: float = 0.0,
          limit: float = GROWTH_LIMIT) -> Judgement:
    """Each life's growth over its samples taken at least ``warmup_s`` after the life's own
    first sample; a life is judged when two or more samples remain, at least ``min_span_s``
    apart (a leak needs time to show: two samples a few seconds apart prove nothing)."""
    by_life: dict[tuple[str, int], list[Sample]] = {}
    for sample in sorted(samples, key=lambda s: s.at_s):
        by_life.setdefault((sample.node, sample.pid), []).append(sample)
    lives = []
    for (node, pid), taken in sorted(by_life.items(), key=lambda item: item[1][0].at_s):
        settled = [s for s in taken if s.at_s >= taken[0].at_s + warmup_s]
        long_enough = len(settled) >= 2 and settled[-1].at_s - settled[0].at_s >= min_span_s
        start = settled[0] if long_enough else None
        base = start or taken[0]
        last = taken[-1]
        lives.append(Life(
            node, pid, taken[0].at_s, last.at_s, start.at_s if start else None,
            _growth(start.rss_bytes, last.rss_bytes) if start else None,
            _growth(start.open_files, last.open_files) if start else None,
            (base.rss_bytes, last.rss_bytes), (base.open_files, last.open_files)))
    grown = tuple(life for life in lives if life.judged and (
        (life.rss_growth or 0.0) > limit or (life.files_growth or 0.0) > limit))
    return Judgement(limit, warmup_s, min_span_s, tuple(lives), grown)


def write(path: Path, samples: Sequence[Sample], judgement: Judgement | None) -> None:
    """``resources.json``: every sample and, for a soak, the judgement."""
    document = {"schema_version": SCHEMA_VERSION,
                "samples": [asdict(s) for s in samples],
                "judgement": judgement.as_dict() if judgement else None}
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(document, indent=1))
    os.replace(tmp, path)


def summary_lines(judgement: Judgement) -> list[str]:
    """One line per life, for the console and the soak docs."""
    lines = []
    for life in judgement.lives:
        rss = f"RSS {life.rss_bytes[0] / 2**20:.0f}→{life.rss_bytes[1] / 2**20:.0f} MiB"
        files = f"open files {life.open_files[0]}→{life.open_files[1]}"
        if life.judged:
            verdict = (f"{rss} ({life.rss_growth:+.1%}), {files} ({life.files_growth:+.1%}) "
                       f"over {life.last_s - (life.judged_from_s or 0):.0f} s after warm-up")
        else:
            verdict = (f"{rss}, {files}; lived {life.last_s - life.first_s:.0f} s: too short "
                       f"to judge (warm-up {judgement.warmup_s:.0f} s, then "
                       f"{judgement.min_span_s:.0f} s)")
        lines.append(f"{life.node} pid {life.pid}: {verdict}")
    return lines
