"""Kafka security settings as faust ``broker_credentials``.

The settings are checked by :class:`streamjoin.worker.options.KafkaSecurity`;
this module only builds faust's credential objects from them.
"""

from __future__ import annotations

import ssl
from typing import Any

from faust.auth import GSSAPICredentials, SASLCredentials, SSLCredentials

__all__ = ["faust_credentials"]


def faust_credentials(
    protocol: str, mechanism: str | None, context: ssl.SSLContext | None, names: Any
) -> Any:
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
