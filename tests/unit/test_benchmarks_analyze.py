"""The analyze benchmark's measuring parts that need no Spark: the job's process tree, whose CPU time it
reads, and its progress lines."""

import os
import signal
import subprocess
import sys
import time

from benchmarks.analyze import PROGRESS_LINE, live_cpu_seconds, process_tree
from benchmarks.harness import cpu_seconds


def test_the_process_tree_holds_the_process_and_its_grandchildren():
    # A child that starts a grandchild, as the job's Python starts the JVM, and waits for it.
    code = "import subprocess, sys; subprocess.run([sys.executable, '-c', 'import time; time.sleep(60)'])"
    child = subprocess.Popen([sys.executable, "-c", code])
    try:
        deadline = time.monotonic() + 10  # the grandchild appears once the child's interpreter starts it
        while len(tree := process_tree(child.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert tree[0] == child.pid and len(tree) == 2
        assert process_tree(tree[1]) == [tree[1]]
    finally:
        for pid in process_tree(child.pid)[::-1]:
            os.kill(pid, signal.SIGTERM)
        child.wait()


def test_progress_lines_give_the_seconds_and_the_step():
    match = PROGRESS_LINE.match("[   33.8 s] Spark 4.3.0 on local[2]")
    assert match is not None and (float(match["seconds"]), match["step"]) == (33.8, "Spark 4.3.0 on local[2]")
    assert PROGRESS_LINE.match("WARN NativeCodeLoader: Unable to load native-hadoop library") is None


def test_the_cpu_time_of_a_tree_skips_a_process_that_exited_meanwhile():
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # reaped: its /proc entry is gone
    before = cpu_seconds([os.getpid()])
    assert live_cpu_seconds([os.getpid(), gone.pid]) >= before
