"""Where the nodes the harness starts serve and dump their metrics, as `replog analyze` expects them."""

from pathlib import Path

METRICS_DIR = "metrics"  # DIR/metrics/<node name>: what `replog analyze --metrics DIR/metrics` reads


def metrics_properties(root: Path, name: str, port: int) -> dict[str, str]:
    """Each node serves /metrics on its own port and dumps under root/metrics/<name>."""
    return {"metrics.port": str(port), "metrics.dump.dir": str(root / METRICS_DIR / name)}
