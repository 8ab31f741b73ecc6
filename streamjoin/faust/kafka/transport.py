"""faust's aiokafka transport with cooperative rebalancing.

The same transport as faust's ``kafka://`` one, except that its worker
consumer's group coordinator rebalances cooperatively
(:func:`~streamjoin.faust.kafka.cooperative.install_cooperative`), installed
right after the aiokafka consumer started and before it subscribes, so that
its very first JoinGroup already offers the cooperative protocol.
``streamjoin.App`` uses it when cooperative rebalancing is on
(``cooperative=True`` or ``STREAMJOIN_COOPERATIVE=1``; off by default).

Subclassed (faust-streaming 0.15.3): ``faust.transport.drivers.aiokafka``'s
``Transport`` (its ``Consumer`` class attribute), ``Consumer``
(``_new_consumer_thread``, faust's factory of its consumer thread) and
``AIOKafkaConsumerThread`` (``on_start``); the consumer it creates is read
through :func:`~streamjoin.faust.kafka.session.aiokafka_consumer`.
"""

from __future__ import annotations

import logging
from typing import Any, ClassVar

from faust.transport.drivers import aiokafka as driver

from streamjoin.faust.kafka.cooperative import install_cooperative
from streamjoin.faust.kafka.session import aiokafka_consumer

__all__ = ["CooperativeTransport"]

logger = logging.getLogger(__name__)


class _CooperativeConsumerThread(driver.AIOKafkaConsumerThread):
    async def on_start(self) -> None:
        await super().on_start()
        aio = aiokafka_consumer(self.consumer)
        installed = aio is not None and not self.app.client_only and install_cooperative(aio)
        if installed:
            logger.info("cooperative rebalancing: on (protocol offered first)")


class _CooperativeConsumer(driver.Consumer):
    def _new_consumer_thread(self) -> driver.AIOKafkaConsumerThread:
        return _CooperativeConsumerThread(self, loop=self.loop, beacon=self.beacon)


class CooperativeTransport(driver.Transport):
    """faust's aiokafka transport whose worker consumer rebalances cooperatively."""

    Consumer: ClassVar[Any] = _CooperativeConsumer  # Any: faust's ConsumerT class
