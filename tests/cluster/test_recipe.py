"""Recipes: parsing, validation (every mistake names its file and key), placeholder rendering,
and the proof that the shipped recipes configure a node exactly as the built-in kinds do."""

from __future__ import annotations

import fnmatch
import tomllib
from pathlib import Path

import pytest

from harness.cluster.apache_kafka import ApacheKafkaKind, KafkaDistribution
from harness.cluster.kinds import (
    ZOOKEEPER_MODE,
    BrokerPorts,
    BrokerWiring,
    Capability,
)
from harness.cluster.options import check_options
from harness.cluster.recipe import (
    PeerAddressing,
    PeerList,
    RecipeError,
    builtin_recipe,
    builtin_recipe_names,
    load_recipe,
    parse_recipe,
    render,
    render_peer_list,
)
from harness.cluster.recipe_kind import (
    DockerRefused,
    RecipeKind,
    node_values,
    render_command,
    render_files,
    split_properties,
    wiring_values,
)
from harness.cluster.reference_kind import REFERENCE
from harness.cluster.spec import ClusterSpec
from harness.cluster.targets import start_target

ROOT = Path(__file__).resolve().parents[2]

MINIMAL = '''
[broker]
name = "mine"
command = ["{recipe_dir}/my-broker", "--config", "{config_file}"]
zookeeper = true
peer_addressing = "per-destination"
capabilities = ["faults", "process_faults"]

[config]
file = "my.conf"
template = """
id {node_id}
listen {host}:{client_port}
zk {zookeeper_connect}
peers {peers}
"""

[lists.peers]
entry = "{peer_id}@{dial}"
'''


def _wiring(me: int, *, listener_per_peer: bool) -> BrokerWiring:
    """Broker ``me`` of three, every address distinct, as a proxied cluster would wire it."""
    ids = [1, 2, 3]
    inbound = ({source: 30000 + 10 * me + source for source in ids} if listener_per_peer
               else dict.fromkeys(ids, 30000 + 10 * me))
    return BrokerWiring(
        broker_id=me, host="127.0.0.1", ports=BrokerPorts(30000 + 10 * me, inbound),
        advertised_client=f"127.0.0.1:{40000 + me}",
        dial={j: f"127.0.0.1:{50000 + 10 * me + j}" for j in ids},
        dialled_at={i: f"127.0.0.1:{50000 + 10 * i + me}" for i in ids},
        zookeeper_connect=f"127.0.0.1:{60000 + me}")


def _properties(text: str) -> dict[str, str]:
    pairs = (line.split("=", 1) for line in text.splitlines() if "=" in line)
    return {key: value for key, value in pairs}


def _rendered_config(recipe_name: str, wiring: BrokerWiring, tmp_path: Path) -> dict[str, str]:
    """The configuration file a shipped recipe writes for ``wiring``, parsed (later keys win,
    as in a Java properties file)."""
    kind = RecipeKind(builtin_recipe(recipe_name))
    merged = ClusterSpec(brokers=3).server_properties(
        wiring.broker_id, wiring.zookeeper_connect, kind.wiring_properties(wiring))
    files = render_files(kind.recipe, node_values(kind.recipe, merged, tmp_path))
    return _properties(files[kind.recipe.config_file])


# --- the shipped recipes --------------------------------------------------------------------

def test_the_shipped_recipes_parse_and_are_package_data():
    assert builtin_recipe_names() == ["apache-kafka-3.9", "reference"]
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = pyproject["tool"]["setuptools"]["package-data"]["harness.recipes"]
    for name in builtin_recipe_names():
        recipe = builtin_recipe(name)
        assert recipe.capabilities == ZOOKEEPER_MODE, name
        assert any(fnmatch.fnmatch(f"{name}.toml", pattern) for pattern in patterns), name


