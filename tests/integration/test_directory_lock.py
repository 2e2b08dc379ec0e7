"""Two servers on one data directory: the second refuses to start, naming the directory and the holder, and
the first keeps serving (issue 17: two brokers on one log dir both appended, and the log held two batches
at offset 10)."""

import subprocess
import sys

from replog.client.sync import SyncAdmin


def test_second_broker_on_a_used_log_dir_refuses_to_start(broker, tmp_path):
    second = subprocess.run(
        [sys.executable, "-m", "replog", "broker", "start",
         "--override", "listeners=PLAINTEXT://127.0.0.1:0", "--override", f"log.dirs={broker.log_dir}"],
        capture_output=True, text=True, timeout=60,
    )
    assert second.returncode == 1
    assert f"{broker.log_dir} is in use by another process (pid {broker.proc.pid})" in second.stderr
    assert "Traceback" not in second.stderr
    admin = SyncAdmin(broker.bootstrap)
    try:
        assert admin.list_topics() == []  # the first broker still serves
    finally:
        admin.close()


def test_second_controller_on_a_used_metadata_dir_refuses_to_start(tmp_path):
    metadata_dir = tmp_path / "metadata"
    argv = [sys.executable, "-m", "replog", "controller", "start",
            "--override", "listeners=CONTROLLER://127.0.0.1:0", "--override", f"metadata.log.dir={metadata_dir}",
            "--override", "inter.broker.secret=s"]
    first = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        lock_file = metadata_dir / ".lock"
        for _ in range(600):  # up to 30 s for the first to take its lock
            if lock_file.exists() and lock_file.read_text().strip() == str(first.pid):
                break
            assert first.poll() is None, first.stderr.read()
            subprocess.run(["sleep", "0.05"])
        second = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        assert second.returncode == 1
        assert f"{metadata_dir} is in use by another process (pid {first.pid})" in second.stderr
        assert first.poll() is None
    finally:
        first.terminate()
        first.wait(30)


def test_a_controller_with_a_corrupt_quorum_state_file_refuses_to_start_naming_it(tmp_path):
    state_file = tmp_path / "metadata" / "__cluster_metadata-0" / "quorum-state"
    state_file.parent.mkdir(parents=True)
    state_file.write_text("{half a file")
    refused = subprocess.run(
        [sys.executable, "-m", "replog", "controller", "start", "--override", "listeners=CONTROLLER://127.0.0.1:0",
         "--override", f"metadata.log.dir={tmp_path / 'metadata'}", "--override", "inter.broker.secret=s"],
        capture_output=True, text=True, timeout=60)
    assert refused.returncode == 1
    assert f"the controller cannot start: {state_file}: not a quorum-state file" in refused.stderr
    assert "Traceback" not in refused.stderr
