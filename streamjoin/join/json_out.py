"""Compact JSON with sorted keys, byte for byte what :func:`json.dumps` writes. Pure.

Outputs of a join must be byte-identical on replay and across versions, and
they were defined by ``json.dumps(doc, sort_keys=True, separators=(",", ":"))``
(ASCII only: other characters escaped). orjson writes the same bytes for the
documents outputs are made of in practice, several times faster: every string
printable ASCII (so the only escapes are ``\\"`` and ``\\\\``, written alike), every
float between 1e-4 and 1e16 in magnitude, or zero (where both print the shortest
round-trip digits without an exponent), every int within 64 bits. Any other
document goes to :mod:`json`. ``tests/unit/join/test_json_out.py`` checks the
two agree on generated documents.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

__all__ = ["dumps_sorted"]

_OPTIONS = orjson.OPT_SORT_KEYS
_INT_MAX = 2**63 - 1


def _plain(value: Any) -> bool:
    """May orjson write *value* (a document's part) exactly as :mod:`json` does?"""
    kind = type(value)
    if kind is str:
        return bool(value.isascii() and value.isprintable())
    if kind is float:
        return bool(value == 0.0 or 1e-4 <= abs(value) < 1e16)
    if kind is int:
        return bool(-_INT_MAX <= value <= _INT_MAX)
    if value is None or kind is bool:
        return True
    if kind is dict:
        return all(type(k) is str and _plain(k) and _plain(v) for k, v in value.items())
    if kind is list:
        return all(_plain(v) for v in value)
    return False


def _plain_flat(doc: dict[str, Any]) -> bool:
    """:func:`_plain` of a document, with its strings checked in one pass (most
    documents are one level of strings, numbers and ``None``)."""
    texts = []
    for key, value in doc.items():
        if type(key) is not str:
            return False
        texts.append(key)
        kind = type(value)
        if kind is str:
            texts.append(value)
        elif value is not None and not _plain(value):
            return False
    joined = "".join(texts)
    return joined.isascii() and joined.isprintable()


def dumps_sorted(doc: dict[str, Any]) -> bytes:
    """``json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()``, faster."""
    if _plain_flat(doc):
        return orjson.dumps(doc, option=_OPTIONS)
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
