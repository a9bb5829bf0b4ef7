"""Game-day plans (chaos.gameday.plan): the example plans load, and every malformed plan in
tests/experiments/gamedays/invalid/ is refused with exactly the message its `# expect:` lines give
($DIR is the plan's folder), every problem of a file at once."""

from pathlib import Path

import pytest
import yaml

from chaos import gameday, run
from chaos.errors import SpecError
from chaos.gameday import ApproveStep, ConfigMapRef, ExperimentStep, PauseStep

ROOT = Path(__file__).resolve().parents[2]
CORPUS = sorted((ROOT / "tests" / "experiments" / "gamedays" / "invalid").glob("*.yaml"))
# S11 follows S3 (both end with a node quarantined and released), S12 (a replica killed) and S14
# (two of another model's) follow them; S9 and S10 run before S7, which replaces every
# llama-3-70b replica (S9 judges replicas Ready for its window).
ORDER = (1, 2, 3, 11, 12, 14, 13, 4, 5, 6, 9, 10, 7, 8)
CATALOG = [f"../{p.name}" for p in sorted((ROOT / "experiments").glob("s[0-9]*-*.yaml"),
                                          key=lambda p: ORDER.index(int(p.name[1:].split("-")[0])))]


def expected(path: Path) -> str:
    lines = [line.removeprefix("# expect: ") for line in path.read_text().splitlines() if line.startswith("# expect: ")]
    assert lines, f"{path.name}: say what it expects in '# expect: ' lines at the top"
    return "\n".join(f"{path}: {line.replace('$DIR', str(path.parent))}" for line in lines)


def test_the_corpus_covers_each_kind_of_problem():
    assert len(CORPUS) >= 25


@pytest.mark.parametrize("path", CORPUS, ids=[p.stem for p in CORPUS])
def test_a_malformed_plan_is_refused_with_its_exact_message(path):
    with pytest.raises(SpecError) as err:
        gameday.load(path)
    assert str(err.value) == expected(path)


def test_every_problem_is_reported_at_once():
    path = next(p for p in CORPUS if p.stem == "every-problem-at-once")
    with pytest.raises(SpecError) as err:
        gameday.load(path)
    assert len(str(err.value).splitlines()) == 6


def test_a_missing_plan_file_is_named():
    with pytest.raises(SpecError, match=r"^/nonexistent/plan.yaml: no such file$"):
        gameday.load(Path("/nonexistent/plan.yaml"))


def test_the_catalog_game_day_runs_s1_to_s14_unattended():
    plan = gameday.load(ROOT / "experiments" / "gamedays" / "catalog.yaml")
    experiments = [s for s in plan.steps if isinstance(s, ExperimentStep)]
    assert [s.written for s in experiments] == CATALOG
    assert plan.window is None and plan.control is None and plan.config_maps == ()
    assert not any(isinstance(s, ApproveStep) for s in plan.steps)
    pauses = [s for s in plan.steps if isinstance(s, PauseStep)]
    assert len(pauses) == len(experiments) - 1 and all(5 <= p.seconds <= 15 for p in pauses)
    assert all(isinstance(a, ExperimentStep) != isinstance(b, ExperimentStep) for a, b in zip(plan.steps, plan.steps[1:], strict=False))
    assert all(s.note and s.name for s in experiments)
    # S7, S8 and S9 declare the verdicts they expect, so the whole catalog passes.
    assert [run.load(s.path).expect is not None for s in experiments] == [False] * 10 + [True, False, True, True]


def test_the_weekly_example_has_a_window_both_gates_and_a_control():
    plan = gameday.load(ROOT / "experiments" / "gamedays" / "weekly-with-approval.yaml")
    assert plan.window is not None and plan.window.describe() == "mon-fri 10:00-16:00 Asia/Shanghai"
    assert plan.control == ConfigMapRef("kilocard-system", "gameday-control")
    gates = [s for s in plan.steps if isinstance(s, ApproveStep)]
    assert [(g.via, g.config_map) for g in gates] == [
        ("terminal", None), ("configmap", ConfigMapRef("kilocard-system", "gameday-gates"))]
    assert all(g.timeout > 0 and g.note for g in gates) and plan.notes
    # The note tells the on-call SRE the gate's real id.
    assert f"kilocard.io/approved={gates[1].id}" in gates[1].note


def test_vars_become_typed_runner_vars_and_the_command_lines_come_after(tmp_path):
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump({"title": "t", "steps": [
        {"experiment": str(ROOT / "experiments" / "s8-fragile-placement.yaml"),
         "vars": {"budget_seconds": 90, "model": "llama-3-70b"}}]}))
    step = gameday.load(path).steps[0]
    assert isinstance(step, ExperimentStep)
    assert step.variables == ("budget_seconds:int=90", "model=llama-3-70b")
    assert step.id == "step-1" and step.describe().endswith("(budget_seconds:int=90, model=llama-3-70b)")
    # The command line's vars are checked with each experiment too, and win over the step's.
    with pytest.raises(SpecError, match=r"steps\[0\]\.experiment: .*'replaced-within-budget'\): budget: expected a number above 0"):
        gameday.load(path, ["budget_seconds:int=-5"])


def test_the_public_surface():
    assert gameday.__all__ == sorted(gameday.__all__)
    assert gameday.__all__ == [
        "ApproveStep", "Clock", "ConfigMapRef", "ExperimentStep", "GameDay", "Observer", "Outcome", "PauseStep", "Plan",
        "Quiet", "RunOne", "Status", "Step", "SystemClock", "Window", "dump", "load", "run", "schedule"]


@pytest.mark.parametrize("argv, said", [
    (["gameday", "run", str(CORPUS[0].parent / "missing-experiment.yaml")], "no such file"),
    (["gameday", "run", str(CORPUS[0].parent / "gate-without-timeout.yaml")], "steps[2].timeout: required"),
    (["gameday", "schedule", str(ROOT / "experiments" / "gamedays" / "catalog.yaml"), "--cron", "0 25 * * *"],
     "--cron: hour (field 2 of '0 25 * * *'): 25 is out of range; expected 0-23"),
])
def test_the_cli_says_it_in_one_line_and_exits_2_before_anything_starts(argv, said, capsys):
    from chaos.cli import main

    assert main(argv) == 2
    err = capsys.readouterr().err
    assert said in err and "Traceback" not in err
