"""The monitoring files in docker/ checked with the real promtool and against the catalogue.

docker/prometheus/alerts.yml and prometheus.yml pass ``promtool check`` (Debian's
Prometheus 2.42, unpacked by ``make prometheus``: tests/prometheus_bin.py), and
the alerts fire on the cases of tests/docs/alerts_test.yml (``promtool test
rules``). Every metric the alerts and the Grafana dashboard
(docker/grafana/dashboards/) query is in streamjoin/faust/metrics/catalog.py,
and every label they filter or group on is one that metric has, or one that
Prometheus adds (``app`` is on every metric). No worker runs here.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from doctext import DOCS, section
from prometheus_bin import promtool_binary

from streamjoin.faust.metrics.catalog import Metric, by_name

ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "docker"
ALERTS = DOCKER / "prometheus" / "alerts.yml"
PROMETHEUS_CONFIG = DOCKER / "prometheus" / "prometheus.yml"
DASHBOARDS = DOCKER / "grafana" / "dashboards"
PROVISIONING = DOCKER / "grafana" / "provisioning"
ALERT_CASES = Path(__file__).resolve().parent / "alerts_test.yml"

#: labels a query may use on any metric: the app's id (on every metric) and what
#: Prometheus adds (instance, job) or histograms have (le)
COMMON_LABELS = frozenset({"app", "instance", "job", "le"})

#: what issue 40 asks the alerts to catch, by rule name
REQUIRED_ALERTS = {
    "StreamjoinConsumerLagGrowing",  # falling behind
    "StreamjoinEventTimeLagHigh",  # falling behind, in event time
    "StreamjoinDeadLettersRising",
    "StreamjoinTaskWithoutOwner",
    "StreamjoinStandbyLagging",
    "StreamjoinRebalanceStorm",
}

#: what the dashboard must show (the issue's three questions: keeping up, losing
#: anything, what the last rebalance cost)
REQUIRED_ON_DASHBOARD = {
    "streamjoin_join_input_records_total",
    "streamjoin_join_outputs_total",
    "streamjoin_join_dead_letters_total",
    "streamjoin_consumer_lag_records",
    "streamjoin_join_event_time_lag_seconds",
    "streamjoin_join_decision_lag_seconds",
    "streamjoin_join_batch_seconds",
    "streamjoin_restore_remaining_records",
    "streamjoin_replica_lag_records",
    "streamjoin_tasks",
    "streamjoin_rebalances_total",
    "streamjoin_rebalance_seconds",
    "streamjoin_assignment_seconds",
    "streamjoin_group_assignment_tasks",
}


def promtool(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(promtool_binary()), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
    )


# -- reading PromQL, loosely --------------------------------------------------------------

_SELECTOR = re.compile(r"(?<![\w:])(streamjoin_[A-Za-z0-9_]*)\s*(\{[^}]*\})?")
_MATCHER = re.compile(r'([A-Za-z_]\w*)\s*(?:=~|!~|!=|=)\s*"')
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")
_BY = re.compile(r"\bby\s*\(([^)]*)\)")
_LEGEND = re.compile(r"\{\{\s*([A-Za-z_]\w*)\s*\}\}")
_TEMPLATE_LABEL = re.compile(r"\$labels\.([A-Za-z_]\w*)")
_LABEL_VALUES = re.compile(r"^\s*label_values\((.*),\s*([A-Za-z_]\w*)\s*\)\s*$", re.S)


@cache
def catalogue() -> dict[str, Metric]:
    return by_name()


def metric_of(series: str) -> Metric | None:
    """The catalogue's metric for a series name (a histogram's _bucket, _sum, _count too)."""
    if series in catalogue():
        return catalogue()[series]
    for suffix in ("_bucket", "_sum", "_count"):
        base = catalogue().get(series.removesuffix(suffix))
        if series.endswith(suffix) and base is not None and base.kind == "histogram":
            return base
    return None


def _labels(text: str) -> set[str]:
    return {label.strip() for label in text.split(",") if label.strip()}


def problems(expr: str, where: str) -> tuple[list[str], set[str]]:
    """What is wrong with *expr* (unknown metrics, labels a metric lacks) and the
    labels its metrics can have."""
    found: list[str] = []
    allowed = set(COMMON_LABELS)
    selectors = _SELECTOR.findall(expr)
    for name, matchers in selectors:
        metric = metric_of(name)
        if metric is None:
            found.append(f"{where}: {name} is not in the catalogue")
            continue
        labels = set(metric.labels) | COMMON_LABELS
        allowed |= labels
        for label in _MATCHER.findall(matchers):
            if label not in labels:
                found.append(f"{where}: {name} has no label {label!r} (it has {metric.labels})")
    if selectors:
        for clause in _GROUPING.findall(expr):
            for label in _labels(clause) - allowed:
                found.append(f"{where}: groups by {label!r}, which none of its metrics has")
    return found, allowed


def grouped_by(expr: str) -> set[str] | None:
    """The labels the ``by`` clauses of *expr* keep (None without one)."""
    clauses = _BY.findall(expr)
    return set().union(*map(_labels, clauses)) if clauses else None


# -- the alerting rules --------------------------------------------------------------------


@cache
def rules() -> list[dict[str, Any]]:
    doc = yaml.safe_load(ALERTS.read_text())
    return [rule for group in doc["groups"] for rule in group["rules"]]


def test_promtool_checks_the_alerting_rules() -> None:
    done = promtool("check", "rules", ALERTS)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(rules())} rules found" in done.stdout


def test_promtool_checks_the_prometheus_config_and_its_rule_files() -> None:
    done = promtool("check", "config", PROMETHEUS_CONFIG)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "is valid prometheus config file syntax" in done.stdout
    assert "alerts.yml" in done.stdout  # it loaded the rules too


def test_the_alerts_fire_on_their_cases_and_only_then(tmp_path: Path) -> None:
    # the rules without their annotations: the cases pin expressions, durations and
    # labels, and do not have to repeat the prose
    doc = yaml.safe_load(ALERTS.read_text())
    for group in doc["groups"]:
        for rule in group["rules"]:
            rule.pop("annotations", None)
    (tmp_path / "alerts.yml").write_text(yaml.safe_dump(doc))
    cases = yaml.safe_load(ALERT_CASES.read_text())
    cases["rule_files"] = ["alerts.yml"]
    (tmp_path / "alerts_test.yml").write_text(yaml.safe_dump(cases))
    done = promtool("test", "rules", "alerts_test.yml", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout
    # every alert has a case where it fires
    firing = {
        test["alertname"]
        for case in cases["tests"]
        for test in case["alert_rule_test"]
        if test["exp_alerts"]
    }
    assert firing == {rule["alert"] for rule in rules()}


def test_the_issue_s_alerts_are_there_and_say_what_to_do() -> None:
    names = [rule["alert"] for rule in rules()]
    assert len(names) == len(set(names)), "alert names repeat"
    assert set(names) >= REQUIRED_ALERTS
    for rule in rules():
        name = rule["alert"]
        assert name.startswith("Streamjoin"), name
        assert rule.get("for"), f"{name}: fire only when it lasts (a `for:` duration)"
        assert rule["labels"]["severity"] in {"warning", "critical"}, name
        annotations = rule["annotations"]
        assert annotations["summary"].strip(), name
        assert len(annotations["description"].split()) >= 20, f"{name}: say what to do"


def test_alerts_name_only_catalogued_metrics_and_their_labels() -> None:
    found: list[str] = []
    used: set[str] = set()
    for rule in rules():
        name, expr = rule["alert"], rule["expr"]
        wrong, allowed = problems(expr, name)
        found += wrong
        used |= {n for n, _ in _SELECTOR.findall(expr)}
        text = " ".join(rule["annotations"].values())
        for label in set(_TEMPLATE_LABEL.findall(text)) - allowed:
            found.append(f"{name}: its annotations show $labels.{label}, which no metric has")
    assert not found, "\n".join(found)
    assert {metric_of(n) for n in used} >= {
        by_name()[n]
        for n in (
            "streamjoin_join_dead_letters_total",
            "streamjoin_tasks",
            "streamjoin_group_tasks",
            "streamjoin_replica_lag_records",
            "streamjoin_rebalances_total",
            "streamjoin_consumer_lag_records",
            "streamjoin_join_event_time_lag_seconds",
        )
    }


def test_the_loose_reader_catches_wrong_names_and_labels() -> None:
    wrong, _ = problems(
        'sum by (reason, colour) (rate(streamjoin_join_dead_letters_total{kind="x"}[5m]))'
        " + streamjoin_no_such_metric + streamjoin_tasks_bucket",
        "probe",
    )
    assert len(wrong) == 4, wrong  # kind, colour, the unknown name, a gauge's _bucket
    ok, _ = problems(
        "histogram_quantile(0.9, sum by (join, le)"
        ' (rate(streamjoin_join_batch_seconds_bucket{app=~"$app"}[$__rate_interval])))',
        "probe",
    )
    assert not ok


# -- the Grafana dashboard -----------------------------------------------------------------


def dashboards() -> list[Path]:
    found = sorted(DASHBOARDS.glob("*.json"))
    assert found, f"no dashboard in {DASHBOARDS}"
    return found


def panels(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for panel in dashboard["panels"]:
        yield panel
        yield from panel.get("panels", [])  # a collapsed row holds its panels


def queries(dashboard: dict[str, Any]) -> Iterator[tuple[str, str, str]]:
    """(where, PromQL expression, legend) of every panel target."""
    for panel in panels(dashboard):
        for target in panel.get("targets", []):
            yield (
                f"panel {panel['title']!r}",
                target.get("expr", ""),
                target.get("legendFormat", ""),
            )


def variable_queries(dashboard: dict[str, Any]) -> Iterator[tuple[str, str]]:
    for variable in dashboard.get("templating", {}).get("list", []):
        if variable.get("type") == "query":
            query = variable["query"]
            yield variable["name"], query["query"] if isinstance(query, dict) else query


@cache
def datasource_uid() -> str:
    sources = [
        source
        for path in sorted((PROVISIONING / "datasources").glob("*.yml"))
        for source in yaml.safe_load(path.read_text())["datasources"]
    ]
    assert len(sources) == 1
    assert sources[0]["type"] == "prometheus"
    uid: str = sources[0]["uid"]
    return uid


@pytest.fixture(params=[p.name for p in dashboards()])
def dashboard(request: pytest.FixtureRequest) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((DASHBOARDS / request.param).read_text())
    return loaded


def test_the_dashboard_is_valid_and_every_panel_has_a_query(dashboard: dict[str, Any]) -> None:
    assert dashboard["uid"] and dashboard["title"]
    ids = [p["id"] for p in panels(dashboard)]
    assert len(ids) == len(set(ids)), "panel ids repeat"
    cells: dict[tuple[int, int], str] = {}
    for panel in panels(dashboard):
        grid = panel["gridPos"]
        assert grid["x"] >= 0 and grid["x"] + grid["w"] <= 24, panel["title"]
        for x in range(grid["x"], grid["x"] + grid["w"]):
            for y in range(grid["y"], grid["y"] + grid["h"]):
                assert (x, y) not in cells, f"{panel['title']!r} overlaps {cells[(x, y)]!r}"
                cells[(x, y)] = panel["title"]
        if panel["type"] == "row":
            continue
        assert panel["datasource"]["uid"] == datasource_uid(), panel["title"]
        targets = panel.get("targets") or []
        assert targets, f"panel {panel['title']!r} has no query"
        for target in targets:
            assert target.get("expr", "").strip(), f"panel {panel['title']!r}: empty query"
            assert target["datasource"]["uid"] == datasource_uid(), panel["title"]
        assert panel.get("description"), f"panel {panel['title']!r}: say what it shows"


def test_the_dashboard_names_only_catalogued_metrics_and_their_labels(
    dashboard: dict[str, Any],
) -> None:
    found: list[str] = []
    for where, expr, legend in queries(dashboard):
        wrong, allowed = problems(expr, where)
        found += wrong
        # a legend shows only labels the result keeps
        keeps = grouped_by(expr)
        shown = set(_LEGEND.findall(legend))
        for label in shown - (keeps if keeps is not None else allowed):
            found.append(f"{where}: legend shows {{{{{label}}}}}, which {expr!r} drops")
    for name, query in variable_queries(dashboard):
        match = _LABEL_VALUES.match(query)
        assert match, f"variable {name}: {query!r} (expected label_values(metric, label))"
        wrong, allowed = problems(match.group(1), f"variable {name}")
        found += wrong
        if match.group(2) not in allowed:
            found.append(f"variable {name}: {match.group(1)} has no label {match.group(2)!r}")
    assert not found, "\n".join(found)


def test_the_dashboard_shows_what_the_issue_asks_for(dashboard: dict[str, Any]) -> None:
    used = {
        metric.name
        for _, expr, _ in queries(dashboard)
        for name, _ in _SELECTOR.findall(expr)
        if (metric := metric_of(name)) is not None
    }
    missing = REQUIRED_ON_DASHBOARD - used
    assert not missing, f"the dashboard does not show {sorted(missing)}"
    assert any(
        'state="cross_rack"' in expr.replace(" ", "") for _, expr, _ in queries(dashboard)
    ), "a panel shows the cross-rack tasks"


#: Grafana's variables, replaced by what Prometheus would get
_GRAFANA_VARIABLES = {"$__rate_interval": "5m", "$__interval": "1m", "$__range": "1h"}


def test_the_dashboard_queries_are_valid_promql(dashboard: dict[str, Any], tmp_path: Path) -> None:
    recording = []
    for index, (_, expr, _) in enumerate(queries(dashboard)):
        for variable, value in _GRAFANA_VARIABLES.items():
            expr = expr.replace(variable, value)
        # $app and the like are left inside label matchers' strings (valid regexes)
        assert "$" not in re.sub(r'"[^"]*"', '""', expr), f"a Grafana variable in {expr!r}"
        recording.append({"record": f"dashboard:query_{index}", "expr": expr})
    rules_file = tmp_path / "dashboard.yml"
    rules_file.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": recording}]}))
    done = promtool("check", "rules", rules_file)
    assert done.returncode == 0, done.stdout + done.stderr


def test_grafana_s_datasource_is_the_compose_prometheus() -> None:
    compose = yaml.safe_load((DOCKER / "compose.yaml").read_text())
    port = compose["services"]["prometheus"]["ports"][0].split(":")[-1]
    sources = yaml.safe_load((PROVISIONING / "datasources" / "prometheus.yml").read_text())
    assert sources["datasources"][0]["url"] == f"http://prometheus:{port}"


# -- Prometheus' configuration -------------------------------------------------------------


def test_prometheus_scrapes_every_compose_worker_on_its_web_port() -> None:
    compose = yaml.safe_load((DOCKER / "compose.yaml").read_text())
    workers = {
        name: service["environment"]
        for name, service in compose["services"].items()
        if (service.get("command") or [None])[0] == "worker"
    }
    assert len(workers) == 3
    wanted = {
        f"{env['STREAMJOIN_WEB_HOST']}:{env['STREAMJOIN_WEB_PORT']}" for env in workers.values()
    }
    config = yaml.safe_load(PROMETHEUS_CONFIG.read_text())
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    job = jobs["streamjoin"]
    from streamjoin.faust.metrics.endpoint import METRICS_PATH

    assert job.get("metrics_path", "/metrics") == METRICS_PATH
    targets = {t for static in job["static_configs"] for t in static["targets"]}
    assert targets == wanted
    assert config["rule_files"] == [ALERTS.name]


# -- the docs ------------------------------------------------------------------------------


def test_the_operations_page_explains_every_alert_and_names_the_files() -> None:
    text = section((DOCS / "operations.rst").read_text(), "Monitoring with Prometheus and Grafana")
    for rule in rules():
        assert f"``{rule['alert']}``" in text, f"docs/operations.rst: explain {rule['alert']}"
    # the dashboards by their directory: test_docs.py reads "streamjoin.json" as a module
    for path in (ALERTS, PROMETHEUS_CONFIG, ALERT_CASES):
        assert str(path.relative_to(ROOT)) in text, path
    assert f"``{DASHBOARDS.relative_to(ROOT)}/``" in text
    assert "make prometheus" in text
