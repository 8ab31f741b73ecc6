"""How a worker chooses cooperative rebalancing: streamjoin.App's switch and
the transport a plain faust app names in its broker URL. Eager or not, a
streamjoin.App's consumer fetches as its rack (tests/unit/faust/test_consumer_client_rack.py)."""

from __future__ import annotations

import faust
import pytest
from faust.transport import by_url
from faust.transport.drivers.aiokafka import Transport as FaustTransport

import streamjoin
from streamjoin.errors import ConfigurationError
from streamjoin.faust.kafka.transport import CooperativeTransport, RackAwareTransport

BROKER = "kafka://127.0.0.1:9092"


def _transport(app: faust.App) -> object:
    return app.transport


def test_a_streamjoin_app_rebalances_cooperatively_unless_told_not_to(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("STREAMJOIN_COOPERATIVE", raising=False)
    on = streamjoin.App("sj-switch-on", broker=BROKER)
    assert on.cooperative is True and isinstance(_transport(on), CooperativeTransport)
    off = streamjoin.App("sj-switch-off", broker=BROKER, cooperative=False)
    assert off.cooperative is False
    # faust's transport, with only the rack added
    assert type(_transport(off)) is RackAwareTransport
    assert isinstance(_transport(off), FaustTransport)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("1", True),
        ("on", True),
        ("True", True),
        ("yes", True),
        ("", True),
        ("0", False),
        ("off", False),
        ("No", False),
    ],
)
def test_the_environment_switch(
    monkeypatch: pytest.MonkeyPatch, value: str, expected: bool
) -> None:
    monkeypatch.setenv("STREAMJOIN_COOPERATIVE", value)
    assert streamjoin.App(f"sj-switch-{value or 'empty'}", broker=BROKER).cooperative is expected


def test_a_value_the_switch_does_not_know_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STREAMJOIN_COOPERATIVE", "sometimes")
    with pytest.raises(ConfigurationError, match="0/false/no/off"):
        streamjoin.App("sj-switch-unknown", broker=BROKER)


def test_a_plain_faust_app_opts_in_with_the_streamjoin_kafka_scheme() -> None:
    assert by_url("streamjoin-kafka://127.0.0.1:9092") is CooperativeTransport
    app = faust.App("sj-switch-plain", broker="streamjoin-kafka://127.0.0.1:9092")
    assert isinstance(app.transport, CooperativeTransport)
    assert by_url(BROKER) is FaustTransport