def test_the_reference_recipe_wires_a_node_as_the_reference_kind_does(tmp_path):
    for me in (1, 2, 3):
        wiring = _wiring(me, listener_per_peer=False)
        config = _rendered_config("reference", wiring, tmp_path)
        for key, value in REFERENCE.wiring_properties(wiring).items():
            assert config[key] == str(value), key
        assert config["broker.id"] == str(me)
        assert config["log.dirs"] == str(tmp_path / "data")


def test_the_kafka_recipe_wires_a_node_as_the_apache_kafka_kind_does(tmp_path):
    recipe = builtin_recipe("apache-kafka-3.9")
    assert recipe.peer_addressing is PeerAddressing.LISTENER_PER_SOURCE
    assert RecipeKind(recipe).listener_per_peer
    built_in = ApacheKafkaKind(KafkaDistribution(tmp_path, "3.9.2"))
    wiring = _wiring(2, listener_per_peer=True)
    config = _rendered_config("apache-kafka-3.9", wiring, tmp_path)
    for key in ("listeners", "advertised.listeners", "listener.security.protocol.map",
                "inter.broker.listener.name", "zookeeper.connect"):
        assert config[key] == str(built_in.wiring_properties(wiring)[key]), key
    # Broker 3 reaches broker 2 on its own listener, advertised at the 3->2 pair's address.
    assert "BROKER3://127.0.0.1:50032" in config["advertised.listeners"]


def test_the_kafka_recipe_command_runs_kafka_on_the_vendored_jars(tmp_path):
    recipe = builtin_recipe("apache-kafka-3.9")
    wiring = _wiring(1, listener_per_peer=True)
    values = node_values(recipe, RecipeKind(recipe).wiring_properties(wiring), tmp_path)
    command = render_command(recipe, values)
    assert command[0] == "java" and command[-2:] == ["kafka.Kafka",
                                                     str(tmp_path / "server.properties")]
    assert command[command.index("-cp") + 1].endswith("/kafka-3.9/libs/*")
    assert "log4j.rootLogger=INFO, stdout" in render_files(recipe, values)["log4j.properties"]


# --- rendering --------------------------------------------------------------------------------

def test_wiring_travels_through_the_property_map_and_back():
    wiring = _wiring(3, listener_per_peer=True)
    merged = {"broker.id": 3, **wiring_values(wiring), "group.max.size": 6}
    node, peers, settings = split_properties(merged)
    assert settings == {"broker.id": 3, "group.max.size": 6}
    assert node["node_id"] == 3 and node["advertised_port"] == "40003"
    assert node["zookeeper_connect"] == "127.0.0.1:60003"
    assert sorted(peers) == [1, 2, 3]
    assert peers[1]["dial"] == "127.0.0.1:50031" and peers[1]["inbound_port"] == 30031
    assert peers[1]["dialled_at"] == "127.0.0.1:50013"


def test_properties_and_env_reach_the_node(tmp_path):
    recipe = parse_recipe(MINIMAL.replace('zookeeper = true', 'zookeeper = true\n'
                                          'env = { MY_ID = "node-{node_id}" }')
                          .replace("peers {peers}", "peers {peers}\n{properties}"),
                          directory=tmp_path)
    merged = {"group.max.size": 6, **wiring_values(_wiring(2, listener_per_peer=False))}
    values = node_values(recipe, merged, tmp_path / "broker-2")
    config = render_files(recipe, values)["my.conf"]
    assert "id 2\nlisten 127.0.0.1:30020\nzk 127.0.0.1:60002\n" in config
    assert "peers 1@127.0.0.1:50021,2@127.0.0.1:50022,3@127.0.0.1:50023\n" in config
    assert config.endswith("group.max.size=6\n\n")
    assert render_command(recipe, values) == [
        "env", "MY_ID=node-2", f"{tmp_path}/my-broker", "--config",
        str(tmp_path / "broker-2" / "my.conf")]


def test_literal_braces_and_a_peer_list_without_the_node_itself():
    assert render("a {{b}} {c}", {"c": 1}) == "a {b} 1"
    peers = {j: {"peer_id": j, "dial": f"h:{j}"} for j in (1, 2, 3)}
    listed = PeerList("others", "{peer_id}/{dial}", separator=";", include_self=False)
    assert render_peer_list(listed, {}, peers, node_id=2) == "1/h:1;3/h:3"


