"""``streamjoin broker``: run the embedded Kafka-protocol broker in the foreground."""

from __future__ import annotations

import signal
import sys
import threading

import click

__all__ = ["broker_command"]


@click.command("broker")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=9092,
    show_default=True,
    help="TCP port on 127.0.0.1 (0 picks a free one).",
)
@click.option("--verbose", is_flag=True, help="Show the broker's own log output.")
def broker_command(port: int, verbose: bool) -> None:
    """Run the embedded broker (Tansu, in memory) on loopback until Ctrl-C.

    Prints the bootstrap address on the first line of standard output.
    All topics and offsets are lost when it stops.
    """
    from streamjoin.dev.broker import BrokerOptions, EmbeddedBroker
    from streamjoin.dev.errors import DevError

    broker = EmbeddedBroker(BrokerOptions(port=port, quiet=not verbose, die_with_parent=True))
    stop = threading.Event()

    def _on_signal(signum: int, _frame: object) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, _on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        try:
            broker.start()
        except DevError as exc:
            raise click.ClickException(str(exc)) from exc
        click.echo(broker.bootstrap)
        click.echo(
            f"embedded broker pid {broker.pid} listening on {broker.bootstrap}; Ctrl-C stops it",
            err=True,
        )
        sys.stdout.flush()
        while not stop.wait(0.5):
            if not broker.running():
                raise click.ClickException("the embedded broker exited unexpectedly")
    finally:
        broker.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    click.echo("embedded broker stopped", err=True)
