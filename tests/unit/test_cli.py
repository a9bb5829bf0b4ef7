import subprocess
import sys
from pathlib import Path


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
        usage = result.stderr.startswith("usage: kilocard testbed up ")  # argparse's own errors show the usage
        assert result.stderr.endswith(expected) and (usage or result.stderr == expected), result.stderr
        assert "Traceback" not in result.stdout + result.stderr


def test_down_with_nothing_running_says_so(tmp_path):
    result = kilocard("testbed", "down", "--state-dir", str(tmp_path))
    assert result.returncode == 0
    assert f"no testbed running (state folder {tmp_path})" in result.stdout


def test_status_with_nothing_running(tmp_path):
    result = kilocard("testbed", "status", "--json", "--state-dir", str(tmp_path))
    assert result.returncode == 1  # not running (3 means "aborted" everywhere else)
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


def test_version_help_and_usage_as_kubectl_and_helm_users_expect(capsys):
    from chaos import __version__

    assert kilocard("--version").stdout == f"kilocard {__version__}\n"
    bare = kilocard()
    assert bare.returncode == 2 and bare.stdout.startswith("usage: kilocard ") and "validate" in bare.stdout
    assert kilocard("help").returncode == 0
    helped = kilocard("help", "gameday", "run")
    assert helped.returncode == 0 and helped.stdout.startswith("usage: kilocard gameday run ")
    assert "--testbed" in helped.stdout
    wrong = kilocard("run", "--bogus", "x.yaml")
    assert wrong.returncode == 2 and wrong.stderr.startswith("usage: kilocard ")
    assert wrong.stderr.endswith("kilocard: unrecognized arguments: --bogus\n")


def test_no_cluster_named_outside_a_terminal_is_refused_and_nothing_is_built(tmp_path, monkeypatch, capsys):
    from chaos import cli
    from testbed import cli as testbed_cli

    def nothing_may_start(**_kwargs):
        raise AssertionError("started a testbed nobody asked for")

    monkeypatch.setattr(testbed_cli, "embedded_default", nothing_may_start)
    monkeypatch.setattr(cli, "_embedded_default", cli._embedded_default)
    monkeypatch.setenv("CI", "true")
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.kube/config
    monkeypatch.setenv("KILOCARD_STATE", str(tmp_path / "state"))  # no local testbed running
    experiment = Path(__file__).parents[2] / "experiments" / "s1-kill-one-replica.yaml"
    for argv in (["run", str(experiment)], ["plan", "-e", str(experiment)], ["gameday", "run", str(
            Path(__file__).parents[2] / "experiments" / "gamedays" / "catalog.yaml")]):
        assert cli.main([*argv, "--journal", str(tmp_path / "j")]) == 2, argv
        said = capsys.readouterr().err
        assert "no cluster named" in said and "give --testbed to start the local testbed" in said, said
    # A file that is wrong is said first, before the cluster is even looked for.
    assert cli.main(["run", str(tmp_path / "typo.yaml")]) == 2
    assert capsys.readouterr().err == f"kilocard: {tmp_path / 'typo.yaml'}: no such file or folder\n"
    bad = tmp_path / "bad.yaml"
    bad.write_text(experiment.read_text().replace("count: 1", "count: one"))
    assert cli.main(["run", str(bad)]) == 2
    assert "fault.count: expected an integer" in capsys.readouterr().err
