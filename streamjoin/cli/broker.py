"""``streamjoin broker``: run the embedded Kafka-protocol broker in the foreground."""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from streamjoin.dev.broker import EmbeddedBroker
    from streamjoin.dev.faults import BrokerBehindProxy

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
@click.option(
    "--faults",
    is_flag=True,
    help="Put a fault-injecting proxy on --port in front of the broker; read fault "
    "commands (cut, cut-after N, stall S, slow MS [BYTES_PER_S], heal, status, help) "
    "on standard input.",
)
def broker_command(port: int, verbose: bool, faults: bool) -> None:
    """Run the embedded broker (Tansu, in memory) on loopback until Ctrl-C.

    Prints the bootstrap address on the first line of standard output.
    All topics and offsets are lost when it stops. With ``--faults`` that
    address is a proxy that every connection passes through, and each line
    read on standard input is a fault to inject (``help`` lists them).
    """
    from streamjoin.dev.broker import BrokerOptions, EmbeddedBroker

    options = BrokerOptions(port=port, quiet=not verbose, die_with_parent=True)
    if not faults:
        broker = EmbeddedBroker(options)
        _serve(broker, broker, f"listening on {broker.bootstrap}", lambda: None)
        return
    from streamjoin.dev.faults import BrokerBehindProxy

    behind = BrokerBehindProxy(replace(options, port=0), port=port)
    _serve(
        behind,
        behind.broker,
        f"behind a fault proxy on {behind.bootstrap}; type fault commands ('help' lists them)",
        lambda: _read_fault_commands(behind),
    )


def _serve(service: Any, broker: EmbeddedBroker, where: str, started: Callable[[], None]) -> None:
    """Start *service* (the broker, or the broker behind its proxy), print its
    address, call *started*, and run until SIGINT or SIGTERM, then stop it."""
    from streamjoin.dev.errors import DevError

    # the handler only records the signal: it runs in the main thread between
    # bytecodes, so taking a lock there (threading.Event.set) could deadlock on
    # the lock the loop's own wait holds at that moment
    signalled: list[int] = []

    def _on_signal(signum: int, _frame: object) -> None:
        signalled.append(signum)

    previous = {sig: signal.signal(sig, _on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        try:
            service.start()
        except DevError as exc:
            raise click.ClickException(str(exc)) from exc
        click.echo(service.bootstrap)
        click.echo(f"embedded broker pid {broker.pid} {where}; Ctrl-C stops it", err=True)
        sys.stdout.flush()
        started()
        while not signalled:
            time.sleep(0.2)  # the handler runs within it; the loop sees the flag next
            if not broker.running():
                raise click.ClickException("the embedded broker exited unexpectedly")
    finally:
        service.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    click.echo("embedded broker stopped", err=True)


def _read_fault_commands(behind: BrokerBehindProxy) -> None:
    """Carry out each line of standard input as a fault command, in a thread."""
    from streamjoin.dev.faults import run_command

    proxy = behind.proxy
    if proxy is None:  # start() sets it or raises
        raise click.ClickException("the fault proxy did not start")

    def read_commands() -> None:
        for line in sys.stdin:
            try:
                reply = run_command(proxy, line)
            except ValueError as exc:
                reply = f"error: {exc}"
            if reply:
                click.echo(reply, err=True)

    threading.Thread(target=read_commands, daemon=True).start()
