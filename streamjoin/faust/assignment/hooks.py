"""What faust's own assignor does around an assignment: sensors and a tracing span.

faust's ``PartitionAssignor.assign`` calls ``app.sensors.on_assignment_start``,
then ``on_assignment_completed`` or ``on_assignment_error``, inside a
``coordinator_assignment`` span when the app has a tracer. Monitors (faust's
``Monitor``, the Prometheus, Datadog and statsd sensors) and OpenTelemetry rely
on those calls; :func:`observed_assignment` makes them for streamjoin's.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from streamjoin.faust.kafka.app import add_span_tags

if TYPE_CHECKING:
    from faust.types import AppT
    from faust.types.assignor import PartitionAssignorT

#: the assignment's figures (JSON values: Any)
Stats = Callable[[], Mapping[str, Any]]

__all__ = ["observed_assignment"]

T = TypeVar("T")


def observed_assignment(
    app: AppT, assignor: PartitionAssignorT, run: Callable[[], T], stats: Stats
) -> T:
    """``run()`` between faust's sensor calls, in a span when the app has a tracer.

    The completed call's per-sensor state also gets ``stats()`` (the
    assignment's figures) under ``"streamjoin"``.
    """
    tracer = getattr(app, "tracer", None)
    if not tracer:
        return _sensed(app, assignor, run, stats)
    span = tracer.get_tracer("_faust").start_span(
        operation_name="coordinator_assignment", tags={"hostname": socket.gethostname()}
    )
    with span:
        out = _sensed(app, assignor, run, stats)
        add_span_tags(app, span)
        span.set_tag("assignment", out)
    return out


def _sensed(app: AppT, assignor: PartitionAssignorT, run: Callable[[], T], stats: Stats) -> T:
    sensors = app.sensors
    state = sensors.on_assignment_start(assignor)
    try:
        out = run()
    except MemoryError:
        raise
    except Exception as exc:
        sensors.on_assignment_error(assignor, state, exc)
        raise
    for per_sensor in state.values() if isinstance(state, dict) else ():
        if isinstance(per_sensor, dict):
            per_sensor["streamjoin"] = dict(stats())
    sensors.on_assignment_completed(assignor, state)
    return out
