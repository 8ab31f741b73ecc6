"""The ``streamjoin`` command line.

Each sub-command lives in its own module and is registered here; modules that
need faust import it inside the command so ``streamjoin assign`` stays fast.
"""

from __future__ import annotations

import click

from streamjoin import __version__
from streamjoin.cli.assign import assign_command
from streamjoin.cli.broker import broker_command
from streamjoin.cli.demo import demo_command
from streamjoin.cli.spark import spark_command
from streamjoin.cli.topics import topics_command
from streamjoin.cli.worker import worker_command

__all__ = ["main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="streamjoin")
def main() -> None:
    """streamjoin: stateful stream-stream joins on Kafka, Faust-style."""


main.add_command(assign_command)
main.add_command(broker_command)
main.add_command(demo_command)
main.add_command(spark_command)
main.add_command(topics_command)
main.add_command(worker_command)
