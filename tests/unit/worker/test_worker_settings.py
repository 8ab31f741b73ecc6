"""``streamjoin worker`` settings: every option from a flag or ``STREAMJOIN_*``, Kafka security.

The CLI tests stop at :func:`streamjoin.worker.run.run_worker` (patched)
and look at the :class:`WorkerOptions` it would get; the security tests build
the faust credentials for real, TLS files included (made with ``openssl``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import click
import pytest
from click.testing import CliRunner

from streamjoin.cli import main
from streamjoin.cli.worker import worker_command
from streamjoin.worker.options import (
    DEFAULT_WEB_BIND,
    SASL_PASSWORD_ENV,
    SSL_KEY_PASSWORD_ENV,
    KafkaSecurity,
    WorkerSettingsError,
    envvar,
)
from streamjoin.worker.run import WorkerOptions, configure_app

#: option (click parameter name) -> (environment value, flag arguments, attribute,
#: value from the environment, value from the flag)
CASES: dict[str, tuple[str, list[str], str, Any, Any]] = {
    "app_spec": ("env.mod:app", ["-A", "flag.mod:app"], "app", "env.mod:app", "flag.mod:app"),
    "broker": (
        "kafka://env:9092",
        ["-b", "kafka://flag:9092"],
        "broker",
        "kafka://env:9092",
        "kafka://flag:9092",
    ),
    "datadir": (
        "/env/data",
        ["--datadir", "/flag/data"],
        "datadir",
        Path("/env/data"),
        Path("/flag/data"),
    ),
    "web_port": ("7001", ["--web-port", "7002"], "web_port", 7001, 7002),
    "web_host": ("env-host", ["--web-host", "flag-host"], "web_host", "env-host", "flag-host"),
    "web_bind": ("0.0.0.0", ["--web-bind", "10.1.2.3"], "web_bind", "0.0.0.0", "10.1.2.3"),
    "web": ("true", ["--without-web"], "web", True, False),
    "standby_replicas": ("2", ["--standby-replicas", "3"], "standby_replicas", 2, 3),
    "replication_factor": ("3", ["--replication-factor", "2"], "replication_factor", 3, 2),
    "loglevel": ("debug", ["-l", "warning"], "loglevel", "debug", "warning"),
    "logfile": ("/env/w.log", ["-f", "/flag/w.log"], "logfile", "/env/w.log", "/flag/w.log"),
    "debug": ("1", ["--no-debug"], "debug", True, False),
    "blocking_timeout": ("2.5", ["--blocking-timeout", "3.5"], "blocking_timeout", 2.5, 3.5),
    "broker_timeout": ("30", ["--broker-timeout", "40"], "broker_timeout", 30.0, 40.0),
    "rack": ("rack-env", ["--rack", "rack-flag"], "rack", "rack-env", "rack-flag"),
    "host_label": ("h-env", ["--host-label", "h-flag"], "host_label", "h-env", "h-flag"),
    "instance_id": ("i-env", ["--instance-id", "i-flag"], "instance_id", "i-env", "i-flag"),
    "capacity": ("3", ["--capacity", "4"], "capacity", 3, 4),
    "recovery_lag": ("500", ["--recovery-lag", "600"], "recovery_lag", 500, 600),
    "max_warmup_replicas": (
        "2",
        ["--max-warmup-replicas", "0"],
        "max_warmup_replicas",
        2,
        0,
    ),
    "rack_traffic_cost": ("0", ["--rack-traffic-cost", "20"], "rack_traffic_cost", 0, 20),
    "rack_move_cost": ("5", ["--rack-move-cost", "0"], "rack_move_cost", 5, 0),
    "standby_share": ("0.25", ["--standby-share", "1"], "standby_share", 0.25, 1.0),
    "security_protocol": (
        "sasl_ssl",
        ["--security-protocol", "SSL"],
        "security.protocol",
        "SASL_SSL",
        "SSL",
    ),
    "sasl_mechanism": (
        "scram-sha-256",
        ["--sasl-mechanism", "SCRAM-SHA-512"],
        "security.sasl_mechanism",
        "SCRAM-SHA-256",
        "SCRAM-SHA-512",
    ),
    "sasl_username": (
        "u-env",
        ["--sasl-username", "u-flag"],
        "security.sasl_username",
        "u-env",
        "u-flag",
    ),
    "ssl_cafile": (
        "/env/ca.pem",
        ["--ssl-cafile", "/flag/ca.pem"],
        "security.ssl_cafile",
        Path("/env/ca.pem"),
        Path("/flag/ca.pem"),
    ),
    "ssl_certfile": (
        "/env/c.pem",
        ["--ssl-certfile", "/flag/c.pem"],
        "security.ssl_certfile",
        Path("/env/c.pem"),
        Path("/flag/c.pem"),
    ),
    "ssl_keyfile": (
        "/env/k.pem",
        ["--ssl-keyfile", "/flag/k.pem"],
        "security.ssl_keyfile",
        Path("/env/k.pem"),
        Path("/flag/k.pem"),
    ),
    "kerberos_service_name": (
        "kafka-env",
        ["--kerberos-service-name", "kafka-flag"],
        "security.kerberos_service_name",
        "kafka-env",
        "kafka-flag",
    ),
    "kerberos_domain_name": (
        "env.example",
        ["--kerberos-domain-name", "flag.example"],
        "security.kerberos_domain_name",
        "env.example",
        "flag.example",
    ),
}


def _options_of_command() -> list[click.Option]:
    return [p for p in worker_command.params if isinstance(p, click.Option) and p.name != "help"]


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No STREAMJOIN_* variable of the machine running the tests leaks into them."""
    for name in list(os.environ):
        if name.startswith("STREAMJOIN_"):
            monkeypatch.delenv(name)


