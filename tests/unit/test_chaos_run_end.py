"""How `replog chaos` and `replog crash-loop` end: the report printed, the run's data kept when something was
wrong (or asked for), the exit status."""

from dataclasses import dataclass

from replog.chaos.chaos_report import print_and_clean_up


@dataclass
class Verdict:
    ok: bool

    def format(self) -> str:
        return f"verdict: {'ok' if self.ok else 'FAILED'}"


def test_a_clean_run_removes_its_data_and_exits_0(tmp_path, capsys):
    root = tmp_path / "run"
    root.mkdir()
    assert print_and_clean_up(Verdict(ok=True), root, keep=False) == 0
    assert not root.exists()
    assert capsys.readouterr().out == "verdict: ok\n"


def test_a_clean_run_keeps_a_data_dir_it_was_given(tmp_path):
    assert print_and_clean_up(Verdict(ok=True), tmp_path, keep=True) == 0
    assert tmp_path.exists()


def test_a_failed_run_keeps_its_data_and_says_where_and_exits_1(tmp_path, capsys):
    root = tmp_path / "run"
    root.mkdir()
    assert print_and_clean_up(Verdict(ok=False), root, keep=False) == 1
    assert root.exists()
    assert capsys.readouterr().out == f"verdict: FAILED\ncluster data and broker output kept in {root}\n"
