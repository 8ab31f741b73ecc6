"""The SparkSession of a batch run: quiet, local by default, always stopped.

:func:`spark_session` is what the CLI uses: it starts a session (or joins the
one already active in this process, e.g. a test's or a notebook's, and then
leaves it running), and stops what it started when the block ends, so no JVM
outlives a command. :func:`create_session` only starts one.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["DEFAULT_MASTER", "create_session", "describe", "spark_session"]

#: master used when neither ``--spark-master`` nor spark-submit says otherwise
DEFAULT_MASTER = "local[*]"

# Spark's own log output: warnings and errors only, on stderr. Silenced: the
# Hadoop "native library" notice (harmless on every laptop), and the stack
# traces a failing task logs on its way up: the job's error says it in a line.
_LOG4J2 = """\
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = stderr
appender.console.type = Console
appender.console.name = stderr
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n%ex
logger.native.name = org.apache.hadoop.util.NativeCodeLoader
logger.native.level = error
logger.parquet.name = org.apache.parquet
logger.parquet.level = error
logger.executor.name = org.apache.spark.executor.Executor
logger.executor.level = off
logger.tasks.name = org.apache.spark.scheduler.TaskSetManager
logger.tasks.level = off
"""


def _defaults(master: str) -> dict[str, str]:
    conf = {
        "spark.sql.session.timeZone": "UTC",
        "spark.ui.showConsoleProgress": "false",
        "spark.log.level": "WARN",
    }
    if master.startswith("local"):
        # a short local batch run: no web UI to bind, few shuffle partitions
        conf["spark.ui.enabled"] = "false"
        conf["spark.sql.shuffle.partitions"] = "16"
    return conf


def create_session(
    master: str | None = None,
    conf: Mapping[str, str] | None = None,
    app_name: str = "streamjoin-batch",
) -> SparkSession:
    """Start (or get) a SparkSession with quiet logging; the caller stops it.

    Args:
        master: Spark master URL. ``None`` means the one spark-submit was given
            when running under spark-submit, else :data:`DEFAULT_MASTER`.
        conf: Spark settings; they override the defaults chosen here
            (UTC session time zone, no console progress bar, log level WARN,
            and for local masters no web UI and 16 shuffle partitions). Unless
            they set ``spark.log.level`` or a log4j2 configuration file, the
            driver logs warnings only, without task failure stack traces.
        app_name: the application name shown by the cluster manager.
    """
    from pyspark.sql import SparkSession

    under_submit = "PYSPARK_GATEWAY_PORT" in os.environ  # the JVM is spark-submit's
    if master is None and not under_submit:
        master = DEFAULT_MASTER
    settings = _defaults(master or "")
    settings.update(conf or {})
    builder = SparkSession.builder.appName(app_name)
    if master is not None:
        builder = builder.master(master)

    log_file = None
    saved_ip = os.environ.get("SPARK_LOCAL_IP")
    try:
        if not under_submit:
            java_opts = settings.get("spark.driver.extraJavaOptions", "")
            own_logging = "log4j2.configurationFile" in java_opts or "spark.log.level" in (
                conf or {}
            )
            if not own_logging:
                with tempfile.NamedTemporaryFile(
                    "w", prefix="streamjoin-log4j2-", suffix=".properties", delete=False
                ) as handle:
                    handle.write(_LOG4J2)
                log_file = handle.name
                java_opts = f"{java_opts} -Dlog4j2.configurationFile=file:{log_file}".strip()
                settings["spark.driver.extraJavaOptions"] = java_opts
            if (master or "").startswith("local") and saved_ip is None:
                # a local driver talks to itself only: bind to loopback (and skip
                # Spark's "hostname resolves to a loopback address" warning)
                os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
        for key, value in settings.items():
            builder = builder.config(key, value)
        spark = builder.getOrCreate()
    finally:
        if saved_ip is None:
            os.environ.pop("SPARK_LOCAL_IP", None)
        if log_file is not None:
            os.unlink(log_file)  # read once, when the driver JVM started
    spark.sparkContext.setLogLevel(settings["spark.log.level"])
    return spark


@contextmanager
def spark_session(
    master: str | None = None,
    conf: Mapping[str, str] | None = None,
    app_name: str = "streamjoin-batch",
) -> Iterator[SparkSession]:
    """A SparkSession for the duration of a ``with`` block.

    If this process already has an active session it is used as it is (its
    master and settings win) and left running. Otherwise a new one is started
    with :func:`create_session` and, when the block ends (even on error),
    stopped, and the driver JVM this process launched for it is shut down.
    """
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        yield active
        return
    own_jvm = SparkContext._gateway is None and "PYSPARK_GATEWAY_PORT" not in os.environ
    spark = create_session(master, conf, app_name)
    try:
        yield spark
    finally:
        spark.stop()
        if own_jvm:
            _shutdown_jvm()


def _shutdown_jvm(timeout: float = 30.0) -> None:
    """End the driver JVM pyspark launched (it exits when its stdin closes)."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    if gateway is None:
        return
    proc = getattr(gateway, "proc", None)
    try:
        gateway.shutdown()
    finally:
        SparkContext._gateway = None
        SparkContext._jvm = None
        if proc is not None:
            if proc.stdin is not None:
                proc.stdin.close()
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def describe(exc: BaseException) -> str:
    """One line saying why a Spark call failed (the root Java cause when there is one)."""
    java = getattr(exc, "java_exception", None)  # py4j's Py4JJavaError
    if java is not None:
        try:
            cause = java
            while cause.getCause() is not None and cause.getCause() != cause:
                cause = cause.getCause()
            text = str(cause.toString())
        except Exception:  # the gateway may be gone
            text = str(exc)
    else:
        text = str(exc)
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__