def _invoke(args: list[str], env: dict[str, str] | None = None) -> tuple[Any, WorkerOptions]:
    seen: list[WorkerOptions] = []

    def fake_run(options: WorkerOptions) -> int:
        seen.append(options)
        return 0

    with mock.patch("streamjoin.worker.run.run_worker", fake_run):
        result = CliRunner().invoke(main, ["worker", *args], env=env or {})
    assert result.exit_code == 0, result.output
    return result, seen[0]


def _attr(options: WorkerOptions, path: str) -> Any:
    value: Any = options
    for part in path.split("."):
        value = getattr(value, part)
    return value


def test_every_option_has_a_case_and_its_streamjoin_variable() -> None:
    names = {p.name for p in _options_of_command()}
    assert names == set(CASES), "add a row to CASES for every worker option"
    for param in _options_of_command():
        long_flags = [o for o in param.opts + param.secondary_opts if o.startswith("--")]
        flag = "--web" if param.name == "web" else long_flags[0]
        assert param.envvar == envvar(flag), param.name
        assert param.show_envvar, param.name


@pytest.mark.parametrize("name", sorted(CASES))
def test_environment_variable_sets_the_option(name: str) -> None:
    env_value, _, attr, from_env, _ = CASES[name]
    param = next(p for p in _options_of_command() if p.name == name)
    args = [] if name == "app_spec" else ["-A", "m:app"]
    _, options = _invoke(args, {str(param.envvar): env_value})
    assert _attr(options, attr) == from_env


@pytest.mark.parametrize("name", sorted(CASES))
def test_flag_wins_over_the_environment(name: str) -> None:
    env_value, flag_args, attr, _, from_flag = CASES[name]
    param = next(p for p in _options_of_command() if p.name == name)
    args = flag_args if name == "app_spec" else ["-A", "m:app", *flag_args]
    _, options = _invoke(args, {str(param.envvar): env_value})
    assert _attr(options, attr) == from_flag


