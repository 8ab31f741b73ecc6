"""Worker settings from the environment, and Kafka security as faust credentials.

Every ``streamjoin worker`` option can be given as a flag or as the
environment variable :func:`envvar` names (``--web-bind`` is
``STREAMJOIN_WEB_BIND``); a flag wins over the environment. Secrets (the SASL
password, the TLS key's password) come from the environment only, so they
never show in a process list or a shell history.

:class:`KafkaSecurity` checks a combination of security settings and turns it
into the ``broker_credentials`` faust hands to aiokafka
(:class:`faust.auth.SSLCredentials`, :class:`faust.auth.SASLCredentials`,
:class:`faust.auth.GSSAPICredentials`).
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from streamjoin.worker.errors import WorkerSettingsError

if TYPE_CHECKING:
    from yarl import URL

__all__ = [
    "DEFAULT_WEB_BIND",
    "ENV_PREFIX",
    "SASL_MECHANISMS",
    "SASL_PASSWORD_ENV",
    "SECURITY_PROTOCOLS",
    "SSL_KEY_PASSWORD_ENV",
    "KafkaSecurity",
    "WorkerSettingsError",
    "broker_urls",
    "envvar",
]

#: prefix of every environment variable ``streamjoin worker`` reads
ENV_PREFIX = "STREAMJOIN_"
#: the interface the worker's web server binds unless told otherwise
DEFAULT_WEB_BIND = "127.0.0.1"
#: the SASL password: an environment variable only, never a flag
SASL_PASSWORD_ENV = "STREAMJOIN_SASL_PASSWORD"
#: the password of the TLS client key: an environment variable only
SSL_KEY_PASSWORD_ENV = "STREAMJOIN_SSL_KEY_PASSWORD"

#: Kafka's ``security.protocol`` values
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
#: SASL mechanisms the worker can configure (OAUTHBEARER needs a token callback in code)
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "GSSAPI")

_SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")
_TLS_PROTOCOLS = ("SSL", "SASL_SSL")


def envvar(option: str) -> str:
    """The environment variable of a worker option: ``web-bind`` -> ``STREAMJOIN_WEB_BIND``."""
    return ENV_PREFIX + option.lstrip("-").upper().replace("-", "_")


def broker_urls(text: str) -> list[URL]:
    """Broker URLs from a ``--broker`` value: the one parser of broker lists.

    Entries are separated by commas or semicolons (faust's separator); an
    entry without a scheme gets ``kafka://``.

    Raises:
        WorkerSettingsError: the value names no broker.
    """
    from yarl import URL

    entries = [e.strip() for e in text.replace(";", ",").split(",") if e.strip()]
    if not entries:
        raise WorkerSettingsError(
            f"--broker {text!r} names no broker; give e.g. kafka://127.0.0.1:9092"
        )
    return [URL(e if "://" in e else f"kafka://{e}") for e in entries]


def _name(flag: str) -> str:
    """``--sasl-username`` -> ``--sasl-username/STREAMJOIN_SASL_USERNAME`` for messages."""
    return flag if flag.startswith(ENV_PREFIX) else f"{flag}/{envvar(flag)}"


@dataclass(frozen=True)
class KafkaSecurity:
    """How the worker authenticates to Kafka and encrypts the connection.

    Attributes:
        protocol: ``PLAINTEXT``, ``SSL``, ``SASL_PLAINTEXT`` or ``SASL_SSL``;
            ``None`` keeps the app's own ``broker_credentials``.
        sasl_mechanism: ``PLAIN`` (default), ``SCRAM-SHA-256``, ``SCRAM-SHA-512``
            or ``GSSAPI`` (Kerberos; needs the ``gssapi`` package).
        sasl_username, sasl_password: for PLAIN and SCRAM.
        ssl_cafile: CA bundle (PEM) to verify the brokers; default: the system's.
        ssl_certfile, ssl_keyfile: client certificate and key (PEM) for mutual TLS.
        ssl_key_password: password of an encrypted ``ssl_keyfile``.
        kerberos_service_name, kerberos_domain_name: for GSSAPI.
    """

    protocol: str | None = None
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: str | None = field(default=None, repr=False)
    ssl_cafile: Path | None = None
    ssl_certfile: Path | None = None
    ssl_keyfile: Path | None = None
    ssl_key_password: str | None = field(default=None, repr=False)
    kerberos_service_name: str | None = None
    kerberos_domain_name: str | None = None

    @property
    def mechanism(self) -> str:
        """The SASL mechanism in effect (upper case; ``PLAIN`` when none is given)."""
        return (self.sasl_mechanism or "PLAIN").upper()

    def check(self) -> None:
        """Raise :class:`WorkerSettingsError` (one line) when the settings contradict."""
        protocol = self.protocol.upper() if self.protocol else None
        sasl, tls = self._sasl_given(), self._tls_given()
        if protocol is None:
            if sasl or tls:
                raise WorkerSettingsError(
                    f"{_name((sasl + tls)[0])} needs --security-protocol/"
                    f"{envvar('security-protocol')} SSL, SASL_PLAINTEXT or SASL_SSL"
                )
            return
        self._check_protocol(protocol, sasl, tls)
        if protocol in _SASL_PROTOCOLS:
            self._check_sasl(protocol, sasl)

    def _sasl_given(self) -> list[str]:
        """The SASL settings given, by their flag or variable, in the order of the help."""
        return [
            name
            for name, value in (
                ("--sasl-mechanism", self.sasl_mechanism),
                ("--sasl-username", self.sasl_username),
                (SASL_PASSWORD_ENV, self.sasl_password),
                ("--kerberos-service-name", self.kerberos_service_name),
                ("--kerberos-domain-name", self.kerberos_domain_name),
            )
            if value
        ]

    def _tls_given(self) -> list[str]:
        """The TLS settings given, by their flag or variable, in the order of the help."""
        return [
            name
            for name, value in (
                ("--ssl-cafile", self.ssl_cafile),
                ("--ssl-certfile", self.ssl_certfile),
                ("--ssl-keyfile", self.ssl_keyfile),
                (SSL_KEY_PASSWORD_ENV, self.ssl_key_password),
            )
            if value
        ]

    def _check_protocol(self, protocol: str, sasl: list[str], tls: list[str]) -> None:
        """The protocol is known and takes every setting given; a key has its certificate."""
        if protocol not in SECURITY_PROTOCOLS:
            raise WorkerSettingsError(
                f"--security-protocol {self.protocol!r}: use one of {', '.join(SECURITY_PROTOCOLS)}"
            )
        if sasl and protocol not in _SASL_PROTOCOLS:
            raise WorkerSettingsError(
                f"{_name(sasl[0])} is a SASL setting but --security-protocol is {protocol}; "
                "use SASL_PLAINTEXT or SASL_SSL"
            )
        if tls and protocol not in _TLS_PROTOCOLS:
            raise WorkerSettingsError(
                f"{_name(tls[0])} is a TLS setting but --security-protocol is {protocol}; "
                "use SSL or SASL_SSL"
            )
        if (self.ssl_keyfile or self.ssl_key_password) and not self.ssl_certfile:
            first = "--ssl-keyfile" if self.ssl_keyfile else SSL_KEY_PASSWORD_ENV
            raise WorkerSettingsError(
                f"{_name(first)} needs --ssl-certfile/{envvar('ssl-certfile')} "
                "(the client certificate the key belongs to)"
            )

    def _check_sasl(self, protocol: str, sasl: list[str]) -> None:
        """The SASL mechanism is known and has the credentials it authenticates with."""
        mechanism = self.mechanism
        if mechanism not in SASL_MECHANISMS:
            raise WorkerSettingsError(
                f"--sasl-mechanism {self.sasl_mechanism!r}: use one of {', '.join(SASL_MECHANISMS)}"
            )
        if mechanism == "GSSAPI":
            if self.sasl_username or self.sasl_password:
                raise WorkerSettingsError(
                    "--sasl-mechanism GSSAPI authenticates with Kerberos, not a user name and "
                    f"password: drop --sasl-username and {SASL_PASSWORD_ENV}"
                )
            return
        kerberos = [n for n in sasl if n.startswith("--kerberos")]
        if kerberos:
            raise WorkerSettingsError(
                f"{_name(kerberos[0])} is for --sasl-mechanism GSSAPI, not {mechanism}"
            )
        if not self.sasl_username:
            raise WorkerSettingsError(
                f"--security-protocol {protocol} with --sasl-mechanism {mechanism} needs "
                f"--sasl-username/{envvar('sasl-username')}"
            )
        if not self.sasl_password:
            raise WorkerSettingsError(
                f"--security-protocol {protocol} with --sasl-mechanism {mechanism} needs the "
                f"password in the environment variable {SASL_PASSWORD_ENV} (there is no flag)"
            )

    def ssl_context(self) -> ssl.SSLContext:
        """A client TLS context that verifies the brokers (and presents our certificate)."""
        cafile = str(self.ssl_cafile) if self.ssl_cafile else None
        try:
            context = ssl.create_default_context(purpose=ssl.Purpose.SERVER_AUTH, cafile=cafile)
        except (OSError, ssl.SSLError) as exc:
            raise WorkerSettingsError(
                f"--ssl-cafile {self.ssl_cafile}: cannot load the CA bundle: {_reason(exc)}"
            ) from None
        if self.ssl_certfile:
            try:
                context.load_cert_chain(
                    str(self.ssl_certfile),
                    str(self.ssl_keyfile) if self.ssl_keyfile else None,
                    self.ssl_key_password,
                )
            except (OSError, ssl.SSLError) as exc:
                shown = f"--ssl-certfile {self.ssl_certfile}"
                if self.ssl_keyfile:
                    shown += f" with --ssl-keyfile {self.ssl_keyfile}"
                raise WorkerSettingsError(
                    f"{shown}: cannot load the client certificate and key: {_reason(exc)}"
                ) from None
        return context

    def credentials(self) -> Any:
        """faust ``broker_credentials`` for these settings (checked first).

        Returns ``None`` for ``PLAINTEXT`` or when no protocol is given (use
        :attr:`protocol` to tell the two apart).
        """
        self.check()
        protocol = self.protocol.upper() if self.protocol else None
        if protocol is None or protocol == "PLAINTEXT":
            return None
        from streamjoin.faust.security import faust_credentials

        context = self.ssl_context() if protocol in _TLS_PROTOCOLS else None
        return faust_credentials(protocol, self.mechanism, context, self)


def _reason(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text or type(exc).__name__
