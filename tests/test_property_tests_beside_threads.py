"""A property test must not fail because another thread of the process uses `random`.

Hypothesis checks that a strategy leaves the global `random` state as it found it, and warns
(an error here: pyproject.toml's filterwarnings) when it changed during a draw. A connected
kazoo client's thread draws from that state on every turn of its loop, so a property test of
the reference broker's log failed whenever a cluster lived in the same process — a shared
module cluster, the plugin's session target, or any of them in a pytest-xdist worker. The
warning is ignored for that reason; this test shows the case it covers, and fails if the
filter goes.
"""

from __future__ import annotations

import random
import threading

from hypothesis import given, settings
from hypothesis import strategies as st


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(), min_size=50, max_size=200))
def _drawn_while_another_thread_uses_random(values: list[int]) -> None:
    assert len(values) >= 50


def test_a_property_test_passes_while_another_thread_draws_from_random() -> None:
    stop = threading.Event()
    draws = 0

    def spin() -> None:
        nonlocal draws
        while not stop.is_set():
            random.randint(1, 40)  # what kazoo's connection loop does on every turn
            draws += 1

    thread = threading.Thread(target=spin, daemon=True)
    thread.start()
    try:
        _drawn_while_another_thread_uses_random()
    finally:
        stop.set()
        thread.join()
    assert draws > 0
