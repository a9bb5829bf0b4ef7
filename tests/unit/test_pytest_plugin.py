"""The pytest plugin (chaos/pytest_plugin.py), in pytest runs of its own (pytester): what it
collects with and without --kilocard, how a run's result becomes a passed or failed item, the
options that reach the runner, the JUnit properties and the `kilocard_run` fixture. The runner is
a fake answering the plugin's hook from the inner run's conftest, except for invalid input, which
the real runner refuses before any cluster is asked."""

import json
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from importlib.metadata import entry_points
from pathlib import Path

import pytest
import yaml

import chaos.run  # noqa: F401  loaded before pytester's module snapshot, so inner runs share it

pytest_plugins = ["pytester"]

INVALID = Path(__file__).parents[1] / "experiments" / "invalid"
EXPERIMENT = "title: {title}\ndescription: d\nmethod: []\n"

# The inner run's runner: records each call, answers with the outcome its file's stem is given.
FAKE = '''
import json
from pathlib import Path

from chaos.errors import Exit
from chaos.run import Result

OUTCOMES = {outcomes!r}


def pytest_kilocard_run_file(path, variables):
    with (Path(__file__).parent / "calls.jsonl").open("a") as calls:
        calls.write(json.dumps({{"path": str(path), "variables": variables}}) + "\\n")
    code, reason = OUTCOMES.get(path.stem, (0, "steady state met before and after the method"))
    verdict = "failed" if reason.startswith("as expected") else Exit(code).name.lower()
    return Result(path, "run-" + path.stem, Exit(code), reason, {{"kilocard": {{
        "run_id": "run-" + path.stem, "exit_code": code, "verdict": verdict, "reason": reason}}}})
'''


def fake_runner(pytester: pytest.Pytester, **outcomes: tuple[int, str]) -> None:
    pytester.makeini("[pytest]\n")
    pytester.makeconftest(FAKE.format(outcomes=outcomes))


def calls(pytester: pytest.Pytester) -> list[dict]:
    path = pytester.path / "calls.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def experiments(pytester: pytest.Pytester, *names: str) -> None:
    for name in names:
        path = pytester.path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        text = EXPERIMENT.format(title=f"{path.stem} in a line")
        path.write_text(json.dumps(yaml.safe_load(text)) if path.suffix == ".json" else text)


def test_the_plugin_is_registered_through_its_entry_point():
    assert [e.value for e in entry_points(group="pytest11") if e.name == "kilocard"] == ["chaos.pytest_plugin"]


def test_loading_the_plugin_imports_neither_the_runner_nor_the_cli():
    loaded = subprocess.run([sys.executable, "-c", "import sys, chaos.pytest_plugin; print(sorted(m for m in sys.modules"
                             " if m in ('chaos.run', 'chaos.actions', 'chaos.cli', 'chaoslib', 'kubernetes', 'yaml')))"],
                            capture_output=True, text=True, check=True)
    assert loaded.stdout.strip() == "[]", loaded.stdout + loaded.stderr


def test_without_kilocard_nothing_is_collected_and_nothing_changes(pytester):
    fake_runner(pytester)
    experiments(pytester, "experiments/s1.yaml", "experiments/s2.json", "tests/experiments/invalid/bad.yaml")
    pytester.makepyfile(test_plain="def test_plain():\n    pass\n")
    assert pytester.runpytest_inprocess("experiments").ret == pytest.ExitCode.NO_TESTS_COLLECTED
    result = pytester.runpytest_inprocess("--co", "-q")
    assert [line for line in result.outlines if "::" in line] == ["test_plain.py::test_plain"]
    assert calls(pytester) == []


