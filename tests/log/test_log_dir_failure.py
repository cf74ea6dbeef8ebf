"""The reference broker halts as Kafka does when its log dir's disk fails, and only then."""

from __future__ import annotations

import errno
import logging
from pathlib import Path
from typing import NoReturn

import pytest

from reference_broker.log import log_dir_failure
from reference_broker.log.log_dir_failure import LogDirFailureChannel, storage_error


class Halted(Exception):
    pass


def _halt(code: int) -> NoReturn:
    raise Halted(code)


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EIO, errno.EDQUOT, errno.EROFS])
def test_a_storage_error_halts_with_kafkas_words(tmp_path: Path, code: int,
                                                 caplog: pytest.LogCaptureFixture):
    channel = LogDirFailureChannel([tmp_path], halt=_halt)
    with caplog.at_level(logging.INFO), pytest.raises(Halted) as halted:
        channel.handle(OSError(code, "disk says no"), "appending")
    assert halted.value.args == (1,)
    assert f"Shutdown broker because all log dirs in {tmp_path} have failed" in caplog.text
    assert f"Stopping serving logs in dir {tmp_path}" in caplog.text


def test_a_storage_error_behind_another_exception_still_counts():
    try:
        try:
            raise OSError(errno.ENOSPC, "full")
        except OSError as inner:
            raise RuntimeError("checkpoint failed") from inner
    except RuntimeError as outer:
        assert storage_error(outer) is not None


@pytest.mark.parametrize("exc", [ConnectionResetError(errno.ECONNRESET, "reset"),
                                 OSError(errno.EBADF, "bad fd"), ValueError("bug")])
def test_other_errors_do_not_halt(tmp_path: Path, exc: Exception):
    assert LogDirFailureChannel([tmp_path], halt=_halt).handle(exc, "x") is False


def test_without_a_channel_nothing_halts():
    log_dir_failure.install(None)
    assert log_dir_failure.handle(OSError(errno.EIO, "io"), "reading") is False
