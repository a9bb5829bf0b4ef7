"""pytest plugin: Chaos Toolkit experiments as test items, judged by the strict runner (chaos.run).

    pytest --kilocard experiments/ [--kilocard-var KEY=VALUE] [--kilocard-journal-dir DIR] [--kilocard-reports DIR]
           --junitxml junit.xml

Files and folders are taken as `kilocard run` takes them (a folder: its *.yaml, *.yml, *.json);
each experiment is one item, passing when the runner's judged exit is 0 and otherwise failing with
its reason. Without --kilocard nothing is collected: this module is loaded by every pytest run
wherever kilocard is installed, so it imports the runner only when an experiment runs.

The `kilocard_run` fixture runs one experiment from a test and returns its chaos.run.Result. Both
run through the hook `pytest_kilocard_run_file`, which a conftest may answer first (a fake runner).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from chaos.errors import Exit, SpecError
from chaos.settings import key

if TYPE_CHECKING:
    from chaos.ledger import Ledger
    from chaos.run import Result

SUFFIXES = (".yaml", ".yml", ".json")
CLUSTER_KEYS = (key("kubeconfig"), key("prometheus_url"))  # option dests, named as cmd_run's variables
_EXPERIMENTS = pytest.StashKey[frozenset[Path]]()
_LEFT_OPEN = pytest.StashKey[list[tuple[Path, str]]]()  # (file, run id) of runs whose revert is incomplete


class _Hooks:
    @pytest.hookspec(firstresult=True)
    def pytest_kilocard_run_file(self, path: Path, variables: list[str]) -> Result | None:
        """Run one experiment file with these `--var`s (KEY[:TYPE]=VALUE) and return its
        chaos.run.Result. kilocard's own answer comes last, so a conftest can answer first."""


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(_Hooks)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("kilocard", "Chaos Toolkit experiments through kilocard's strict runner")
    group.addoption("--kilocard", action="store_true",
                    help="collect the experiment files (YAML/JSON) and folders given as arguments, one test each")
    group.addoption("--kilocard-var", action="append", default=[], metavar="KEY[:TYPE]=VALUE",
                    help="configuration value for every experiment, as kilocard run --var")
    group.addoption("--kilocard-journal-dir", type=Path, metavar="DIR",
                    help="write each run's journal there, as journal-<stem>-<run id>.json")
    group.addoption("--kilocard-reports", type=Path, metavar="DIR",
                    help="write each run's report there (<run id>/index.html, summary.md, junit.xml), as kilocard run")
    group.addoption("--kilocard-kubeconfig", dest=key("kubeconfig"), metavar="PATH",
                    help="the cluster (configuration kilocard_kubeconfig); default as kilocard run")
    group.addoption("--kilocard-prometheus-url", dest=key("prometheus_url"), metavar="URL",
                    help="Prometheus of the SLO probes (configuration kilocard_prometheus_url)")
    group.addoption("--kilocard-testbed", action="store_true",
                    help="with no cluster named, start the local testbed if it is not running (as kilocard run "
                         "--testbed; without it, only an interactive terminal outside CI starts it)")


_START_TESTBED = False  # --kilocard-testbed, for this session's runs


def pytest_configure(config: pytest.Config) -> None:
    global _START_TESTBED
    _START_TESTBED = bool(config.getoption("kilocard_testbed", False))
    config.stash[_LEFT_OPEN] = []
    if config.getoption("kilocard"):
        from chaos.cli import _experiment_files

        # Only what `kilocard run` would take from these arguments: a folder's own files, not its
        # subfolders' (tests/ holds invalid fixtures), nor the Python files given beside them.
        given = [Path(config.invocation_params.dir, arg.split("::")[0]) for arg in config.args]
        config.stash[_EXPERIMENTS] = frozenset(p.resolve() for p in _experiment_files(given) if p.suffix in SUFFIXES)


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    experiments = parent.config.stash.get(_EXPERIMENTS, None)
    if experiments and file_path.resolve() in experiments:
        return ExperimentFile.from_parent(parent, path=file_path)
    return None


class ExperimentFile(pytest.File):
    def collect(self) -> Iterator[pytest.Item]:
        yield ExperimentItem.from_parent(self, name=self.path.stem, title=_title(self.path))


