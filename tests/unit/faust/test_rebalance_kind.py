"""How the member takes the rebalance under way: one answer
(``streamjoin.faust.kafka.incremental.rebalance_kind``) for the app and its
consumer alike, read from the consumer's ``Cooperation``.

Real objects: a streamjoin.App and the consumer its transport builds (never
started); the coordinator's side that sets the ``Cooperation`` is checked on
the real broker in ``tests/integration/test_cooperative_coordinator.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import streamjoin
from streamjoin.faust.kafka.cooperative import Cooperation
from streamjoin.faust.kafka.incremental import incremental, rebalance_kind
from streamjoin.lifecycle.rebalance import RebalanceKind

BROKER = "kafka://127.0.0.1:9092"


@pytest.fixture(autouse=True)
def _no_member_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("STREAMJOIN_COOPERATIVE", raising=False)


MakeApp = Callable[..., streamjoin.App]


@pytest.fixture
def make_app(tmp_path: Path) -> Iterator[MakeApp]:
    """streamjoin.Apps (cooperative unless told), each consumer thread's own event
    loop closed afterwards (built with the consumer, never started here)."""
    apps: list[streamjoin.App] = []

    def make(name: str, *, cooperative: bool = True) -> streamjoin.App:
        app = streamjoin.App(name, broker=BROKER, datadir=str(tmp_path), cooperative=cooperative)
        apps.append(app)
        return app

    yield make
    for app in apps:
        thread = getattr(app._consumer, "_thread", None)
        if thread is not None:
            thread.thread_loop.close()


@pytest.mark.parametrize(
    ("incremental_calls", "membership_lost", "kind"),
    [
        (False, False, RebalanceKind.EAGER),
        (True, False, RebalanceKind.COOPERATIVE),
        (False, True, RebalanceKind.LOST),
        # a loss while a cooperative rebalance's calls are made does not change them
        (True, True, RebalanceKind.COOPERATIVE),
    ],
)
def test_the_app_and_its_consumer_get_one_answer(
    make_app: MakeApp, incremental_calls: bool, membership_lost: bool, kind: RebalanceKind
) -> None:
    app = make_app(f"sj-kind-{incremental_calls}-{membership_lost}")
    consumer = app.consumer
    consumer.cooperation = Cooperation(
        incremental=incremental_calls, membership_lost=membership_lost
    )
    assert rebalance_kind(app) is kind
    assert rebalance_kind(consumer) is kind
    assert incremental(app) is (kind is RebalanceKind.COOPERATIVE)
    # the consumer takes the listener's calls the same way (its own question)
    assert consumer._incremental() is (kind is RebalanceKind.COOPERATIVE)


def test_a_stopping_app_takes_no_rebalance_cooperatively(make_app: MakeApp) -> None:
    app = make_app("sj-kind-stopping")
    app.consumer.cooperation = Cooperation(incremental=True)
    assert rebalance_kind(app) is RebalanceKind.COOPERATIVE
    app._stopped.set()  # mode's flag behind app.should_stop
    assert app.should_stop
    assert rebalance_kind(app) is RebalanceKind.EAGER
    assert rebalance_kind(app.consumer) is RebalanceKind.EAGER
    assert not incremental(app)
    app.consumer.cooperation.membership_lost = True
    assert rebalance_kind(app) is RebalanceKind.LOST


def test_a_consumer_without_cooperation_rebalances_eagerly(make_app: MakeApp) -> None:
    not_started = make_app("sj-kind-cooperative-not-started")
    assert rebalance_kind(not_started) is RebalanceKind.EAGER  # installed when its thread starts
    eager = make_app("sj-kind-eager", cooperative=False)
    assert rebalance_kind(eager) is RebalanceKind.EAGER
    assert rebalance_kind(eager.consumer) is RebalanceKind.EAGER
