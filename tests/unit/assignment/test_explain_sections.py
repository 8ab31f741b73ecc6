"""The --explain account section by section, and the grouping error it cannot show:
a co-partition group no member reads whole."""

from __future__ import annotations

import dataclasses

import pytest

from streamjoin.assignment import InvalidGroupStateError, assign, parse_group_state
from streamjoin.assignment.explain import explain

DOC = {
    "topics": {"imp": 4, "clk": 4, "imp-changelog": 4},
    "copartition": [["imp", "clk"]],
    "changelogs": ["imp-changelog"],
    "members": [
        {"id": "a", "topics": ["clk", "imp", "imp-changelog"]},
        {"id": "b", "topics": ["clk", "imp", "imp-changelog"]},
    ],
}


def test_withheld_and_cross_rack_tasks_are_listed_per_group_in_their_own_sections() -> None:
    result = assign(parse_group_state(DOC))
    name = result.groups[0].name
    shown = dataclasses.replace(
        result,
        withheld=((0, 1), (0, 3)),
        cross_rack=((0, 2, "b", 7, "balance"),),
    )
    lines = explain(shown).splitlines()
    withheld = next(i for i, line in enumerate(lines) if line.startswith("withheld (2; "))
    assert lines[withheld + 1] == f"  {name}[1, 3]"
    assert lines[withheld + 2].startswith("cross-rack (1; the active reads partitions")
    assert lines[withheld + 3].startswith(f"  {name}[2] on b: 7 across racks, balance: the members")
    assert lines[withheld + 4] == "summary:"
    assert lines.index("moves: none") < withheld
    assert "withheld (" not in explain(result) and "cross-rack (" not in explain(result)


def test_a_group_nobody_reads_whole_names_each_topic_and_its_subscribers() -> None:
    doc = {
        "topics": {"imp": 2, "clk": 2},
        "copartition": [["imp", "clk"]],
        "members": [
            {"id": "a", "topics": ["imp"]},
            {"id": "b", "topics": ["imp"]},
            {"id": "c", "topics": ["clk"]},
        ],
    }
    with pytest.raises(InvalidGroupStateError) as raised:
        assign(parse_group_state(doc))
    assert str(raised.value).startswith(
        "no member subscribes to all of the co-partitioned topics "
        "'clk' (subscribed by 1 members), 'imp' (subscribed by 2 members); "
        "a task can only go to a member that reads every one of its topics."
    )
