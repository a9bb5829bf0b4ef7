import subprocess
import sys
from pathlib import Path

import pytest


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


def test_an_output_folder_a_file_stands_in_is_input_said_before_anything_starts(tmp_path, monkeypatch, capsys):
    """$KILOCARD_REPORTS (or --reports, --ledger-dir, --journal) on a file, or below one: exit 2
    naming the flag, its variable and the file in the way, before a cluster is looked for; it was
    a traceback once the run had ended and its report was written."""
    from chaos import cli

    def nothing_may_start(_args):
        raise AssertionError("looked for a cluster before saying the input was wrong")

    monkeypatch.setattr(cli, "_embedded_default", nothing_may_start)
    file = tmp_path / "a-file"
    file.write_text("")
    experiment = Path(__file__).parents[2] / "experiments" / "s1-kill-one-replica.yaml"
    plan = Path(__file__).parents[2] / "experiments" / "gamedays" / "catalog.yaml"
    monkeypatch.setenv("KILOCARD_REPORTS", str(file / "reports"))
    parsed = cli.build_parser().parse_args(["run", str(experiment)])
    assert parsed.reports == file / "reports"  # the variable is the flag's default
    cases = ((["run", str(experiment), "--reports", str(file / "reports")], "--reports (or $KILOCARD_REPORTS)"),
             (["run", str(experiment), "--ledger-dir", str(file), "--no-report"], "--ledger-dir (or $KILOCARD_LEDGER)"),
             (["run", str(experiment), "--journal", str(file / "j.json"), "--no-report"], "--journal"),
             (["gameday", "run", str(plan), "--reports", str(file)], "--reports (or $KILOCARD_REPORTS)"))
    for argv, flag in cases:
        assert cli.main(argv) == 2, argv
        said = capsys.readouterr().err
        assert said.startswith(f"kilocard: {flag}: ") and f"{file} is a file, not a folder" in said, said


def test_shell_completion_comes_from_the_parser_itself():
    for shell in ("bash", "zsh"):
        done = kilocard("completion", shell)
        assert done.returncode == 0 and "gameday" in done.stdout and "--prometheus-ca" in done.stdout, done.stderr
    assert "--cards-per-node" in kilocard("completion", "bash").stdout  # the testbed's commands too
    assert kilocard("completion", "fish").returncode == 2


def test_the_url_and_folders_have_environment_equivalents_for_ci(monkeypatch):
    monkeypatch.setenv("KILOCARD_PROMETHEUS_URL", "https://prometheus.monitoring:9090")
    monkeypatch.setenv("KILOCARD_REPORTS", "/srv/reports")
    monkeypatch.setenv("KILOCARD_LEDGER", "/srv/ledger")
    from chaos import cli

    for argv in (["run", "x.yaml"], ["replay", "t.yaml"], ["gameday", "run", "p.yaml"]):
        args = cli.build_parser().parse_args(argv)
        assert (args.prometheus_url, str(args.reports), str(args.ledger_dir)) == (
            "https://prometheus.monitoring:9090", "/srv/reports", "/srv/ledger"), argv
    assert cli.build_parser().parse_args(["record", "--journal", "j.json", "-o", "t.yaml"]).prometheus_url == \
        "https://prometheus.monitoring:9090"
    flag = cli.build_parser().parse_args(["run", "x.yaml", "--prometheus-url", "http://127.0.0.1:9090"])
    assert flag.prometheus_url == "http://127.0.0.1:9090"  # the flag wins


def test_validate_speaks_json_for_ci_annotations_every_problem_with_its_file(tmp_path, capsys):
    import json

    from chaos import cli

    good = Path(__file__).parents[2] / "experiments" / "s1-kill-one-replica.yaml"
    faults = tmp_path / "faults.yaml"
    faults.write_text("- {kind: pod-kill, namespace: ns, label_selector: a=b}\n- {kind: gpu-ecc, nodes: [n], card: 1}\n")
    assert cli.main(["validate", "-o", "json", str(good), str(faults), str(tmp_path / "missing")]) == 2
    said = json.loads(capsys.readouterr().out)
    assert said == [
        {"file": None, "valid": False, "what": None, "problems": [f"{tmp_path / 'missing'}: no such file or folder"]},
        {"file": str(good), "valid": True, "what": "1 kilocard fault(s)", "problems": []},
        {"file": str(faults), "valid": False, "what": None,
         "problems": [f"{faults}[1].ttl_seconds: required: expected a number above 0 to 86400"]}]


