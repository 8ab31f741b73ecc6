"""docker/ checked against the code: no docker engine runs here, so the files are parsed.

compose.yaml: Kafka in KRaft mode (three brokers on three racks, replication
factor 3, fetches from the consumer's rack), topic creation with the partition
count the app declares, three workers in two of those racks with one standby,
the generator and the Spark report job. Dockerfile: slim, non-root, a
healthcheck on the web port, the package installed.
"""

from __future__ import annotations

import http.server
import importlib.util
import json
import os
import re
import shlex
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any
from unittest import mock

import click
import pytest
import yaml
from click.testing import CliRunner

from streamjoin.cli import main
from streamjoin.dev.broker import free_port
from streamjoin.faust.web import ASSIGNMENT_PATH

ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "docker"
COMPOSE = DOCKER / "compose.yaml"
DOCKERFILE = DOCKER / "Dockerfile"
CREATE_TOPICS = DOCKER / "create-topics.sh"


@cache
def compose() -> dict[str, Any]:
    doc = yaml.safe_load(COMPOSE.read_text())
    assert isinstance(doc, dict)
    return doc


def services() -> dict[str, dict[str, Any]]:
    return dict(compose()["services"])


def env_of(service: dict[str, Any]) -> dict[str, str]:
    """A service's environment as strings (compose accepts a mapping or KEY=VALUE list)."""
    raw = service.get("environment") or {}
    if isinstance(raw, list):
        raw = dict(item.split("=", 1) for item in raw)
    return {str(k): "" if v is None else str(v) for k, v in raw.items()}


def kafka_services() -> dict[str, dict[str, Any]]:
    return {
        n: s
        for n, s in services().items()
        if str(s.get("image", "")).startswith("apache/kafka") and "KAFKA_NODE_ID" in env_of(s)
    }


def worker_services() -> dict[str, dict[str, Any]]:
    return {n: s for n, s in services().items() if (s.get("command") or [None])[0] == "worker"}


def ads_partitions() -> int:
    values = {env_of(s)["ADS_PARTITIONS"] for s in worker_services().values()}
    assert len(values) == 1, f"workers disagree on ADS_PARTITIONS: {values}"
    return int(values.pop())


# -- the code's side -------------------------------------------------------------------


@cache
def source_text() -> str:
    files = [*(ROOT / "streamjoin").rglob("*.py"), *(ROOT / "examples").rglob("*.py")]
    return "\n".join(p.read_text() for p in files)


def variables_read_by_code() -> set[str]:
    """Names the code reads: quoted literals, plus the worker options' click envvars."""
    names = set(re.findall(r"[\"']((?:STREAMJOIN|ADS)_[A-Z0-9_]+)[\"']", source_text()))
    worker = main.commands["worker"]
    names |= {str(p.envvar) for p in worker.params if getattr(p, "envvar", None)}
    return names


#: variables set by compose that belong to work in progress: name -> module reading it
PENDING = {"ADS_ARCHIVE_DIR": "streamjoin.ads.archive"}


@cache
def app_topics(env_items: tuple[tuple[str, str], ...], archive_dir: str) -> dict[str, Any]:
    """Import the ad app with compose's ADS_* settings (in a subprocess) and list its topics."""
    code = """
import json, faust
from streamjoin.ads.app import create_app
app = create_app().app
from streamjoin.faust.kafka.metadata import declared_topics
external = set()
for agent in app.agents.values():
    ch = agent.channel
    if isinstance(ch, faust.TopicT) and not ch.internal and not ch.pattern:
        external.update(ch.topics)
joins = {}
for join in app.joins.values():
    external.update(t.get_topic_name() for t in join.outputs.values())
    external.add(join.dead_letters.get_topic_name())
    joins[join.name] = [join.config.left_topic, join.config.right_topic, join.config.partitions]
declared = declared_topics(app)
print(json.dumps({"external": sorted(external), "joins": joins,
                  "partitions": dict(declared.partitions),
                  "copartition": [list(g) for g in declared.copartition],
                  "topic_partitions": app.conf.topic_partitions}))
"""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ADS_", "STREAMJOIN_"))}
    env.update(dict(env_items))
    if "ADS_ARCHIVE_DIR" in env:
        env["ADS_ARCHIVE_DIR"] = archive_dir
    env["PYTHONPATH"] = str(ROOT)
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