def test_a_recipe_target_refuses_docker_and_kernel_without_zookeeper(tmp_path):
    path = tmp_path / "mine.toml"
    path.write_text(MINIMAL)
    with pytest.raises(ValueError, match="local backend only"):
        check_options("recipe", None, 3, "proxy", "docker", recipe=load_recipe(path))
    check_options("recipe", None, 3, "kernel", "local", recipe=load_recipe(path))  # ZooKeeper
    without = tmp_path / "without.toml"
    without.write_text(MINIMAL.replace("zookeeper = true", "zookeeper = false"))
    with pytest.raises(ValueError, match="proxy network mechanism only"):
        check_options("recipe", None, 3, "kernel", "local", recipe=load_recipe(without))
    broken = tmp_path / "broken.toml"
    broken.write_text(MINIMAL.replace('"mine"', '"Mine"'))
    with pytest.raises(RecipeError, match="broken.toml: broker.name"):
        start_target("recipe", brokers=1, recipe=broken, run_dir=tmp_path / "never")
    assert not (tmp_path / "never").exists()
    with pytest.raises(ValueError, match="needs a recipe file"):
        check_options("recipe", None, 3)
    with pytest.raises(ValueError, match="only for the recipe target"):
        check_options("reference", None, 3, recipe=load_recipe(path))
    with pytest.raises(DockerRefused, match="local backend only"):
        RecipeKind(load_recipe(path)).container_launch({}, "/config")


# --- validation: every mistake names its file and key --------------------------------------

BAD = [
    ("syntax", MINIMAL + "\n[broker\n", "(syntax)", ""),
    ("no broker table", MINIMAL.replace("[broker]", "[brokers]"), "brokers", "unknown key"),
    ("unknown broker key", MINIMAL.replace('name = "mine"', 'name = "mine"\nnmae = "x"'),
     "broker.nmae", "unknown key"),
    ("upper-case name", MINIMAL.replace('"mine"', '"Mine"'), "broker.name", "lower-case"),
    ("command a string", MINIMAL.replace('command = [', 'command = "x" #'), "broker.command",
     "list"),
    ("misspelt placeholder", MINIMAL.replace("id {node_id}", "id {nodeid}"), "config.template",
     "unknown placeholder {nodeid}"),
    ("format spec", MINIMAL.replace("id {node_id}", "id {node_id:03}"), "config.template",
     "not a placeholder"),
    ("unbalanced brace", MINIMAL.replace("id {node_id}", "id {node_id"), "config.template",
     "literal brace"),
    ("properties in the command", MINIMAL.replace('"--config"', '"{properties}"'),
     "broker.command[1]", "unknown placeholder {properties}"),
    ("pid in the config", MINIMAL.replace("id {node_id}", "id {pid}"), "config.template",
     "unknown placeholder {pid}"),
    ("unknown capability", MINIMAL.replace('"faults", ', '"fault", '), "broker.capabilities",
     "'fault' is not a capability"),
    ("no capabilities", MINIMAL.replace('capabilities = ["faults", "process_faults"]', ''),
     "broker.capabilities", "missing"),
    ("zookeeper claimed without one", MINIMAL.replace('zookeeper = true', 'zookeeper = false')
     .replace('"faults", ', '"faults", "zookeeper", '), "broker.capabilities",
     "no ZooKeeper to read"),
    ("faults claimed with advertised addressing",
     MINIMAL.replace('"per-destination"', '"advertised"'), "broker.capabilities",
     "cannot be cut alone"),
    ("per-destination without a dial list", MINIMAL.replace("{peer_id}@{dial}", "{peer_id}"),
     "broker.peer_addressing", "{dial}"),
    ("a dial list nobody reads", MINIMAL.replace("peers {peers}", "peers none"),
     "broker.peer_addressing", "{dial}"),
    ("listener-per-source without listeners",
     MINIMAL.replace('"per-destination"', '"listener-per-source"'), "broker.peer_addressing",
     "{inbound_port}"),
    ("unknown addressing", MINIMAL.replace('"per-destination"', '"mesh"'),
     "broker.peer_addressing", "'mesh' is not one of"),
    ("zookeeper never told", MINIMAL.replace("zk {zookeeper_connect}", "zk none"),
     "broker.zookeeper", "never told"),
    ("config file in a directory", MINIMAL.replace('"my.conf"', '"conf/my.conf"'),
     "config.file", "plain file name"),
    ("unknown peer placeholder", MINIMAL.replace("{peer_id}@{dial}", "{peer}@{dial}"),
     "lists.peers.entry", "unknown placeholder {peer}"),
    ("list named as a placeholder", MINIMAL.replace("[lists.peers]", "[lists.host]"),
     "lists.host", "placeholder of the harness"),
    ("log-line without a pattern", MINIMAL + '\n[ready]\ncheck = "log-line"\n',
     "ready.log_line", "missing"),
    ("log-line not a regex", MINIMAL + '\n[ready]\ncheck = "log-line"\nlog_line = "("\n',
     "ready.log_line", "not a regular expression"),
    ("a pattern for the port check", MINIMAL + '\n[ready]\ncheck = "port"\nlog_line = "x"\n',
     "ready.log_line", "only used with"),
    ("unknown check", MINIMAL + '\n[ready]\ncheck = "ping"\n', "ready.check", "'ping'"),
    ("exit codes not integers", MINIMAL.replace('zookeeper = true',
                                                'zookeeper = true\nclean_exit_codes = ["0"]'),
     "broker.clean_exit_codes", "integers"),
]


