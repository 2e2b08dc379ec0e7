"""The quiet start of a replog process (replog/process_startup.py), each case in a fresh interpreter: the
collector's state and the modules loaded are per process."""

import json
import subprocess
import sys


def run_in_fresh_interpreter(code: str) -> dict:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    return json.loads(done.stdout)


def test_quiet_start_loads_kio_without_hypothesis_or_the_collector():
    state = run_in_fresh_interpreter(
        "import gc, json, sys\n"
        "from replog.process_startup import begin_quiet_start\n"
        "begin_quiet_start()\n"
        "import replog.protocol.messages\n"
        "print(json.dumps({'gc': gc.isenabled(), 'hypothesis': sys.modules.get('hypothesis', 'absent')}))\n")
    assert state == {"gc": False, "hypothesis": None}


def test_end_of_quiet_start_freezes_what_was_loaded_and_collects_again():
    state = run_in_fresh_interpreter(
        "import gc, json\n"
        "from replog.process_startup import begin_quiet_start, end_quiet_start\n"
        "begin_quiet_start()\n"
        "import replog.broker.server\n"
        "end_quiet_start()\n"
        "print(json.dumps({'gc': gc.isenabled(), 'frozen': gc.get_freeze_count()}))\n")
    assert state["gc"] is True
    assert state["frozen"] > 10_000  # the broker's modules: functions, classes, dicts


def test_end_of_quiet_start_without_a_beginning_changes_nothing():
    state = run_in_fresh_interpreter(
        "import gc, json\n"
        "from replog.process_startup import end_quiet_start\n"
        "gc.disable()\n"
        "end_quiet_start()\n"
        "print(json.dumps({'gc': gc.isenabled(), 'frozen': gc.get_freeze_count()}))\n")
    assert state == {"gc": False, "frozen": 0}


def test_cli_commands_run_with_the_collector_back_on():
    out = subprocess.run(
        [sys.executable, "-c",
         "import gc, sys\n"
         "import replog.__main__ as entry\n"
         "import replog.cli\n"
         "replog.cli.cmd_log_dump = lambda args: print(gc.isenabled(), gc.get_freeze_count() > 0) or 0\n"
         "sys.argv = ['replog', 'log', 'dump', '/nonexistent']\n"
         "sys.exit(entry.main())\n"],
        capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "True"]


# A follower's pattern: an answer of 0.5-1 MiB arrives while the previous one is still held, with small
# objects allocated (and some kept) in between.
_FOLLOWER_BUFFER_FAULTS = (
    "import json, random, resource\n"
    "random.seed(1)\n"
    "kept, previous = [], None\n"
    "before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt\n"
    "for _ in range(1000):\n"
    "    answer = bytearray(random.randint(500_000, 1_048_576))\n"
    "    kept.append(bytes(200))\n"
    "    if len(kept) > 300:\n"
    "        del kept[:150]\n"
    "    previous = answer\n"
    "print(json.dumps({'faults': resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before, 'tuned': tuned}))\n")


def test_large_buffers_kept_in_the_heap_are_reused_instead_of_faulted_in_anew():
    default = run_in_fresh_interpreter("tuned = None\n" + _FOLLOWER_BUFFER_FAULTS)
    tuned = run_in_fresh_interpreter(
        "from replog.process_startup import keep_large_buffers_in_heap\n"
        "tuned = keep_large_buffers_in_heap()\n" + _FOLLOWER_BUFFER_FAULTS)
    assert tuned["tuned"] is True  # glibc, as on every machine replog runs on here
    # 1000 answers of ~750 KiB are ~190,000 pages: glibc's defaults fault in thousands of them (17,549 on the
    # development VM), the heap kept for reuse a few hundred (718).
    assert tuned["faults"] * 5 < default["faults"], (tuned, default)


def test_the_process_entry_keeps_large_buffers_in_the_heap(monkeypatch):
    import replog.__main__ as entry

    called = []
    monkeypatch.setattr(entry, "begin_quiet_start", lambda: None)
    monkeypatch.setattr(entry, "keep_large_buffers_in_heap", lambda: called.append(True))
    monkeypatch.setattr("replog.cli.main", lambda: 0)
    assert entry.main() == 0
    assert called == [True]