def test_with_kilocard_each_file_is_one_item_and_a_folder_gives_its_own_files(pytester):
    fake_runner(pytester)
    experiments(pytester, "experiments/s1.yaml", "experiments/s2.yml", "experiments/s3.json",
                "experiments/deeper/s9.yaml", "one/s4.yaml", "tests/experiments/invalid/bad.yaml")
    (pytester.path / "experiments" / "notes.txt").write_text("not an experiment")
    pytester.makepyfile(test_plain="def test_plain():\n    pass\n")
    items, _ = pytester.inline_genitems("--kilocard", "experiments", "one/s4.yaml", "test_plain.py")
    assert [item.nodeid for item in items] == ["experiments/s1.yaml::s1", "experiments/s2.yml::s2",
                                               "experiments/s3.json::s3", "one/s4.yaml::s4", "test_plain.py::test_plain"]
    assert [item.location[2] for item in items[:4]] == [f"{s}: {s} in a line" for s in ("s1", "s2", "s3", "s4")]
    # testpaths alone (no arguments) take no fixture folder for a catalog.
    items, _ = pytester.inline_genitems("--kilocard")
    assert [item.nodeid for item in items] == ["test_plain.py::test_plain"]


@pytest.mark.parametrize("name", ["count-zero.yaml", "yaml-syntax.yaml"])
def test_an_invalid_experiment_fails_with_the_runners_message_and_no_traceback(pytester, name):
    pytester.makeini("[pytest]\n")
    shutil.copy(INVALID / name, pytester.path / name)
    expected = (INVALID / name).read_text().splitlines()[0].removeprefix("# expect: ")
    result = pytester.runpytest_inprocess("--kilocard", name)
    result.assert_outcomes(failed=1)
    output = result.stdout.str()
    assert f"exit 2 (invalid): {name}: " in output, output
    assert expected in output, output
    assert "Traceback" not in output and "pytest_plugin.py" not in output and "def runtest" not in output, output


def test_a_passing_and_a_failing_run_map_to_passed_and_failed_items_with_the_reason(pytester):
    fake_runner(pytester, s1=(1, "probe 'groups-whole' failed: 1 of 2 ranks present"),
                s8=(0, "as expected (failed): probe 'replicas-kept-apart' failed: 2 replicas share a node"))
    experiments(pytester, "experiments/s1.yaml", "experiments/s2.yaml", "experiments/s8.yaml")
    result = pytester.runpytest_inprocess("--kilocard", "experiments", "-rA")
    result.assert_outcomes(passed=2, failed=1)
    # The failure: a header with the experiment's title, the one line, pytest's one-line summary.
    result.stdout.fnmatch_lines(["*_ s1: s1 in a line _*", "exit 1 (failed): probe 'groups-whole' failed: 1 of 2 ranks present",
                                 "PASSED experiments/s8.yaml::s8",
                                 "FAILED experiments/s1.yaml::s1 - Failed: exit 1 (failed)*"])
    output = result.stdout.str()
    assert "Traceback" not in output and "pytest_plugin.py" not in output, output


def test_a_revert_left_incomplete_fails_loudly_with_the_recover_command(pytester):
    fake_runner(pytester, s5=(4, "steady state met; revert incomplete: 1 fault(s) still in place"))
    experiments(pytester, "s5.yaml")
    result = pytester.runpytest_inprocess("--kilocard", "s5.yaml")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*FAULTS STILL IN PLACE: run 'kilocard recover --run run-s5' now; exit 4 "
                                 "(revert incomplete): steady state met; revert incomplete*",
                                 "*kilocard: revert incomplete*",
                                 "s5.yaml: faults still in place: run 'kilocard recover --run run-s5'"])


def test_the_options_reach_the_runner_and_journals_are_written(pytester):
    fake_runner(pytester)
    experiments(pytester, "experiments/s1.yaml", "experiments/s2.yaml")
    result = pytester.runpytest_inprocess("--kilocard", "experiments", "--kilocard-var", "namespace=ns",
                                          "--kilocard-var", "budget_seconds:int=5", "--kilocard-kubeconfig", "/k/config",
                                          "--kilocard-prometheus-url", "http://prom:9090", "--kilocard-journal-dir", "out")
    result.assert_outcomes(passed=2)
    variables = ["namespace=ns", "budget_seconds:int=5", "kilocard_kubeconfig=/k/config",
                 "kilocard_prometheus_url=http://prom:9090"]
    assert calls(pytester) == [{"path": f"experiments/{s}.yaml", "variables": variables}
                               for s in ("s1", "s2")]
    journal = json.loads((pytester.path / "out" / "journal-s1-run-s1.json").read_text())
    assert journal == {"kilocard": {"run_id": "run-s1", "exit_code": 0, "verdict": "passed",
                                    "reason": "steady state met before and after the method"}}
    assert (pytester.path / "out" / "journal-s2-run-s2.json").is_file()