@pytest.mark.parametrize(("text", "key", "problem"), [case[1:] for case in BAD],
                         ids=[case[0] for case in BAD])
def test_a_bad_recipe_is_refused_naming_its_file_and_key(tmp_path, text, key, problem):
    path = tmp_path / "mine.toml"
    path.write_text(text)
    with pytest.raises(RecipeError) as caught:
        load_recipe(path)
    assert caught.value.key == key
    assert problem in caught.value.problem
    assert str(caught.value).startswith(f"{path}: {key}: ")


def test_the_minimal_recipe_itself_is_valid(tmp_path):
    recipe = parse_recipe(MINIMAL, "mine.toml", directory=tmp_path)
    assert recipe.capabilities == {Capability.FAULTS, Capability.PROCESS_FAULTS}
    assert not recipe.listener_per_peer and recipe.version == "unknown"


def test_a_missing_file_names_itself(tmp_path):
    with pytest.raises(RecipeError, match=r"no-such\.toml: \(file\): cannot read it"):
        load_recipe(tmp_path / "no-such.toml")
    with pytest.raises(RecipeError, match="no such shipped recipe"):
        builtin_recipe("no-such")


def test_the_example_in_the_docs_is_a_valid_recipe_and_renders_as_shown(tmp_path):
    docs = (ROOT / "docs" / "recipes.md").read_text()
    example = docs.split("```toml\n# my-broker.toml\n", 1)[1].split("```", 1)[0]
    recipe = parse_recipe(example, "docs/recipes.md", directory=tmp_path)
    assert recipe.peer_addressing is PeerAddressing.PER_DESTINATION and not recipe.zookeeper
    wiring = _wiring(2, listener_per_peer=False)
    values = node_values(recipe, RecipeKind(recipe).wiring_properties(wiring), tmp_path)
    config = render_files(recipe, values)["node.toml"]
    assert tomllib.loads(config) == {
        "node_id": 2, "data_dir": str(tmp_path / "data"), "listen": "127.0.0.1:30020",
        "advertise": "127.0.0.1:40002", "cluster_size": 3,
        "peers": {"1": "127.0.0.1:50021", "3": "127.0.0.1:50023"}}
    assert render_command(recipe, values)[:2] == ["env", "RUST_LOG=info"]
