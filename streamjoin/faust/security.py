"""Kafka security settings as faust ``broker_credentials``.

The settings are checked by :class:`streamjoin.worker.options.KafkaSecurity`;
this module only builds faust's credential objects from them.
"""

from __future__ import annotations

import ssl
from typing import TYPE_CHECKING, Protocol

from faust.auth import GSSAPICredentials, SASLCredentials, SSLCredentials

if TYPE_CHECKING:
    from faust.types.auth import CredentialsT

__all__ = ["faust_credentials"]


class SecurityNames(Protocol):
    """The names a checked ``streamjoin.worker`` ``KafkaSecurity`` carries (a layer
    above this one: it is not imported)."""

    @property
    def sasl_username(self) -> str | None: ...
    @property
    def sasl_password(self) -> str | None: ...
    @property
    def kerberos_service_name(self) -> str | None: ...
    @property
    def kerberos_domain_name(self) -> str | None: ...


def faust_credentials(
    protocol: str, mechanism: str | None, context: ssl.SSLContext | None, names: SecurityNames
) -> CredentialsT:
    """faust credentials for *protocol* (``SSL``, ``SASL_PLAINTEXT``, ``SASL_SSL``).

    *names* carries the SASL user name and password and the Kerberos service
    and domain names (a checked ``KafkaSecurity``).
    """
    if protocol == "SSL":
        return SSLCredentials(context)
    if mechanism == "GSSAPI":
        return GSSAPICredentials(
            kerberos_service_name=names.kerberos_service_name or "kafka",
            kerberos_domain_name=names.kerberos_domain_name,
            ssl_context=context,
            mechanism="GSSAPI",
        )
    return SASLCredentials(
        username=names.sasl_username,
        password=names.sasl_password,
        ssl_context=context,
        mechanism=mechanism,
    )
