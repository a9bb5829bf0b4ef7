"""The shipped CI examples cannot drift from the code: every kilocard command the GitHub Actions
workflow runs parses with the real parser, every --kilocard option it gives pytest exists, its
header explains every exit code, and its artifacts and teardown survive a failed run."""

import re
import shlex
from pathlib import Path

import pytest
import yaml

from chaos import cli, pytest_plugin
from chaos.errors import Exit

ROOT = Path(__file__).parents[2]
WORKFLOW = ROOT / ".github" / "workflows" / "resilience.yml"


def steps() -> list[dict]:
    return [step for job in yaml.safe_load(WORKFLOW.read_text())["jobs"].values() for step in job["steps"]]


def commands() -> list[list[str]]:
    """Each shell command of the workflow's `run:` scripts, as words, cut at the first shell operator."""
    found = []
    for step in steps():
        for line in step.get("run", "").replace("\\\n", " ").splitlines():
            lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
            lexer.whitespace_split = True
            words = list(lexer)
            cut = next((i for i, w in enumerate(words) if set(w) <= set("();<>|&")), len(words))
            if words[:cut]:
                found.append(words[:cut])
    return found


class _Options:
    """Records the option names the plugin's pytest_addoption declares."""

    def __init__(self) -> None:
        self.names: set[str] = set()

    def getgroup(self, *_args: object, **_kwargs: object) -> "_Options":
        return self

    def addoption(self, *names: str, **_kwargs: object) -> None:
        self.names.update(names)


def test_the_workflow_runs_on_pull_requests_weekly_and_by_hand():
    triggers = yaml.safe_load(WORKFLOW.read_text())[True]  # YAML 1.1 reads the key `on` as true
    assert set(triggers) == {"pull_request", "schedule", "workflow_dispatch"}
    assert triggers["schedule"][0]["cron"].split()[4] != "*"  # once a week


def test_every_kilocard_command_of_the_workflow_parses():
    kilocard = [words[1:] for words in commands() if Path(words[0]).name == "kilocard"]
    assert {tuple(argv[:2]) if argv[0] == "testbed" else argv[0] for argv in kilocard} >= {
        "validate", ("testbed", "up"), "run", ("testbed", "down")}
    for argv in kilocard:
        try:
            cli.build_parser(with_testbed=True).parse_args(argv)
        except SystemExit as exc:
            pytest.fail(f"kilocard {shlex.join(argv)}: does not parse (exit {exc.code})")


def test_every_kilocard_option_the_workflow_gives_pytest_exists():
    options = _Options()
    pytest_plugin.pytest_addoption(options)  # type: ignore[arg-type]
    given = [w.split("=")[0] for words in commands() if "pytest" in words for w in words if w.startswith("--kilocard")]
    assert "--kilocard" in given
    assert set(given) <= options.names, set(given) - options.names


def test_the_incident_leg_replays_every_timeline_of_the_library_as_its_file_asks():
    from chaos import replay

    (step,) = [s for s in steps() if "experiments/incidents/*.yaml" in s.get("run", "")]
    legs = yaml.safe_load(WORKFLOW.read_text())["jobs"]["catalog"]["strategy"]["matrix"]["leg"]
    assert "incidents" in legs and step["if"] == "matrix.leg == 'incidents'"
    assert "grep -q '^fixed:' \"$t\"" in step["run"]  # --expect fixed where the timeline declares a fix
    timelines = sorted((ROOT / "experiments" / "incidents").glob("*.yaml"))
    assert len(timelines) >= 3
    for path in timelines:  # the shell's test and the file's own fixed block agree
        declared = any(line.startswith("fixed:") for line in path.read_text().splitlines())
        assert declared == (replay.load(path).fixed is not None), path


def test_the_header_explains_every_exit_code():
    header = WORKFLOW.read_text().split("\nname:")[0]
    for code in Exit:
        assert re.search(rf"^#\s+{int(code)}\s+{code.name.lower().replace('_', ' ')}\b", header, re.MULTILINE), code


def test_artifacts_are_uploaded_and_the_testbed_torn_down_whatever_the_verdict():
    uploads = [s for s in steps() if s.get("uses", "").startswith("actions/upload-artifact@")]
    teardowns = [s for s in steps() if "testbed down" in s.get("run", "")]
    assert uploads and teardowns
    assert all(s.get("if") == "always()" for s in uploads + teardowns)
    assert {"reports/", "junit.xml"} <= set(uploads[0]["with"]["path"].split())

