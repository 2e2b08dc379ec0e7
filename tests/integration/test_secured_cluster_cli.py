"""`replog cluster up --security sasl_ssl|ssl`: a secured local cluster in one command. kcat reads the
written DIR/client.properties and lists the brokers over SASL_SSL with the admin's SCRAM-SHA-512 login (or
mTLS with the admin's certificate); `replog` client commands get in with `--command-config`, and without it
nobody does; the brokers replicate over the same TLS listener. Whatever fails, the cluster is brought down."""

import shutil
import stat
import subprocess
import sys

import pytest

from tests.integration.test_cluster_cli import bring_down, run

TIMEOUT_S = 60
pytestmark = pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed")


def kcat(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["kcat", *args], input=stdin, capture_output=True, text=True, timeout=TIMEOUT_S)


def replog(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "replog", *args], input=stdin, capture_output=True, text=True,
                          timeout=TIMEOUT_S)


def test_a_sasl_ssl_cluster_in_one_command(tmp_path):
    data = ["--data-dir", str(tmp_path)]
    try:
        up = run("cluster", "up", "--brokers", "2", "--security", "sasl_ssl", *data)
        assert up.returncode == 0, up.stderr
        bootstrap = up.stdout.splitlines()[0]
        client = tmp_path / "client.properties"
        assert stat.S_IMODE(client.stat().st_mode) == 0o600
        text = client.read_text()
        assert "security.protocol=SASL_SSL" in text and "sasl.username=admin" in text
        assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in (tmp_path / "tls").glob("broker-*.pem"))
        # The controllers keep the admin's salted password only (they log in to the others with their own).
        admin_password = next(line.split("=", 1)[1] for line in text.splitlines() if line.startswith("sasl.password="))
        assert admin_password not in (tmp_path / "controller.properties").read_text()

        listed = kcat("-F", str(client), "-b", bootstrap, "-L")
        assert listed.returncode == 0, listed.stderr
        assert "2 brokers:" in listed.stdout and "sasl_ssl://" in listed.stdout

        secured = ["--bootstrap-server", bootstrap, "--command-config", str(client)]
        created = replog("topics", "create", "--topic", "secrets", "--replication-factor", "2", *secured)
        assert created.returncode == 0, created.stderr
        produced = kcat("-F", str(client), "-b", bootstrap, "-P", "-t", "secrets", stdin="hello\nworld\n")
        assert produced.returncode == 0, produced.stderr
        consumed = replog("consume", "secrets", "--from-beginning", "--max-messages", "2", *secured)
        assert consumed.stdout.split() == ["hello", "world"], consumed.stderr
        # Both replicas in the ISR: the follower replicates over the same SASL_SSL listener.
        described = replog("topics", "describe", "--topic", "secrets", *secured)
        assert "Isr: 1,2" in described.stdout or "Isr: 2,1" in described.stdout, described.stdout

        refused = replog("topics", "list", "--bootstrap-server", bootstrap)  # no TLS, no login
        assert refused.returncode == 1
        status = run("cluster", "status", *data)
        assert status.returncode == 0, status.stdout + status.stderr
    finally:
        bring_down(tmp_path)


def test_an_mtls_cluster_in_one_command(tmp_path):
    data = ["--data-dir", str(tmp_path)]
    try:
        up = run("cluster", "up", "--brokers", "1", "--security", "ssl", *data)
        assert up.returncode == 0, up.stderr
        bootstrap = up.stdout.splitlines()[0]
        client = tmp_path / "client.properties"
        assert "ssl.key.location" in client.read_text()
        listed = kcat("-F", str(client), "-b", bootstrap, "-L")
        assert listed.returncode == 0, listed.stderr
        assert "ssl://" in listed.stdout
        no_certificate = kcat("-b", bootstrap, "-X", "security.protocol=SSL",
                              "-X", f"ssl.ca.location={tmp_path / 'tls' / 'ca.pem'}", "-L", "-m", "5")
        assert no_certificate.returncode != 0
        described = replog("topics", "list", "--bootstrap-server", bootstrap, "--command-config", str(client))
        assert described.returncode == 0, described.stderr
    finally:
        bring_down(tmp_path)
