"""``streamjoin assign``: what would the assignor do with this group state?"""

from __future__ import annotations

import json
import sys
from typing import IO

import click

from streamjoin._gc import gc_paused
from streamjoin.assignment import assign, parse_group_state, render_assignment
from streamjoin.assignment.errors import AssignmentError
from streamjoin.assignment.explain import explain

__all__ = ["assign_command"]


@click.command("assign")
@click.argument("state", type=click.File("r"), default="-")
@click.option(
    "--explain", "show_explain", is_flag=True, help="Also print every move and why (to stderr)."
)
@click.option("--compact", is_flag=True, help="Print the JSON on one line.")
def assign_command(state: IO[str], show_explain: bool, compact: bool) -> None:
    """Read a group state as JSON (file or stdin) and print the assignment as JSON.

    The formats are documented in docs/assignment.rst. Exit code 2
    on bad input, with a message naming the offending field.
    """
    try:
        doc = json.load(state)
    except json.JSONDecodeError as exc:
        raise click.UsageError(
            f"{state.name}: not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})"
        ) from None
    try:
        with gc_paused():
            result = assign(parse_group_state(doc))
    except AssignmentError as exc:
        raise click.UsageError(str(exc)) from None
    indent = None if compact else 2
    click.echo(json.dumps(render_assignment(result), indent=indent, sort_keys=False))
    if show_explain:
        click.echo(explain(result), file=sys.stderr)
