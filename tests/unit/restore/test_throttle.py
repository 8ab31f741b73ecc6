"""The rest rule that keeps standby and warm-up restoring to a share of the time."""

from __future__ import annotations

import pytest

from streamjoin.errors import ConfigurationError
from streamjoin.restore.throttle import RestoreThrottle, checked_share


@pytest.mark.parametrize("share", [0.1, 0.25, 0.5, 0.9])
def test_busy_time_is_the_share_of_busy_plus_rest(share: float) -> None:
    throttle = RestoreThrottle(share)
    for busy in (0.001, 0.05, 0.3, 2.0):
        rest = throttle.rest_after(busy, 500)
        assert busy / (busy + rest) == pytest.approx(share)


def test_a_share_of_one_never_rests() -> None:
    assert RestoreThrottle(1).rest_after(3.0, 10_000) == 0.0


def test_a_round_that_applied_nothing_earns_no_rest() -> None:
    throttle = RestoreThrottle(0.5)
    assert throttle.rest_after(0.4, 0) == 0.0
    assert throttle.rest_after(0.0, 100) == 0.0


@pytest.mark.parametrize("share", [0, -0.5, 1.5, True, "half", None])
def test_a_share_outside_zero_to_one_is_refused_with_the_fix(share: object) -> None:
    with pytest.raises(ConfigurationError, match=r"in \(0, 1\]"):
        RestoreThrottle(share)  # type: ignore[arg-type]


def test_totals_count_only_rounds_that_applied_records_and_the_rests_taken() -> None:
    throttle = RestoreThrottle(0.5)
    throttle.rest_after(0.2, 100)
    throttle.rest_after(0.3, 0)  # a wait for new records, not work
    throttle.note_rest(0.21)
    throttle.note_rest(-1.0)  # a clock that went backwards adds nothing
    assert throttle.totals() == {"share": 0.5, "applied": 100, "busy": 0.2, "resting": 0.21}


@pytest.mark.parametrize(("share", "checked"), [(1, 1.0), (0.25, 0.25), (1e-3, 1e-3)])
def test_a_share_in_zero_to_one_is_checked_once_for_worker_and_throttle(
    share: float, checked: float
) -> None:
    assert checked_share(share) == checked
    assert RestoreThrottle(share).share == checked


@pytest.mark.parametrize("share", [0, 1.5, True, "0.5"])
def test_checked_share_refuses_what_the_throttle_refuses(share: object) -> None:
    with pytest.raises(ConfigurationError, match=r"in \(0, 1\]"):
        checked_share(share)
