"""The broker process: `replog broker start` loads the configuration, refuses one it cannot serve, and runs the
Broker (server.py) on uvloop until SIGTERM or SIGINT, writing its ready file once it serves."""

import asyncio
import logging
import signal
import sys

from replog.process_startup import end_quiet_start
from replog.server.listener_socket import write_ready_file
from replog.server.parent_watch import stop_when_parent_exits

from .config import BrokerConfig, load_config, report_unknown_keys
from .server import Broker, listener_securities


async def serve(config: BrokerConfig) -> None:
    broker = Broker(config)
    await broker.start()
    write_ready_file(port=broker.port, metrics_port=broker.metrics_service.port,
                     listener_ports=broker.listener_ports)
    end_quiet_start()
    stop = broker.stop_requested
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    stop_when_parent_exits(loop, stop.set)
    await stop.wait()
    await broker.stop()


def run_broker(config_path: str | None, overrides: list[str]) -> int:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        config = load_config(config_path, overrides)
        listener_securities(config)  # a listener that cannot serve its protocol stops us here, with a message
        if config.controller_addresses:  # and so do TLS keys the links to the other nodes cannot load
            config.broker_link_security()
            config.controller_link_security()
    except (OSError, ValueError) as e:
        print(f"replog: bad broker configuration: {e}", file=sys.stderr)
        return 2
    report_unknown_keys(config)
    try:
        import uvloop
    except ImportError:
        asyncio.run(serve(config))
    else:
        uvloop.run(serve(config))
    return 0
