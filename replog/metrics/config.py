"""The metrics.* keys, shared by brokers and the controller."""

from dataclasses import dataclass
from pathlib import Path

DEFAULT_DUMP_SUBDIR = "metrics-dumps"


@dataclass(frozen=True)
class MetricsConfig:
    port: int = -1  # metrics.port: the Prometheus endpoint; -1 off, 0 any free port
    host: str = "127.0.0.1"  # metrics.host
    dump_dir: Path | None = None  # metrics.dump.dir; None: DEFAULT_DUMP_SUBDIR in the process's data dir
    dump_interval_ms: int = 1000  # metrics.dump.interval.ms; 0 turns dumps off
    dump_max_bytes: int = 64 * 1024 * 1024  # metrics.dump.max.bytes: a new file past this
    dump_max_files: int = 10  # metrics.dump.max.files: the oldest go past this

    def __post_init__(self) -> None:
        if not -1 <= self.port < 65536:
            raise ValueError("metrics.port must be -1 (off), 0 (any) or a port")
        if self.dump_interval_ms < 0 or self.dump_max_bytes <= 0 or self.dump_max_files <= 0:
            raise ValueError("metrics.dump.interval.ms must be >= 0, metrics.dump.max.* positive")

    def dump_dir_under(self, data_dir: Path) -> Path:
        return self.dump_dir if self.dump_dir is not None else Path(data_dir) / DEFAULT_DUMP_SUBDIR


_KEYS = {
    "metrics.port": ("port", int),
    "metrics.host": ("host", str),
    "metrics.dump.dir": ("dump_dir", Path),
    "metrics.dump.interval.ms": ("dump_interval_ms", int),
    "metrics.dump.max.bytes": ("dump_max_bytes", int),
    "metrics.dump.max.files": ("dump_max_files", int),
}


def split_metrics_config(props: dict[str, str]) -> tuple[MetricsConfig, dict[str, str]]:
    """The MetricsConfig from the metrics.* keys, and the other properties; ValueError names a bad value."""
    values: dict[str, object] = {}
    rest = {}
    for key, raw in props.items():
        if key not in _KEYS:
            rest[key] = raw
            continue
        attribute, parse = _KEYS[key]
        try:
            values[attribute] = parse(raw)
        except ValueError as e:
            raise ValueError(f"invalid value for {key}: {raw!r} ({e})") from e
    return MetricsConfig(**values), rest  # type: ignore[arg-type]