@pytest.fixture(scope="module")
def ad_app(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    worker_env = env_of(next(iter(worker_services().values())))
    ads = tuple(sorted((k, v) for k, v in worker_env.items() if k.startswith("ADS_")))
    return app_topics(ads, str(tmp_path_factory.mktemp("archive")))


# -- environment variables --------------------------------------------------------------


def _compose_variables() -> set[str]:
    return {
        name
        for service in services().values()
        for name in env_of(service)
        if name.startswith(("STREAMJOIN_", "ADS_"))
    }


def test_every_streamjoin_and_ads_variable_set_in_compose_is_read_by_the_code() -> None:
    unread = sorted(_compose_variables() - variables_read_by_code() - set(PENDING))
    assert not unread, f"compose.yaml sets {unread} but no code reads them"


@pytest.mark.parametrize("name", sorted(PENDING))
def test_variables_of_work_in_progress_are_read_once_their_module_exists(name: str) -> None:
    if name not in _compose_variables():
        pytest.skip(f"compose.yaml does not set {name}")
    module = PENDING[name]
    if importlib.util.find_spec(module) is None:
        pytest.xfail(f"module {module} is missing: nothing reads {name} yet")
    assert name in variables_read_by_code(), f"{module} exists but no code reads {name}"


# -- commands ---------------------------------------------------------------------------


def _resolve(argv: list[str]) -> tuple[click.Command, list[str]]:
    """The streamjoin (sub)command *argv* names, and the arguments left for it."""
    command: click.Command = main
    rest = list(argv)
    while isinstance(command, click.Group) and rest and not rest[0].startswith("-"):
        sub = command.commands.get(rest[0])
        assert sub is not None, f"`streamjoin {' '.join(argv)}`: no sub-command {rest[0]!r}"
        command, rest = sub, rest[1:]
    return command, rest


def _options_of(command: click.Command) -> set[str]:
    return {o for p in command.params for o in [*p.opts, *p.secondary_opts] if o.startswith("-")}


def test_workers_run_streamjoin_worker_configured_only_by_valid_environment() -> None:
    from streamjoin.worker.run import WorkerOptions

    assert len(worker_services()) == 3
    for name, service in worker_services().items():
        command, rest = _resolve(list(service["command"]))
        assert command is main.commands["worker"]
        assert not rest, f"{name}: configure the worker by STREAMJOIN_* variables"
        seen: list[WorkerOptions] = []
        clean = {k: v for k, v in os.environ.items() if not k.startswith("STREAMJOIN_")}
        with (
            mock.patch.dict(os.environ, clean, clear=True),
            mock.patch(
                "streamjoin.worker.run.run_worker", lambda o, seen=seen: seen.append(o) or 0
            ),
        ):
            result = CliRunner().invoke(main, service["command"], env=env_of(service))
        assert result.exit_code == 0, f"{name}: {result.output}"
        options = seen[0]
        options.security.check()
        assert options.app == "streamjoin.ads.app:app"
        assert options.web is True
        assert options.web_bind == "0.0.0.0"  # explicit: the healthcheck and peers reach it
        assert options.standby_replicas == 1
        assert options.replication_factor == 3
        assert options.datadir is not None


def test_dockerfile_entrypoint_and_default_command_are_streamjoin_worker() -> None:
    worker = stage("worker")
    assert json.loads(worker["ENTRYPOINT"][-1]) == ["streamjoin"]
    command, rest = _resolve(json.loads(worker["CMD"][-1]))
    assert command is main.commands["worker"] and not rest
    # the image's own defaults name a real app and real options
    assert "STREAMJOIN_APP=streamjoin.ads.app:app" in " ".join(worker["ENV"])


def _check_spark_command(argv: list[str]) -> None:
    if importlib.util.find_spec("streamjoin.ads.spark") is None:
        pytest.xfail("streamjoin.ads.spark is missing: `streamjoin spark run` cannot be checked")
    if "spark" not in main.commands:
        pytest.xfail("streamjoin.cli does not register streamjoin.cli.spark's command yet")
    command, rest = _resolve(argv)
    assert command.name == "run", argv
    flags = [a for a in rest if a.startswith("--")]
    unknown = sorted(set(flags) - _options_of(command))
    assert not unknown, f"`streamjoin {' '.join(argv)}`: no such options {unknown}"
    required = {p.opts[-1] for p in command.params if p.required}
    assert required <= set(flags)


def test_report_service_runs_streamjoin_spark_run_on_the_workers_archive() -> None:
    report = services()["report"]
    assert report.get("profiles") == ["report"]
    assert report["build"]["target"] == "report"
    argv = list(report["command"])
    archive = argv[argv.index("--archive") + 1]
    for service in worker_services().values():
        assert env_of(service)["ADS_ARCHIVE_DIR"] == archive
        assert any(
            str(v).startswith("archive:") and str(v).endswith(archive) for v in service["volumes"]
        )
    assert any(str(v) == f"archive:{archive}" for v in report["volumes"])
    _check_spark_command(argv)


def test_report_stage_default_command_is_streamjoin_spark_run() -> None:
    _check_spark_command(json.loads(stage("report")["CMD"][-1]))


def test_report_image_installs_the_spark_extra_of_pyproject() -> None:
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"].get(
        "optional-dependencies", {}
    )
    report = " ".join(stage("report")["RUN"])
    assert "openjdk-17-jre" in report
    if "spark" not in extras:
        pytest.xfail("pyproject.toml has no spark extra yet (module streamjoin.ads.spark)")
    assert any(d.startswith("pyspark") for d in extras["spark"])
    assert "[spark]" in report