def test_a_folder_run_settles_the_models_the_last_experiment_touched_before_the_next(tmp_path, monkeypatch, capsys):
    from types import SimpleNamespace

    from chaos import cli, run, settle
    from chaos.errors import Exit

    assert settle.touched({"kilocard": {"plan": {"blast_radius": {"models": ["ns/b", "ns/a", "other/a"]}}}}) == [
        ("ns", "a"), ("ns", "b"), ("other", "a")]
    assert settle.touched({"kilocard": {"exit_code": 2}}) == []
    order: list[str] = []

    def ran(path, *_args, **_kwargs):
        order.append(path.name)
        journal = {"kilocard": {"run_id": "r", "exit_code": 0, "verdict": "passed", "reason": "ok",
                                "plan": {"blast_radius": {"models": [f"ns/{path.stem}"]}}}}
        return run.Result(path, "r", Exit.PASSED, "ok", journal)

    monkeypatch.setattr(cli, "_embedded_default", lambda _args: None)
    monkeypatch.setattr(run, "run_file", ran)
    monkeypatch.setattr(run, "load", lambda *_a, **_k: None)
    import chaos.kube

    monkeypatch.setattr(chaos.kube.Kube, "connect", classmethod(lambda cls, *a, **k: SimpleNamespace(close=lambda: None)))
    monkeypatch.setattr(settle, "settle", lambda _kube, models, timeout: (
        order.append(f"settle {models} {timeout:g}") or (1.5, [] if models != [("ns", "s2")] else ["ns/s2: 2 of 3"])))
    folder = tmp_path / "experiments"
    folder.mkdir()
    for name in ("s10", "s2", "s1"):
        (folder / f"{name}.yaml").write_text("title: t\n")
    code = cli.main(["run", str(folder), "--no-report", "--journal", str(tmp_path / "j"), "--settle-timeout", "90"])
    assert code == 0
    assert order == ["s1.yaml", "settle [('ns', 's1')] 90", "s2.yaml", "settle [('ns', 's2')] 90", "s10.yaml"]
    said = capsys.readouterr().out
    assert "settle: ns/s1 whole again after 1.5 s" in said
    assert "settle: not whole after 2 s (ns/s2: 2 of 3); the next experiment runs on that" in said


def test_read_commands_speak_yaml_and_json_as_kubectl_does(tmp_path):
    import json

    import yaml

    status = kilocard("testbed", "status", "-o", "yaml", "--state-dir", str(tmp_path))
    assert status.returncode == 1 and yaml.safe_load(status.stdout) == {"running": False, "state_dir": str(tmp_path)}
    s1 = Path(__file__).parents[2] / "experiments" / "s1-kill-one-replica.yaml"
    as_yaml, as_json = (kilocard("validate", "-o", form, str(s1)) for form in ("yaml", "json"))
    assert as_yaml.returncode == as_json.returncode == 0
    assert yaml.safe_load(as_yaml.stdout) == json.loads(as_json.stdout) == [
        {"file": str(s1), "valid": True, "what": "1 kilocard fault(s)", "problems": []}]


def test_a_folder_runs_in_the_order_it_declares_and_a_wrong_order_is_input(tmp_path):
    from chaos import cli

    s = Path(__file__).parents[2] / "experiments"
    for name in ("s1-kill-one-replica.yaml", "s2-isolate-one-card.yaml", "s10-tp16-tcp-resets.yaml"):
        (tmp_path / name).write_text((s / name).read_text())
    assert [p.name for p in cli._experiment_files([tmp_path])] == [
        "s1-kill-one-replica.yaml", "s2-isolate-one-card.yaml", "s10-tp16-tcp-resets.yaml"]  # natural
    (tmp_path / cli.ORDER_FILE).write_text("- s10-tp16-tcp-resets.yaml\n- s1-kill-one-replica.yaml\n")
    files, problems = cli._experiments([tmp_path])
    assert problems == [] and [p.name for p in files] == [  # declared, then the rest naturally
        "s10-tp16-tcp-resets.yaml", "s1-kill-one-replica.yaml", "s2-isolate-one-card.yaml"]
    done = kilocard("validate", str(tmp_path))
    assert done.returncode == 0 and done.stdout.splitlines()[0].startswith(f"{tmp_path}/s10-"), done.stdout
    (tmp_path / cli.ORDER_FILE).write_text("- s3.yaml\n- s1-kill-one-replica.yaml\n- s1-kill-one-replica.yaml\n")
    done = kilocard("validate", str(tmp_path))
    order = tmp_path / cli.ORDER_FILE
    assert done.returncode == 2 and done.stderr.splitlines() == [
        f"{order}: entry 0: no experiment file 's3.yaml' in {tmp_path}",
        f"{order}: entry 2: 's1-kill-one-replica.yaml' is named before"], done.stderr
    order.write_text("s1: first\n")
    assert kilocard("validate", str(tmp_path)).stderr == (
        f"{order}: expected a list of this folder's file names, in the order to run them\n")