def test_empty_variable_counts_as_unset() -> None:
    _, options = _invoke(["-A", "m:app"], {"STREAMJOIN_RACK": "", "STREAMJOIN_WEB_PORT": ""})
    assert options.rack is None
    assert options.web_port is None


def test_bad_value_in_a_variable_names_the_variable() -> None:
    result = CliRunner().invoke(
        main, ["worker", "-A", "m:app"], env={"STREAMJOIN_WEB_PORT": "eighty"}
    )
    assert result.exit_code == 2
    assert "STREAMJOIN_WEB_PORT" in result.output


def test_app_from_the_environment_alone() -> None:
    _, options = _invoke([], {"STREAMJOIN_APP": "streamjoin.ads.app:app"})
    assert options.app == "streamjoin.ads.app:app"


def test_passwords_come_from_the_environment_only() -> None:
    flags = {o for p in worker_command.params for o in p.opts + p.secondary_opts}
    assert not [f for f in flags if "password" in f]
    _, options = _invoke(
        ["-A", "m:app", "--security-protocol", "SASL_SSL", "--sasl-username", "bob"],
        {SASL_PASSWORD_ENV: "s3cret", SSL_KEY_PASSWORD_ENV: "k3y"},
    )
    assert options.security.sasl_password == "s3cret"
    assert options.security.ssl_key_password == "k3y"
    assert "s3cret" not in repr(options)
    assert "k3y" not in repr(options)
    help_text = CliRunner().invoke(main, ["worker", "--help"]).output
    assert SASL_PASSWORD_ENV in help_text
    assert SSL_KEY_PASSWORD_ENV in help_text


# -- web bind ------------------------------------------------------------------------


def test_web_server_binds_loopback_unless_told_otherwise() -> None:
    import faust

    assert DEFAULT_WEB_BIND == "127.0.0.1"
    assert WorkerOptions(app="m:app").web_bind == "127.0.0.1"
    _, options = _invoke(["-A", "m:app"])
    assert options.web_bind == "127.0.0.1"
    app = faust.App("sj-bind-test", web_bind="0.0.0.0")
    configure_app(app, WorkerOptions(app="m:app"))
    assert app.conf.web_bind == "127.0.0.1"
    other = faust.App("sj-bind-test-2")
    configure_app(other, WorkerOptions(app="m:app", web_bind="0.0.0.0"))
    assert other.conf.web_bind == "0.0.0.0"


def test_replication_factor_and_credentials_reach_faust_settings() -> None:
    import faust
    from faust.auth import SASLCredentials

    app = faust.App("sj-conf-test")
    security = KafkaSecurity(protocol="SASL_PLAINTEXT", sasl_username="bob", sasl_password="pw")
    configure_app(app, WorkerOptions(app="m:app", replication_factor=3, security=security))
    assert app.conf.topic_replication_factor == 3
    assert isinstance(app.conf.broker_credentials, SASLCredentials)


def test_member_settings_reach_the_apps_configuration_the_assignor_reads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import faust

    from streamjoin.membership.settings import MemberSettings

    monkeypatch.setenv("STREAMJOIN_RACK_MOVE_COST", "3")  # what a flag leaves unset
    app = faust.App("sj-member-conf")
    options = WorkerOptions(app="m:app", rack="zone-a", rack_traffic_cost=0)
    configure_app(app, options)
    assert app.conf.streamjoin_member == MemberSettings(
        rack="zone-a", rack_traffic_cost=0, rack_move_cost=3
    )


