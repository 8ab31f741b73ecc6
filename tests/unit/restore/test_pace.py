"""The rest rule that keeps standby and warm-up restoring to a share of the time."""

from __future__ import annotations

import pytest

from streamjoin.errors import ConfigurationError
from streamjoin.restore.pace import STANDBY_SHARE_ENV, RestPacer, standby_share


@pytest.mark.parametrize("share", [0.1, 0.25, 0.5, 0.9])
def test_busy_time_is_the_share_of_busy_plus_rest(share: float) -> None:
    pacer = RestPacer(share)
    for busy in (0.001, 0.05, 0.3, 2.0):
        rest = pacer.rest_after(busy, 500)
        assert busy / (busy + rest) == pytest.approx(share)


def test_a_share_of_one_never_rests() -> None:
    assert RestPacer(1).rest_after(3.0, 10_000) == 0.0


def test_a_round_that_applied_nothing_earns_no_rest() -> None:
    pacer = RestPacer(0.5)
    assert pacer.rest_after(0.4, 0) == 0.0
    assert pacer.rest_after(0.0, 100) == 0.0


@pytest.mark.parametrize("share", [0, -0.5, 1.5, True, "half", None])
def test_a_share_outside_zero_to_one_is_refused_with_the_fix(share: object) -> None:
    with pytest.raises(ConfigurationError, match=r"in \(0, 1\]"):
        RestPacer(share)  # type: ignore[arg-type]


def test_totals_count_only_rounds_that_applied_records_and_the_rests_taken() -> None:
    pacer = RestPacer(0.5)
    pacer.rest_after(0.2, 100)
    pacer.rest_after(0.3, 0)  # a wait for new records, not work
    pacer.note_rest(0.21)
    pacer.note_rest(-1.0)  # a clock that went backwards adds nothing
    assert pacer.totals() == {"share": 0.5, "applied": 100, "busy": 0.2, "resting": 0.21}


def test_the_environment_variable_beats_the_default_and_a_bad_one_is_named() -> None:
    assert standby_share({}, 0.5) == 0.5
    assert standby_share({STANDBY_SHARE_ENV: " "}, 0.5) == 0.5
    assert standby_share({STANDBY_SHARE_ENV: "0.25"}, 0.5) == 0.25
    with pytest.raises(ConfigurationError, match="STREAMJOIN_STANDBY_SHARE='half'"):
        standby_share({STANDBY_SHARE_ENV: "half"}, 0.5)
