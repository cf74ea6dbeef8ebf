"""A recipe's node as a real process: each way of telling it serves, its stop command, and a
node that dies before serving. The "broker" is a small Python program that reads the rendered
config file and listens where it says; what is under test is the harness's side."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from harness.cluster.errors import PeerStartError
from harness.cluster.kinds import allocate_ports, direct_wiring
from harness.cluster.recipe import load_recipe
from harness.cluster.recipe_kind import RecipeBroker, RecipeKind
from harness.net.ports import LOOPBACK, is_accepting

NODE = textwrap.dedent('''
    import signal, socket, sys, time
    config = dict(line.split(" ", 1) for line in open(sys.argv[1]).read().splitlines() if line)
    if config.get("die") == "yes":
        sys.exit(7)
    time.sleep(float(config.get("delay", "0")))
    server = socket.create_server(("127.0.0.1", int(config["port"])))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print("node", config["id"], "serving", flush=True)
    while True:
        time.sleep(0.1)
''')

STOP = textwrap.dedent('''
    import os, signal, sys
    open(sys.argv[2], "a").write(f"stop command for pid {sys.argv[1]}\\n")
    os.kill(int(sys.argv[1]), signal.SIGTERM)
''')

RECIPE = '''
[broker]
name = "toy"
command = ["{python}", "{recipe_dir}/node.py", "{config_file}"]
zookeeper = false
peer_addressing = "advertised"
capabilities = ["process_faults"]
%(extra)s

[config]
file = "node.conf"
template = """
id {node_id}
port {client_port}
%(config)s
"""

[ready]
%(ready)s
'''


def _broker(tmp_path: Path, *, ready: str, extra: str = "", config: str = "",
            startup_timeout: float = 20.0) -> RecipeBroker:
    (tmp_path / "node.py").write_text(NODE)
    (tmp_path / "stop.py").write_text(STOP)
    recipe_path = tmp_path / "toy.toml"
    recipe_path.write_text(RECIPE % {"ready": ready, "extra": extra, "config": config})
    kind = RecipeKind(load_recipe(recipe_path))
    ports = allocate_ports(kind, [1])
    wiring = direct_wiring(ports, {1: LOOPBACK}, "")[1]
    return kind.new_broker(tmp_path / "broker-1", port=ports[1].client,
                           properties=kind.wiring_properties(wiring),
                           startup_timeout=startup_timeout, stop_timeout=5.0)


@pytest.mark.parametrize("ready", ['check = "port"',
                                   'check = "log-line"\nlog_line = "node \\\\d+ serving"'])
def test_a_node_is_started_when_it_serves_and_started_again_after_a_stop(tmp_path, ready):
    broker = _broker(tmp_path, ready=ready, config="delay 1")
    try:
        broker.start()
        assert is_accepting(LOOPBACK, broker.port)
        assert (tmp_path / "broker-1" / "node.conf").read_text().startswith(
            f"id 1\nport {broker.port}\n")
        assert broker.stop() == 0
        assert not is_accepting(LOOPBACK, broker.port)
        broker.start()  # the log already holds a ready line: only this start's part counts
        assert is_accepting(LOOPBACK, broker.port)
        assert broker.log_path == tmp_path / "broker-1" / "toy.log"
        assert broker.log_path.read_text().count("node 1 serving") == 2
    finally:
        broker.stop()


def test_a_node_that_exits_before_serving_is_reported_with_its_exit_code(tmp_path):
    broker = _broker(tmp_path, ready='check = "port"', config="die yes")
    with pytest.raises(PeerStartError, match=r"exit code 7.*process exited before"):
        broker.start()
    assert not broker.is_running()


def test_a_node_that_never_serves_times_out_naming_the_ready_line(tmp_path):
    broker = _broker(tmp_path, ready='check = "log-line"\nlog_line = "never printed"',
                     startup_timeout=2.0)
    with pytest.raises(PeerStartError, match="a line matching 'never printed'"):
        broker.start()
    assert not broker.is_running()


def test_the_stop_command_stops_the_node(tmp_path):
    marker = tmp_path / "stopped.txt"
    broker = _broker(tmp_path, ready='check = "port"',
                     extra=f'stop_command = ["{{python}}", "{{recipe_dir}}/stop.py", "{{pid}}", '
                           f'"{marker}"]')
    broker.start()
    pid = broker.pid
    try:
        broker.pause()  # a paused node is continued so it can act on the stop command
        assert broker.stop() == 0
    finally:
        broker.stop()
    assert marker.read_text() == f"stop command for pid {pid}\n"