def test_the_standby_share_reaches_the_restorer_in_the_apps_restore_settings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One path: --standby-share -> ``app.conf.streamjoin_restore`` -> the restorer's
    settings; nothing goes through the environment (a variable left there is ignored)."""
    import streamjoin
    from streamjoin.faust.restore.restorer import Restorer

    monkeypatch.setenv("STREAMJOIN_STANDBY_SHARE", "0.9")  # only the CLI reads it (click)
    app = streamjoin.App("sj-share-conf", web_enabled=False)
    configure_app(app, WorkerOptions(app="m:app", standby_share=0.25))
    settings = app.conf.streamjoin_restore
    assert issubclass(settings, Restorer.settings)
    assert settings.standby_share == 0.25
    assert settings.max_records == Restorer.settings.max_records  # the rest unchanged
    restorer = app.tables.recovery
    assert restorer.settings is settings
    assert restorer.standby_pacing()["share"] == 0.25
    assert Restorer.settings.standby_share == 0.5  # no other app is touched

    plain = streamjoin.App("sj-share-default", web_enabled=False)
    configure_app(plain, WorkerOptions(app="m:app"))
    assert not hasattr(plain.conf, "streamjoin_restore")
    assert plain.tables.recovery.standby_pacing()["share"] == Restorer.settings.standby_share


@pytest.mark.parametrize("share", [0.0, 1.5, -0.25])
def test_a_standby_share_outside_zero_to_one_is_refused_when_the_worker_configures(
    share: float,
) -> None:
    import faust

    from streamjoin.errors import ConfigurationError

    app = faust.App("sj-share-bad")
    with pytest.raises(ConfigurationError, match=r"standby restore share must be in \(0, 1\]"):
        configure_app(app, WorkerOptions(app="m:app", standby_share=share))


def test_a_bad_standby_share_variable_is_named_by_the_command() -> None:
    result = CliRunner().invoke(
        worker_command, ["-A", "m:app"], env={"STREAMJOIN_STANDBY_SHARE": "half"}
    )
    assert result.exit_code == 2
    assert "STREAMJOIN_STANDBY_SHARE" in result.output
    assert "'half' is not a valid float" in result.output


def test_no_security_settings_keep_the_apps_credentials() -> None:
    import faust
    from faust.auth import SASLCredentials

    own = SASLCredentials(username="app", password="app-pw")
    app = faust.App("sj-own-creds", broker_credentials=own)
    configure_app(app, WorkerOptions(app="m:app"))
    assert app.conf.broker_credentials is own
    plain = faust.App("sj-own-creds-2", broker_credentials=own)
    configure_app(plain, WorkerOptions(app="m:app", security=KafkaSecurity(protocol="PLAINTEXT")))
    assert plain.conf.broker_credentials is None


# -- security -> faust credentials ----------------------------------------------------


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    """A self-signed certificate, its plain key and an encrypted copy of the key."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    folder = tmp_path_factory.mktemp("tls")
    cert, key, enc = folder / "cert.pem", folder / "key.pem", folder / "key-enc.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-days",
            "2",
            "-subj",
            "/CN=sj-test",
        ],
        check=True,
        capture_output=True,
    )
    subprocess.run(
        ["openssl", "pkey", "-in", str(key), "-out", str(enc), "-aes256", "-passout", "pass:k3y"],
        check=True,
        capture_output=True,
    )
    yield {"cert": cert, "key": key, "enc": enc}


def _auth(credentials: Any) -> dict[str, Any]:
    from faust.transport.drivers.aiokafka import credentials_to_aiokafka_auth

    return dict(credentials_to_aiokafka_auth(credentials, None))


def test_plaintext_and_unset_give_no_credentials() -> None:
    assert KafkaSecurity().credentials() is None
    assert KafkaSecurity(protocol="PLAINTEXT").credentials() is None


def test_ssl_gives_ssl_credentials(tls_files: dict[str, Path]) -> None:
    import ssl

    from faust.auth import SSLCredentials

    creds = KafkaSecurity(
        protocol="SSL",
        ssl_cafile=tls_files["cert"],
        ssl_certfile=tls_files["cert"],
        ssl_keyfile=tls_files["key"],
    ).credentials()
    assert isinstance(creds, SSLCredentials)
    auth = _auth(creds)
    assert auth["security_protocol"] == "SSL"
    context = auth["ssl_context"]
    assert isinstance(context, ssl.SSLContext)
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert context.check_hostname
    # the CA file was loaded into the context
    assert any(c.get("subject") for c in context.get_ca_certs())