def test_dash_n_gives_a_namespace_to_the_faults_that_take_one_and_name_none():
    from chaos import cli

    raws = [{"kind": "pod-kill", "label_selector": "a=b"}, {"kind": "pod-kill", "namespace": "kept"},
            {"kind": "node-cordon", "nodes": ["n1"]}, {"kind": ["not", "a", "name"]}, "not a mapping"]
    assert cli._in_namespace(raws, "serving") == [
        {"kind": "pod-kill", "label_selector": "a=b", "namespace": "serving"}, {"kind": "pod-kill", "namespace": "kept"},
        {"kind": "node-cordon", "nodes": ["n1"]}, {"kind": ["not", "a", "name"]}, "not a mapping"]
    assert cli._in_namespace(raws, None) == raws
    help_text = kilocard("plan", "--help").stdout
    assert "-n NAMESPACE, --namespace NAMESPACE" in help_text and "-o {text,json,yaml}" in help_text


def test_dash_n_names_the_namespace_an_experiment_acts_on_as_kubectls_does():
    """`kilocard run s1.yaml -n team-a` is `--var namespace=team-a`: every catalog experiment
    reads ${namespace}, so its probes and faults act there; a later --var of the key wins."""
    from chaos import cli, run

    s1 = Path(__file__).resolve().parents[2] / "experiments" / "s1-kill-one-replica.yaml"
    parser = cli.build_parser()
    for command in (["run", str(s1)], ["validate", str(s1)], ["gameday", "run", "plan.yaml"], ["replay", "t.yaml"]):
        assert parser.parse_args([*command, "-n", "team-a", "--var", "k=v"]).var == ["namespace=team-a", "k=v"]
    args = parser.parse_args(["run", str(s1), "-n", "team-a"])
    experiment = run.load(s1, args.var, args.var_file)
    assert experiment.data["configuration"]["namespace"] == "team-a"
    (fault, _where), = experiment.faults
    assert fault["namespace"] == "team-a"
    later = parser.parse_args(["run", str(s1), "-n", "a", "--var", "namespace=b"])
    assert run.load(s1, later.var, later.var_file).data["configuration"]["namespace"] == "b"
    assert "-n NAME, --namespace NAME" in kilocard("run", "--help").stdout


def test_catalog_and_schema_need_no_cluster():
    import json

    done = kilocard("catalog")
    lines = done.stdout.splitlines()
    assert done.returncode == 0 and lines[0].startswith("the catalog, in ")
    names = [line.split()[0] for line in lines[1:]]
    assert names[:3] == ["s1-kill-one-replica.yaml", "s2-isolate-one-card.yaml", "s3-ecc-one-tp-member.yaml"]
    assert "gamedays/catalog.yaml" in names and "incidents/ecc-one-card.yaml" in names
    path = Path(kilocard("catalog", "--path").stdout.strip())
    experiments = Path(__file__).parents[2] / "experiments"  # in a checkout, what the catalog links to
    assert sorted(p.relative_to(path) for p in path.rglob("*.yaml")) == sorted(
        p.relative_to(experiments) for p in experiments.rglob("*.yaml"))
    schema = json.loads(kilocard("schema").stdout)
    assert "$defs" in schema or "properties" in schema


@pytest.mark.parametrize("argv", [["run", "{long}"], ["plan", "-e", "{long}"], ["validate", "{long}"],
                                  ["replay", "{long}"], ["report", "{long}"], ["gameday", "run", "{long}"],
                                  ["run", "{dir}/s1.yaml", "--journal", "{long}/j.json"]])
def test_a_path_too_long_to_look_up_is_said_as_input_never_a_traceback(argv, tmp_path, capsys) -> None:
    from chaos import cli
    long = str(tmp_path / ("x" * 300))
    experiments = Path(__file__).parents[2] / "experiments"
    given = [a.format(long=long, dir=experiments).replace("/s1.yaml", "/s1-kill-one-replica.yaml") for a in argv]
    assert cli.main(given) == 2
    said = capsys.readouterr().err
    assert said.startswith("kilocard: ") and "Traceback" not in said and "too long" in said, said
