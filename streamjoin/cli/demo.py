"""``streamjoin demo``: the main job, end to end on one machine."""

from __future__ import annotations

from pathlib import Path

import click


@click.command("demo")
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("demo-out"),
    show_default=True,
    help="Directory for the archive, the report and the logs.",
)
@click.option("--seed", type=int, default=7, show_default=True, help="Seed of the generator.")
@click.option(
    "--duration",
    type=click.FloatRange(20, None),
    default=60.0,
    show_default=True,
    help="Seconds of event generation (wall clock).",
)
@click.option(
    "--speed",
    type=click.FloatRange(0.1, None),
    default=60.0,
    show_default=True,
    help="Event-time seconds per wall-clock second.",
)
@click.option(
    "--rate",
    type=click.FloatRange(0.1, None),
    default=12.0,
    show_default=True,
    help="Impressions per second of event time.",
)
@click.option(
    "--partitions", type=click.IntRange(2, 64), default=6, show_default=True, help="Tasks."
)
@click.option("--spark-master", default="local[*]", show_default=True, help="Spark master URL.")
@click.option("--force", is_flag=True, help="Replace the contents of a non-empty --out.")
def demo_command(
    out: Path,
    seed: int,
    duration: float,
    speed: float,
    rate: float,
    partitions: int,
    spark_master: str,
    force: bool,
) -> None:
    """Run the ad-monetization pipeline: broker, generator, 3+1 workers (one
    killed midway), Spark report and reconciliation; exit 0 only when the
    stream and the batch join agree on every click."""
    from streamjoin.ads.demo.run import DemoOptions, run_demo
    from streamjoin.errors import StreamjoinError

    try:
        code = run_demo(
            DemoOptions(
                out=out,
                seed=seed,
                duration=duration,
                speed=speed,
                rate=rate,
                partitions=partitions,
                spark_master=spark_master,
                force=force,
            )
        )
    except StreamjoinError as exc:
        raise click.ClickException(str(exc)) from None
    raise SystemExit(code)
