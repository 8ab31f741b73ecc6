"""The rejoin pace setting: unset by default (the rule after a missed generation),
a whole number of milliseconds from ``STREAMJOIN_REJOIN_PACE_MS``; the launcher
of workers on the embedded broker sets it."""

from __future__ import annotations

import pytest

from streamjoin.dev.process import EMBEDDED_REJOIN_PACE_MS
from streamjoin.membership.settings import ENV_NAMES, MemberSettings, MemberSettingsError


def test_unset_means_the_rule_and_a_number_is_milliseconds() -> None:
    assert MemberSettings.from_env({}).rejoin_pace_ms is None
    env = {ENV_NAMES["rejoin_pace_ms"]: EMBEDDED_REJOIN_PACE_MS}
    assert MemberSettings.from_env(env).rejoin_pace_ms == 1200


@pytest.mark.parametrize("raw", ["1.5", "soon"])
def test_a_malformed_pace_says_what_to_give(raw: str) -> None:
    with pytest.raises(MemberSettingsError, match=r"STREAMJOIN_REJOIN_PACE_MS.*whole number"):
        MemberSettings.from_env({ENV_NAMES["rejoin_pace_ms"]: raw})


def test_a_negative_pace_is_refused() -> None:
    with pytest.raises(MemberSettingsError, match="rejoin pace"):
        MemberSettings(rejoin_pace_ms=-1)