class ExperimentItem(pytest.Item):
    def __init__(self, *, title: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.title = title

    def runtest(self) -> None:
        # As given on the command line, so messages and journals name it as `kilocard run` would.
        here = self.config.invocation_params.dir
        result = run_experiment(self, self.path.relative_to(here) if self.path.is_relative_to(here) else self.path)
        if result.exit != Exit.PASSED:
            pytest.fail(failure(result), pytrace=False)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"{self.name}: {self.title}" if self.title else self.name


def _title(path: Path) -> str:
    """The experiment's title, for the report; "" when the file does not parse (the run says why)."""
    from chaos import input_file

    try:
        data = input_file.read(path)
    except SpecError:
        return ""
    return str(data.get("title") or "") if isinstance(data, dict) else ""


@pytest.hookimpl(trylast=True)
def pytest_kilocard_run_file(path: Path, variables: list[str]) -> Result:
    from chaos import run

    return run.run_file(path, variables, [], _session)


def _session(configuration: dict[str, Any]) -> tuple[Any, Ledger]:
    """actions.session after kilocard run's embedded default: no cluster named, the local testbed
    (started with the default fleet only as kilocard run would). Only a valid experiment gets this far."""
    import argparse

    from chaos import actions
    from chaos.cli import _embedded_default

    _embedded_default(argparse.Namespace(kubeconfig=configuration.get(key("kubeconfig")), testbed=_START_TESTBED))
    return actions.session(configuration)


def run_experiment(node: pytest.Item, path: Path, extra: list[str] | None = None) -> Result:
    """Run one experiment with the session's options (then `extra` vars; the cluster options win,
    as in cmd_run), write its journal, and record verdict, exit, run id and journal on `node`."""
    config = node.config
    variables = [*config.getoption("kilocard_var"), *(extra or []),
                 *(f"{key}={value}" for key in CLUSTER_KEYS if (value := config.getoption(key)) is not None)]
    result: Result = node.ihook.pytest_kilocard_run_file(path=path, variables=variables)
    verdict = (result.journal.get("kilocard") or {}).get("verdict", result.exit.name.lower())
    node.user_properties += [("kilocard_verdict", verdict), ("kilocard_exit", int(result.exit)),
                             ("kilocard_run_id", result.run_id)]
    journal_dir = config.getoption("kilocard_journal_dir")
    if journal_dir is not None:
        from chaos.cli import _journal_path

        journal = _journal_path(journal_dir, result, several=True)
        journal.parent.mkdir(parents=True, exist_ok=True)
        journal.write_text(json.dumps(result.journal, indent=2, default=str))
        node.user_properties.append(("kilocard_journal", str(journal)))
    reports = config.getoption("kilocard_reports")
    if reports is not None:
        from chaos import report

        page = report.write(report.parse(result.journal, path), reports)
        node.user_properties.append(("kilocard_report", str(page)))
    if result.exit == Exit.REVERT_INCOMPLETE:
        config.stash[_LEFT_OPEN].append((path, result.run_id))
    return result


def failure(result: Result) -> str:
    """The failure message of a run that did not pass: its exit and the runner's reason."""
    message = f"exit {int(result.exit)} ({result.exit.name.lower().replace('_', ' ')}): {result.reason}"
    if result.exit == Exit.REVERT_INCOMPLETE:
        return f"FAULTS STILL IN PLACE: run 'kilocard recover --run {result.run_id}' now; {message}"
    return message


@pytest.fixture
def kilocard_run(request: pytest.FixtureRequest) -> Callable[..., Result]:
    """`kilocard_run(path, vars={...})`: run one experiment (a relative path from the rootdir) with
    the --kilocard-* options and return its chaos.run.Result, for the test to assert on."""

    def run(path: str | Path, vars: Mapping[str, Any] | None = None) -> Result:
        typed = {int: ":int", float: ":float"}  # chaoslib's --var types; anything else goes as text
        extra = [f"{key}{typed.get(type(value), '')}={value}" for key, value in (vars or {}).items()]
        return run_experiment(request.node, request.config.rootpath / path, extra)

    return run


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    left = config.stash.get(_LEFT_OPEN, [])
    if left:
        terminalreporter.section("kilocard: revert incomplete", sep="!", red=True, bold=True)
    for path, run_id in left:
        terminalreporter.line(f"{path}: faults still in place: run 'kilocard recover --run {run_id}'", red=True)