def test_generator_service_runs_the_generator_against_the_apps_topics() -> None:
    if str(ROOT) not in sys.path:  # the examples are run from the repository root
        sys.path.insert(0, str(ROOT))
    from streamjoin.ads.generator import _parser

    generator = services()["generator"]
    entry = list(generator["entrypoint"])
    assert entry[:2] == ["python", "-m"]
    assert importlib.util.find_spec(entry[2]) is not None
    assert entry[2] == "streamjoin.ads.generator"
    args = _parser().parse_args([str(a) for a in generator["command"]])
    assert args.partitions == ads_partitions()
    assert not args.create_topics  # the topics service creates them with replication 3
    assert args.speed > 0
    hosts = {h.split(":")[0] for h in args.bootstrap.split(",")}
    assert hosts <= set(kafka_services())
    prefix = env_of(next(iter(worker_services().values()))).get("ADS_TOPIC_PREFIX", "")
    assert args.topic_prefix == prefix


# -- Kafka ------------------------------------------------------------------------------


def test_three_kafka_brokers_in_kraft_mode() -> None:
    brokers = kafka_services()
    assert len(brokers) == 3
    ids = {env_of(s)["KAFKA_NODE_ID"] for s in brokers.values()}
    assert len(ids) == 3
    cluster_ids = {env_of(s)["CLUSTER_ID"] for s in brokers.values()}
    assert len(cluster_ids) == 1
    for name, service in brokers.items():
        env = env_of(service)
        assert not [k for k in env if "ZOOKEEPER" in k], name
        assert set(env["KAFKA_PROCESS_ROLES"].split(",")) == {"broker", "controller"}
        voters = dict(v.split("@", 1) for v in env["KAFKA_CONTROLLER_QUORUM_VOTERS"].split(","))
        assert set(voters) == ids
        assert {v.split(":")[0] for v in voters.values()} == set(brokers)
        assert env["KAFKA_ADVERTISED_LISTENERS"] == f"PLAINTEXT://{name}:9092"
        assert "healthcheck" in service
        assert any(str(v).endswith(":/var/lib/kafka/data") for v in service["volumes"])