def test_verdict_exit_run_id_and_journal_land_in_the_junit_report(pytester):
    fake_runner(pytester, s1=(1, "probe 'ttft' failed: worst P95 0.9 s over 0.5 s"),
                s8=(0, "as expected (failed): probe 'replicas-kept-apart' failed"))
    experiments(pytester, "experiments/s1.yaml", "experiments/s8.yaml")
    pytester.runpytest_inprocess("--kilocard", "experiments", "--kilocard-journal-dir", "journals",
                                 "--junitxml", "junit.xml").assert_outcomes(passed=1, failed=1)
    cases = {case.get("name"): case for case in ET.parse(pytester.path / "junit.xml").iter("testcase")}
    properties = {name: {p.get("name"): p.get("value") for p in case.iter("property")} for name, case in cases.items()}
    assert properties == {
        "s1": {"kilocard_verdict": "failed", "kilocard_exit": "1", "kilocard_run_id": "run-s1",
               "kilocard_journal": str(Path("journals") / "journal-s1-run-s1.json")},
        "s8": {"kilocard_verdict": "failed", "kilocard_exit": "0", "kilocard_run_id": "run-s8",
               "kilocard_journal": str(Path("journals") / "journal-s8-run-s8.json")},
    }
    assert cases["s1"].find("failure").get("message") == "Failed: exit 1 (failed): probe 'ttft' failed: worst P95 0.9 s over 0.5 s"


def test_the_fixture_runs_one_experiment_with_the_options_and_returns_its_result(pytester):
    fake_runner(pytester, s1=(1, "probe 'groups-whole' failed"))
    experiments(pytester, "experiments/s1.yaml")
    pytester.mkdir("sub")
    pytester.makepyfile(**{"sub/test_drill": '''
from chaos.errors import Exit


def test_drill(kilocard_run):
    result = kilocard_run("experiments/s1.yaml", vars={"namespace": "x", "budget_seconds": 5, "ratio": 0.5})
    assert (result.exit, result.run_id, result.reason) == (Exit.FAILED, "run-s1", "probe 'groups-whole' failed")
'''})
    result = pytester.runpytest_inprocess("sub", "--kilocard-var", "model=m", "--kilocard-kubeconfig", "/k",
                                          "--junitxml", "junit.xml")
    result.assert_outcomes(passed=1)
    assert calls(pytester) == [{"path": str(pytester.path / "experiments" / "s1.yaml"),
                                "variables": ["model=m", "namespace=x", "budget_seconds:int=5", "ratio:float=0.5",
                                              "kilocard_kubeconfig=/k"]}]
    case = next(ET.parse(pytester.path / "junit.xml").iter("testcase"))
    assert {p.get("name"): p.get("value") for p in case.iter("property")} == {
        "kilocard_verdict": "failed", "kilocard_exit": "1", "kilocard_run_id": "run-s1"}


def test_reports_are_written_beside_the_items_when_asked(pytester):
    fake_runner(pytester, s1=(1, "probe 'ttft' failed: worst P95 0.9 s over 0.5 s"))
    experiments(pytester, "experiments/s1.yaml")
    pytester.runpytest_inprocess("--kilocard", "experiments", "--kilocard-reports", "reports",
                                 "--junitxml", "junit.xml").assert_outcomes(failed=1)
    page = pytester.path / "reports" / "run-s1" / "index.html"
    assert "probe &#x27;ttft&#x27; failed: worst P95 0.9 s over 0.5 s" in page.read_text()
    case = next(ET.parse(pytester.path / "junit.xml").iter("testcase"))
    assert {p.get("name"): p.get("value") for p in case.iter("property")}["kilocard_report"] == str(
        Path("reports") / "run-s1" / "index.html")
