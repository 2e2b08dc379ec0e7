"""A process's metrics, as its MetricsConfig asks: the Prometheus endpoint and the periodic dumps."""

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path

from prometheus_client import CollectorRegistry
from prometheus_client.registry import Collector

from .config import MetricsConfig
from .dump_writer import DumpWriter, MetricsDumper
from .http_server import start_metrics_server

log = logging.getLogger(__name__)


class MetricsService:
    def __init__(self, config: MetricsConfig, *, node_id: int, role: str, data_dir: Path,
                 collector: Collector, snapshot: Callable[[int], tuple[str, dict]]) -> None:
        self.config = config
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(collector)
        self.dumper: MetricsDumper | None = None
        if config.dump_interval_ms > 0:
            writer = DumpWriter(config.dump_dir_under(data_dir), max_bytes=config.dump_max_bytes,
                                max_files=config.dump_max_files)
            self.dumper = MetricsDumper(writer, node_id=node_id, role=role, interval_ms=config.dump_interval_ms,
                                        snapshot=snapshot)
        self._server: asyncio.Server | None = None

    @property
    def port(self) -> int | None:
        """Where /metrics is served, or None when metrics.port is -1."""
        return None if self._server is None else self._server.sockets[0].getsockname()[1]

    async def start(self) -> None:
        if self.config.port >= 0:
            self._server = await start_metrics_server(self.config.host, self.config.port, self.registry)
            log.info("metrics on http://%s:%d/metrics", self.config.host, self.port)
        if self.dumper is not None:
            self.dumper.start()
            log.info("metrics dumps every %d ms to %s", self.config.dump_interval_ms, self.dumper.writer.directory)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        if self.dumper is not None:
            await self.dumper.stop()