def test_ssl_with_system_cas_only() -> None:
    from faust.auth import SSLCredentials

    assert isinstance(KafkaSecurity(protocol="SSL").credentials(), SSLCredentials)


def test_encrypted_key_needs_its_password(tls_files: dict[str, Path]) -> None:
    good = KafkaSecurity(
        protocol="SSL",
        ssl_certfile=tls_files["cert"],
        ssl_keyfile=tls_files["enc"],
        ssl_key_password="k3y",
    )
    assert good.credentials() is not None
    bad = KafkaSecurity(
        protocol="SSL",
        ssl_certfile=tls_files["cert"],
        ssl_keyfile=tls_files["enc"],
        ssl_key_password="wrong",
    )
    with pytest.raises(WorkerSettingsError, match=r"--ssl-certfile .* cannot load"):
        bad.credentials()


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_sasl_plaintext_gives_sasl_credentials(mechanism: str) -> None:
    from faust.auth import SASLCredentials

    creds = KafkaSecurity(
        protocol="SASL_PLAINTEXT",
        sasl_mechanism=mechanism,
        sasl_username="bob",
        sasl_password="pw",
    ).credentials()
    assert isinstance(creds, SASLCredentials)
    assert _auth(creds) == {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": mechanism,
        "sasl_plain_username": "bob",
        "sasl_plain_password": "pw",
        "ssl_context": None,
    }


def test_sasl_ssl_carries_a_tls_context(tls_files: dict[str, Path]) -> None:
    import ssl

    creds = KafkaSecurity(
        protocol="SASL_SSL",
        sasl_username="bob",
        sasl_password="pw",
        ssl_cafile=tls_files["cert"],
    ).credentials()
    auth = _auth(creds)
    assert auth["security_protocol"] == "SASL_SSL"
    assert auth["sasl_mechanism"] == "PLAIN"
    assert isinstance(auth["ssl_context"], ssl.SSLContext)


@pytest.mark.parametrize("protocol", ["SASL_PLAINTEXT", "SASL_SSL"])
def test_gssapi_gives_kerberos_credentials(protocol: str) -> None:
    from faust.auth import GSSAPICredentials

    creds = KafkaSecurity(
        protocol=protocol, sasl_mechanism="GSSAPI", kerberos_domain_name="corp.example"
    ).credentials()
    assert isinstance(creds, GSSAPICredentials)
    auth = _auth(creds)
    assert auth["security_protocol"] == protocol
    assert auth["sasl_mechanism"] == "GSSAPI"
    assert auth["sasl_kerberos_service_name"] == "kafka"
    assert auth["sasl_kerberos_domain_name"] == "corp.example"
    assert (auth["ssl_context"] is not None) == (protocol == "SASL_SSL")


