"""`reference-broker server.properties [--override key=value ...]`.

Exit codes: 0 after a clean shutdown (SIGTERM/SIGINT), 2 for an invalid configuration
(one line naming the key, the value and what is allowed), 1 when the broker cannot start.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from pathlib import Path

from reference_broker.config import ConfigError, KafkaConfig, load


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="reference-broker",
                                     description="Kafka-compatible reference broker")
    parser.add_argument("config", type=Path, help="path to server.properties")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                        help="override a property (repeatable)")
    parser.add_argument("--log-level", default="INFO",
                        choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    return parser.parse_args(argv)


async def _serve(config: KafkaConfig) -> int:
    # Not at the top: importing the server (every request handler, kio's schemas) takes ~0.8 s,
    # which `--help` and a refused configuration (exit 2 in ~0.07 s) never need.
    from reference_broker.server.kafka_server import KafkaServer

    server = KafkaServer(config)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await server.startup()
    except Exception as exc:
        logging.getLogger("reference_broker").error("Broker could not start: %s", exc)
        await server.shutdown()
        return 1
    await stop.wait()
    await server.shutdown()
    return 0


def main(argv: list[str] | None = None) -> int:
    # A server never generates test data, yet kio registers a Hypothesis strategy for each of
    # its types whenever Hypothesis is importable (a development environment). In a fresh
    # working directory, as each broker's run directory is, Hypothesis then builds its Unicode
    # table there for kio's text strategy: 1.2 s of CPU at every such start (a 3-broker
    # cluster's start took 3.4 s instead of 1.1), and a .hypothesis directory left behind.
    # Marked absent before kio's first import, all of it is skipped; a process that has
    # Hypothesis loaded already keeps it.
    sys.modules.setdefault("hypothesis", None)  # type: ignore[arg-type]
    args = _parse_args(argv)
    logging.basicConfig(level=args.log_level, stream=sys.stderr,
                        format="[%(asctime)s] %(levelname)s %(name)s: %(message)s")
    overrides = {}
    for item in args.override:
        key, sep, value = item.partition("=")
        if not sep:
            print(f"--override expects KEY=VALUE, got {item!r}", file=sys.stderr)
            return 2
        overrides[key] = value
    if not args.config.is_file():
        print(f"Configuration file {args.config} does not exist", file=sys.stderr)
        return 2
    try:
        config = load(args.config, overrides)
    except ConfigError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    return asyncio.run(_serve(config))


if __name__ == "__main__":
    sys.exit(main())
