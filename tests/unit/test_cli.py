import subprocess
import sys


def kilocard(*args, **kw):
    return subprocess.run([sys.executable, "-m", "chaos.cli", *args], capture_output=True, text=True, **kw)


def test_bad_sizes_are_one_line_errors():
    for args, expected in [
        (["--nodes", "0"], "kilocard: argument --nodes: expected an integer from 1 to 5000, got 0\n"),
        (["--cards-per-node", "1.5"], "kilocard: argument --cards-per-node: expected an integer from 1 to 64, got '1.5'\n"),
        (["--card-resource", "gpu", "--state-dir", "/nonexistent/kc"],
         "kilocard: --card-resource: expected an extended resource name like 'nvidia.com/gpu' or 'huawei.com/Ascend910', got 'gpu'\n"),
    ]:
        result = kilocard("testbed", "up", *args)
        assert result.returncode == 2, result
        assert result.stderr == expected
        assert "Traceback" not in result.stdout + result.stderr


def test_down_with_nothing_running_says_so(tmp_path):
    result = kilocard("testbed", "down", "--state-dir", str(tmp_path))
    assert result.returncode == 0
    assert f"no testbed running (state folder {tmp_path})" in result.stdout


def test_status_with_nothing_running(tmp_path):
    result = kilocard("testbed", "status", "--json", "--state-dir", str(tmp_path))
    assert result.returncode == 3
    assert '"running": false' in result.stdout


def test_taken_port_is_named_and_nothing_starts(tmp_path):
    import socket

    from testbed.config import Ports, taken_ports

    base = next(b for b in range(30001, 60000, 89) if taken_ports(Ports(b)) == [])
    with socket.socket() as s:
        s.bind(("127.0.0.1", base + 2))
        s.listen()
        result = kilocard("testbed", "up", "--port-base", str(base), "--state-dir", str(tmp_path))
    assert result.returncode == 2
    assert result.stderr == (f"kilocard: port {base + 2} (etcd peer) already in use: "
                             "stop what listens there or pass --port-base\n")
    assert not (tmp_path / "state.json").exists()


def test_validate_says_every_path_that_gives_no_experiment_and_checks_the_rest(tmp_path, capsys):
    from pathlib import Path

    from chaos import cli

    empty, missing = tmp_path / "empty", tmp_path / "missing.yaml"
    empty.mkdir()
    (empty / "notes.txt").write_text("not an experiment")
    good = Path(__file__).parents[2] / "experiments" / "s1-kill-one-replica.yaml"
    assert cli.main(["validate", str(empty), str(missing), str(good)]) == 2
    out, err = capsys.readouterr()
    assert err.splitlines() == [f"no experiment files in {empty}: expected *.yaml, *.yml or *.json",
                                f"{missing}: no such file or folder"]
    assert out == f"{good}: valid (1 kilocard fault(s))\n"
    assert cli.main(["validate", "/dev/null"]) == 2
    assert capsys.readouterr().err == "/dev/null: not a file or folder\n"


def test_run_refuses_a_folder_without_experiments_before_anything_starts(tmp_path, capsys, monkeypatch):
    from chaos import cli

    def nothing_may_start(_args):
        raise AssertionError("started a cluster for a run that has nothing to run")

    monkeypatch.setattr(cli, "_embedded_default", nothing_may_start)
    empty = tmp_path / "empty"
    empty.mkdir()
    code = cli.main(["run", str(empty), str(tmp_path / "missing"), "--journal", str(tmp_path / "j"), "--reports",
                     str(tmp_path / "reports")])
    assert code == 2
    assert capsys.readouterr().err == (f"kilocard: no experiment files in {empty}: expected *.yaml, *.yml or *.json\n"
                                       f"{tmp_path / 'missing'}: no such file or folder\n")
    assert list(tmp_path.iterdir()) == [empty]  # no journal, no report
