"""A worker whose lease was lost writes again only once a rebalance renewed its tokens."""

from __future__ import annotations

import time

from faust.types import TP

import streamjoin
from streamjoin.faust.restore.owner_tokens import TaskOwnership

TOPIC = "app-billing-state-changelog"


def test_after_a_loss_a_renewed_lease_alone_does_not_let_the_worker_write() -> None:
    app = streamjoin.App("ownership-unit", broker="kafka://127.0.0.1:1")
    ownership = TaskOwnership(app, app.tables)
    tp = TP(TOPIC, 0)
    ownership.book.begin(1, [tp], ownership.lease.losses)
    ownership.book.marked(tp)
    ownership.lease.renew(time.monotonic())
    assert ownership.may_write() and ownership.token(TOPIC, 0) is not None
    # a JoinGroup answered after the lease ran out: a loss, then a new lease
    ownership.lease.renewed_at = time.monotonic() - 60.0
    ownership.lease.rejoined(time.monotonic())
    assert ownership.lease.valid(time.monotonic())
    assert not ownership.may_write(), "the old tokens may be another worker's by now"
    # the next rebalance begins: every task is taken over anew (new token,
    # fenced once restored), and the worker may write again
    old = ownership.token(TOPIC, 0)
    ownership.book.begin(2, [tp], ownership.lease.losses)
    assert ownership.may_write()
    assert ownership.token(TOPIC, 0) is None and ownership.taken_over() == {tp}
    ownership.book.marked(tp)
    assert ownership.token(TOPIC, 0) not in (None, old)
