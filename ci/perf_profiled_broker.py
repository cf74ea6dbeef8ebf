"""Runs the reference broker (``python ci/perf_profiled_broker.py OUT_DIR -m reference_broker
server.properties``) with cProfile switched on and off by signals, so the perf benchmark can
profile exactly one scenario of a broker that is already serving.

SIGUSR1 starts a fresh profile; SIGUSR2 stops it and writes ``OUT_DIR/<n>.prof`` (n = 1, 2, …).
Why not py-spy: on this machine it cannot attach to a running interpreter ("Failed to find
python version"), and a profile of the whole process life would mix set-up into the scenario.
cProfile sees the main thread only — where the broker's event loop serves every request — and
adds its own cost per call, which inflates small functions; the ranking is what to read.
"""

from __future__ import annotations

import cProfile
import os
import runpy
import signal
import sys
from pathlib import Path
from types import FrameType

out_dir = Path(sys.argv[1])
if sys.argv[2:4] != ["-m", "reference_broker"]:
    sys.exit("usage: perf_profiled_broker.py OUT_DIR -m reference_broker ARGS...")
state: dict[str, cProfile.Profile] = {}


def start(signum: int, frame: FrameType | None) -> None:
    state["profile"] = cProfile.Profile()
    state["profile"].enable()


def stop(signum: int, frame: FrameType | None) -> None:
    profile = state.pop("profile", None)
    if profile is not None:
        profile.disable()
        final = out_dir / f"{len(list(out_dir.glob('*.prof'))) + 1}.prof"
        profile.dump_stats(final.with_suffix(".tmp"))
        os.replace(final.with_suffix(".tmp"), final)  # whole, or not there yet


signal.signal(signal.SIGUSR1, start)
signal.signal(signal.SIGUSR2, stop)
sys.argv = ["reference_broker", *sys.argv[4:]]
runpy.run_module("reference_broker", run_name="__main__", alter_sys=True)
