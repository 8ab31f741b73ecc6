"""The pure assignment core of streamjoin.

No faust, aiokafka, asyncio or I/O here: plain frozen values in, plain frozen
values out. ``assign`` works on :class:`GroupState`; ``assign_document`` on the
JSON document documented in docs/assignment.rst.
"""

from streamjoin.assignment.assignor import assign
from streamjoin.assignment.document import assign_document, parse_group_state, render_assignment
from streamjoin.assignment.errors import (
    AssignmentError,
    CopartitioningError,
    InvalidGroupStateError,
)
from streamjoin.assignment.model import (
    Assignment,
    GroupState,
    MemberAssignment,
    MemberState,
    Move,
    TaskGroup,
)

__all__ = [
    "Assignment",
    "AssignmentError",
    "CopartitioningError",
    "GroupState",
    "InvalidGroupStateError",
    "MemberAssignment",
    "MemberState",
    "Move",
    "TaskGroup",
    "assign",
    "assign_document",
    "parse_group_state",
    "render_assignment",
]