BAD = [
    (
        dict(sasl_username="bob"),
        "--sasl-username/STREAMJOIN_SASL_USERNAME needs --security-protocol",
    ),
    (
        dict(ssl_cafile=Path("/ca.pem")),
        "--ssl-cafile/STREAMJOIN_SSL_CAFILE needs --security-protocol",
    ),
    (
        dict(protocol="PLAINTEXT", sasl_username="bob"),
        "is a SASL setting but --security-protocol is PLAINTEXT",
    ),
    (
        dict(protocol="SSL", sasl_mechanism="PLAIN"),
        "is a SASL setting but --security-protocol is SSL",
    ),
    (
        dict(
            protocol="SASL_PLAINTEXT",
            sasl_username="bob",
            sasl_password="pw",
            ssl_cafile=Path("/ca.pem"),
        ),
        "is a TLS setting but --security-protocol is SASL_PLAINTEXT",
    ),
    (dict(protocol="SASL_SSL"), "needs --sasl-username/STREAMJOIN_SASL_USERNAME"),
    (
        dict(protocol="SASL_PLAINTEXT", sasl_username="bob"),
        "needs the password in the environment variable STREAMJOIN_SASL_PASSWORD",
    ),
    (
        dict(protocol="SASL_PLAINTEXT", sasl_mechanism="GSSAPI", sasl_username="bob"),
        "GSSAPI authenticates with Kerberos",
    ),
    (
        dict(
            protocol="SASL_PLAINTEXT",
            sasl_username="bob",
            sasl_password="pw",
            kerberos_service_name="kafka",
        ),
        "is for --sasl-mechanism GSSAPI, not PLAIN",
    ),
    (
        dict(protocol="SSL", ssl_keyfile=Path("/k.pem")),
        "--ssl-keyfile/STREAMJOIN_SSL_KEYFILE needs --ssl-certfile",
    ),
    (
        dict(protocol="SSL", ssl_key_password="x"),
        "STREAMJOIN_SSL_KEY_PASSWORD needs --ssl-certfile",
    ),
    (dict(protocol="TLS"), "--security-protocol 'TLS': use one of"),
    (
        dict(protocol="SASL_SSL", sasl_mechanism="OAUTHBEARER"),
        "--sasl-mechanism 'OAUTHBEARER': use one of",
    ),
    (
        dict(protocol="SSL", ssl_cafile=Path("/nonexistent/ca.pem")),
        "--ssl-cafile /nonexistent/ca.pem: cannot load the CA bundle",
    ),
]


@pytest.mark.parametrize(("settings", "message"), BAD)
def test_inconsistent_settings_are_one_line_errors(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(WorkerSettingsError) as info:
        KafkaSecurity(**settings).credentials()
    text = str(info.value)
    assert message in text
    assert "\n" not in text


def test_cli_reports_a_bad_combination_in_one_line_before_loading_the_app() -> None:
    with mock.patch("streamjoin.worker.run.load_app") as load:
        result = CliRunner().invoke(
            main,
            ["worker", "-A", "m:app", "--security-protocol", "SASL_SSL"],
            env={"STREAMJOIN_SASL_USERNAME": "bob"},
        )
    assert result.exit_code == 1
    assert not load.called
    lines = result.output.strip().splitlines()
    assert lines == [
        "Error: --security-protocol SASL_SSL with --sasl-mechanism PLAIN needs the password "
        "in the environment variable STREAMJOIN_SASL_PASSWORD (there is no flag)"
    ]


def test_module_imports_stay_light() -> None:
    """``streamjoin.cli`` (and so ``--help``) does not import faust for the worker's settings."""
    code = (
        "import sys; import streamjoin.cli.worker, streamjoin.worker.options; "
        "print('faust' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "False"


def test_a_datadir_whose_parent_is_missing_is_one_line_before_faust_starts(tmp_path) -> None:
    from streamjoin.worker.run import faust_settings

    missing = tmp_path / "no-such-parent" / "data"
    with pytest.raises(WorkerSettingsError, match="no-such-parent does not exist"):
        faust_settings(WorkerOptions(app="m:app", datadir=missing))
    afile = tmp_path / "a-file"
    afile.write_text("x")
    with pytest.raises(WorkerSettingsError, match="is a file"):
        faust_settings(WorkerOptions(app="m:app", datadir=afile))
    fresh = tmp_path / "fresh"
    assert faust_settings(WorkerOptions(app="m:app", datadir=fresh))["datadir"] == fresh


def test_the_worker_command_reports_a_missing_datadir_parent_in_one_line(tmp_path) -> None:
    result = CliRunner().invoke(
        main, ["worker", "-A", "m:app", "--datadir", str(tmp_path / "x" / "y")]
    )
    assert result.exit_code == 1
    assert "does not exist" in result.output and "Traceback" not in result.output