def test_replication_factor_three_everywhere() -> None:
    for name, service in kafka_services().items():
        env = env_of(service)
        for key in (
            "KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR",
            "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR",
            "KAFKA_DEFAULT_REPLICATION_FACTOR",
        ):
            assert env[key] == "3", (name, key)
        assert env["KAFKA_MIN_INSYNC_REPLICAS"] == "2"
        assert env["KAFKA_TRANSACTION_STATE_LOG_MIN_ISR"] == "2"
    for service in worker_services().values():
        # changelogs and repartition topics, created by the workers through faust
        assert env_of(service)["STREAMJOIN_REPLICATION_FACTOR"] == "3"
    assert env_of(services()["topics"])["REPLICATION_FACTOR"] == "3"


def test_brokers_on_three_racks_serve_fetches_from_the_consumers_rack() -> None:
    racks = [env_of(s).get("KAFKA_BROKER_RACK") for s in kafka_services().values()]
    assert None not in racks and len(set(racks)) == 3
    for name, service in kafka_services().items():
        selector = env_of(service).get("KAFKA_REPLICA_SELECTOR_CLASS")
        assert selector == "org.apache.kafka.common.replica.RackAwareReplicaSelector", name
    for name, service in worker_services().items():
        # a worker's rack is a brokers' rack: it fetches from the replica there
        assert env_of(service)["STREAMJOIN_RACK"] in racks, name


def test_every_bootstrap_address_is_a_broker_of_the_file() -> None:
    brokers = set(kafka_services())
    for service in worker_services().values():
        urls = env_of(service)["STREAMJOIN_BROKER"].split(";")
        assert {u.removeprefix("kafka://").split(":")[0] for u in urls} == brokers
    topics = env_of(services()["topics"])["BOOTSTRAP"].split(",")
    assert {t.split(":")[0] for t in topics} == brokers


# -- topic creation ---------------------------------------------------------------------


STUB = """#!/bin/sh
echo "$*" >> "$STUB_LOG"
case "$*" in
  *--describe*)
    topic=$(echo "$*" | sed -n 's/.*--topic \\([^ ]*\\).*/\\1/p')
    printf 'Topic: %s\\tTopicId: x\\tPartitionCount: %s\\tReplicationFactor: 3\\n' \\
        "$topic" "${STUB_COUNT:-$ADS_PARTITIONS}"
    ;;
esac
"""


def _run_create_topics(
    tmp_path: Path, **extra: str
) -> tuple[subprocess.CompletedProcess[str], list[list[str]]]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    stub = bin_dir / "kafka-topics.sh"
    stub.write_text(STUB)
    stub.chmod(stub.stat().st_mode | stat.S_IEXEC)
    log = tmp_path / "calls.log"
    log.write_text("")
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "KAFKA_BIN": str(bin_dir),
        "STUB_LOG": str(log),
    }
    env.update(env_of(services()["topics"]))
    env.update(extra)
    done = subprocess.run(
        ["/bin/sh", str(CREATE_TOPICS)], capture_output=True, text=True, env=env, timeout=60
    )
    return done, [shlex.split(line) for line in log.read_text().splitlines()]


def _flag(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def test_topics_service_runs_the_script_after_healthy_brokers() -> None:
    topics = services()["topics"]
    entry = list(topics["entrypoint"])
    mounted = {str(v).split(":")[1]: str(v).split(":")[0] for v in topics["volumes"]}
    assert entry[-1] in mounted and (DOCKER / mounted[entry[-1]]).resolve() == CREATE_TOPICS
    for broker in kafka_services():
        assert topics["depends_on"][broker]["condition"] == "service_healthy"
    for service in [*worker_services().values(), services()["generator"]]:
        assert service["depends_on"]["topics"]["condition"] == "service_completed_successfully"


def test_topic_creation_makes_every_topic_of_the_app_with_its_declared_count(
    tmp_path: Path, ad_app: dict[str, Any]
) -> None:
    done, calls = _run_create_topics(tmp_path)
    assert done.returncode == 0, done.stderr
    created = {_flag(c, "--topic"): c for c in calls if "--create" in c}
    partitions = ads_partitions()
    assert env_of(services()["topics"])["ADS_PARTITIONS"] == str(partitions)
    # the app's topics that no worker declares itself (internal ones are declared by faust)
    assert set(created) == set(ad_app["external"])
    for topic, argv in created.items():
        assert _flag(argv, "--partitions") == str(partitions), topic
        assert _flag(argv, "--replication-factor") == "3", topic
    # the app declares the same count: joins, co-partition groups, every topic it declares
    assert ad_app["topic_partitions"] == partitions
    for left, right, count in ad_app["joins"].values():
        assert count == partitions
        assert _flag(created[left], "--partitions") == _flag(created[right], "--partitions")
    for group in ad_app["copartition"]:
        assert {ad_app["partitions"][t] for t in group} == {partitions}
    for topic in set(created) & set(ad_app["partitions"]):
        assert ad_app["partitions"][topic] == partitions


def test_topic_creation_stops_on_a_topic_with_another_count(tmp_path: Path) -> None:
    done, _ = _run_create_topics(tmp_path, STUB_COUNT="3")
    assert done.returncode == 1
    assert "has 3 partitions but ADS_PARTITIONS is" in done.stderr


# -- workers ----------------------------------------------------------------------------


def test_three_workers_in_two_racks_with_one_standby() -> None:
    envs = [env_of(s) for s in worker_services().values()]
    racks = [e["STREAMJOIN_RACK"] for e in envs]
    assert len(envs) == 3
    assert len(set(racks)) == 2
    assert {e["STREAMJOIN_STANDBY_REPLICAS"] for e in envs} == {"1"}
    assert len({e["STREAMJOIN_INSTANCE_ID"] for e in envs}) == 3
    assert len({e["STREAMJOIN_HOST_LABEL"] for e in envs}) == 3


def test_every_worker_has_its_own_data_volume_and_web_port() -> None:
    declared = set(compose().get("volumes") or {})
    volumes, ports = [], []
    for name, service in worker_services().items():
        env = env_of(service)
        mounts = {str(v).split(":")[1]: str(v).split(":")[0] for v in service["volumes"]}
        volume = mounts[env["STREAMJOIN_DATADIR"]]
        assert volume in declared, f"{name}: {volume} is not a named volume"
        volumes.append(volume)
        port = env["STREAMJOIN_WEB_PORT"]
        ports.append(port)
        assert env["STREAMJOIN_WEB_HOST"] == name  # what the other workers route to
        assert env["STREAMJOIN_WEB_BIND"] == "0.0.0.0"
        # published to the host's loopback only
        assert f"127.0.0.1:{port}:{port}" in [str(p) for p in service.get("ports", [])]
    assert len(set(volumes)) == 3
    assert len(set(ports)) == 3


# -- monitoring: Prometheus and Grafana (tests/docs/test_monitoring.py checks their files) --

MONITORING = ("prometheus", "grafana")


def _mounts(service: dict[str, Any]) -> list[tuple[str, str, list[str]]]:
    """A service's volumes as (source, target, options), short syntax."""
    found = []
    for volume in service.get("volumes") or []:
        source, target, *options = str(volume).split(":")
        found.append((source, target, options))
    return found


def test_prometheus_and_grafana_run_pinned_images_on_loopback_ports() -> None:
    for name, image, port in (
        ("prometheus", "prom/prometheus", "9090"),
        ("grafana", "grafana/grafana", "3000"),
    ):
        service = services()[name]
        repository, _, tag = str(service["image"]).partition(":")
        assert repository == image, name
        # pinned: an exact version, not latest or a moving major tag
        assert re.fullmatch(r"v?\d+\.\d+\.\d+", tag), f"{name}: pin the image, not {tag!r}"
        assert [str(p) for p in service["ports"]] == [f"127.0.0.1:{port}:{port}"], name


def test_monitoring_mounts_are_files_of_the_repository_read_only() -> None:
    declared = set(compose().get("volumes") or {})
    for name in MONITORING:
        binds = 0
        for source, target, options in _mounts(services()[name]):
            if source.startswith("."):
                path = (DOCKER / source).resolve()
                assert path.exists(), f"{name} mounts {source}, which does not exist"
                assert path.is_relative_to(DOCKER), f"{name} mounts {source} from outside docker/"
                assert options == ["ro"], f"{name}: mount {source} read-only"
                binds += 1
            else:
                assert source in declared, f"{name}: {source} is not a named volume"
                assert target.startswith("/"), name
        assert binds, f"{name} mounts no configuration"


def test_prometheus_reads_its_mounted_config_and_rules() -> None:
    prometheus = services()["prometheus"]
    mounted = {t: (DOCKER / s).resolve() for s, t, _ in _mounts(prometheus) if s.startswith(".")}
    config_flag = next(a for a in prometheus["command"] if a.startswith("--config.file="))
    config_path = config_flag.split("=", 1)[1]
    assert mounted[config_path] == DOCKER / "prometheus" / "prometheus.yml"
    config = yaml.safe_load(mounted[config_path].read_text())
    for rule_file in config["rule_files"]:
        # relative rule files are resolved against the config file's directory
        target = str(Path(config_path).parent / rule_file)
        assert target in mounted, f"{rule_file} is not mounted beside the config"
        assert mounted[target] == DOCKER / "prometheus" / rule_file
    storage = next(a for a in prometheus["command"] if a.startswith("--storage.tsdb.path="))
    assert storage.split("=", 1)[1] in {t for _, t, _ in _mounts(prometheus)}


def test_grafana_provisions_the_datasource_and_the_dashboards() -> None:
    grafana = services()["grafana"]
    mounted = {t: (DOCKER / s).resolve() for s, t, _ in _mounts(grafana) if s.startswith(".")}
    provisioning = "/etc/grafana/provisioning"
    assert mounted[f"{provisioning}/datasources"] == DOCKER / "grafana/provisioning/datasources"
    assert mounted[f"{provisioning}/dashboards"] == DOCKER / "grafana/provisioning/dashboards"
    providers = [
        p
        for f in sorted((DOCKER / "grafana/provisioning/dashboards").glob("*.yml"))
        for p in yaml.safe_load(f.read_text())["providers"]
    ]
    assert providers
    for provider in providers:
        folder = mounted[provider["options"]["path"]]
        assert list(folder.glob("*.json")), f"no dashboard in {folder}"
    home = env_of(grafana).get("GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH")
    if home:
        directory, _, file = home.rpartition("/")
        assert (mounted[directory] / file).is_file(), home
    assert "prometheus" in grafana["depends_on"]


def test_workers_serve_metrics_on_the_web_server() -> None:
    # /metrics is on the worker's web server: it must be on and reachable from the
    # prometheus container (not loopback only)
    for name, service in worker_services().items():
        env = env_of(service)
        assert env["STREAMJOIN_WEB"] == "true", name
        assert env["STREAMJOIN_WEB_BIND"] == "0.0.0.0", name


# -- Dockerfile -------------------------------------------------------------------------


@cache
def stages() -> dict[str, dict[str, list[str]]]:
    """Dockerfile instructions by stage name (continuation lines joined, comments dropped)."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    result: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        keyword, _, rest = line.partition(" ")
        keyword = keyword.upper()
        if keyword == "FROM":
            parts = rest.split()
            current = {"FROM": [parts[0]]}
            name = parts[2] if len(parts) >= 3 and parts[1].upper() == "AS" else "<default>"
            base = result.get(parts[0])
            if base is not None:  # FROM another stage inherits what it set
                current = {k: list(v) for k, v in base.items()}
                current["FROM"] = [parts[0]]
            result[name] = current
            continue
        current.setdefault(keyword, []).append(" ".join(rest.split()))
    return result


def stage(name: str) -> dict[str, list[str]]:
    return stages()[name]


def test_dockerfile_is_slim_python_311_without_java() -> None:
    args = {
        a.split("=", 1)[0]: a.split("=", 1)[1]
        for a in re.findall(r"^ARG (\S+=\S+)", DOCKERFILE.read_text(), re.M)
    }
    assert args["PYTHON_IMAGE"].startswith("python:3.11-slim")
    worker = stage("worker")
    assert worker["FROM"] == ["${PYTHON_IMAGE}"]
    everything = " ".join(" ".join(v) for v in worker.values()).lower()
    assert "jre" not in everything and "jdk" not in everything
    # the default target (last stage) is the worker
    assert stage("<default>")["FROM"] == ["worker"]


def test_dockerfile_runs_as_a_non_root_user() -> None:
    for name in ("worker", "report", "<default>"):
        user = stage(name)["USER"][-1].split(":")[0]
        assert user not in ("root", "0"), name


def test_dockerfile_installs_the_package_with_the_ad_app_in_it() -> None:
    build = stage("build")
    assert any("pip wheel" in r and r.rstrip().endswith(".") for r in build["RUN"])
    copied = " ".join(build["COPY"])
    assert "pyproject.toml" in copied and "streamjoin" in copied
    worker = stage("worker")
    assert any("pip install" in r and "streamjoin-*.whl" in r for r in worker["RUN"])
    # the ad app and generator are in the wheel: nothing from the checkout is needed
    assert not any(c.startswith("examples") for c in worker.get("COPY", ()))
    assert "/app" in worker["WORKDIR"]


def test_dockerignore_keeps_what_the_dockerfile_copies() -> None:
    lines = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert lines[0] == "*"
    kept = {line[1:] for line in lines if line.startswith("!")}
    sources = set()
    for instructions in stages().values():
        for copy in instructions.get("COPY", []):
            words = [w for w in copy.split() if not w.startswith("--")]
            if any(w.startswith("--from") for w in copy.split()):
                continue
            sources.update(words[:-1])
    assert sources
    for source in sources:
        assert source in kept, f".dockerignore leaves {source} out of the build context"
        assert (ROOT / source).exists()
    assert ".venv" not in kept and ".git" not in kept


@pytest.fixture
def web_port() -> Iterator[int]:
    """A tiny server answering like a worker's assignment page, on loopback."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            ok = self.path == ASSIGNMENT_PATH
            self.send_response(200 if ok else 404)
            self.end_headers()
            self.wfile.write(b'{"member": "worker-1"}' if ok else b"")

        def log_message(self, *args: Any) -> None:
            return

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def _healthcheck_argv() -> list[str]:
    check = stage("worker")["HEALTHCHECK"][-1]
    return list(json.loads(check[check.index("CMD ") + 4 :]))


def test_healthcheck_gets_the_assignment_page_on_the_web_port(web_port: int) -> None:
    argv = _healthcheck_argv()
    assert argv[0] == "python"
    assert ASSIGNMENT_PATH in argv[-1]
    env = dict(os.environ, STREAMJOIN_WEB_PORT=str(web_port))
    healthy = subprocess.run([sys.executable, *argv[1:]], env=env, capture_output=True, timeout=30)
    assert healthy.returncode == 0, healthy.stderr
    env["STREAMJOIN_WEB_PORT"] = str(free_port())  # nothing listens there
    sick = subprocess.run([sys.executable, *argv[1:]], env=env, capture_output=True, timeout=30)
    assert sick.returncode != 0


def test_image_defaults_bind_loopback_and_enable_the_web_server() -> None:
    env = " ".join(stage("worker")["ENV"])
    assert "STREAMJOIN_WEB_BIND=127.0.0.1" in env
    assert "STREAMJOIN_WEB=true" in env
    port = re.search(r"STREAMJOIN_WEB_PORT=(\d+)", env)
    assert port is not None and f"EXPOSE {port.group(1)}" in DOCKERFILE.read_text()
