"""The corpus of malformed experiments (tests/experiments/invalid/, each with the message it must
give on its first line): every one is refused as invalid input naming the file and the place,
before any cluster is asked. tests/testbed/test_runner.py runs them through `kilocard run`."""

from pathlib import Path

import pytest

from chaos import run, schemas
from chaos.errors import SpecError

CORPUS = sorted((Path(__file__).parents[1] / "experiments" / "invalid").glob("*.yaml"))


def expected(path: Path) -> str:
    first = path.read_text().splitlines()[0]
    assert first.startswith("# expect: "), f"{path.name}: first line must say what it expects"
    return first.removeprefix("# expect: ")


def test_the_corpus_is_large_enough():
    assert len(CORPUS) >= 30


@pytest.mark.parametrize("path", CORPUS, ids=[p.stem for p in CORPUS])
def test_a_malformed_experiment_is_refused_with_a_clear_error(path):
    with pytest.raises(SpecError) as err:
        run.load(path)
    message = str(err.value)
    assert message.startswith(f"{path}: "), message
    assert expected(path) in message, message
    assert "Traceback" not in message


EVERYTHING_AT_ONCE = """title: t
description: d
configuration:
  budget_seconds: 60
  pause: 5
steady-state-hypothesis:
  title: h
  probes:
  - type: probe
    name: whole
    tolerance: {type: regex, target: verdcit, pattern: "^ok$"}
    provider: {type: python, module: probes.chaostoolkit, func: tp_groups_whole, arguments: {model: m}}
method:
- type: action
  name: kill
  pauses: {before: -1, after: "${pause}", during: 3}
  provider: {type: python, module: chaos.actions, func: kill_pods, arguments: {label_selector: a=b}}
- type: probe
  name: back
  pauses: 10
  tolerance: {type: regex, target: verdict, pattern: "^ok$"}
  provider: {type: python, module: probes.chaostoolkit, func: slo_recovered_within,
             arguments: {model: m, budget: "${budget_seconds}", hold: -1, window: 10 secs}}
"""


def test_every_problem_of_pauses_probes_and_targets_is_said_at_once(tmp_path):
    path = tmp_path / "e.yaml"
    path.write_text(EVERYTHING_AT_ONCE)
    with pytest.raises(SpecError) as err:
        run.load(path, ["budget_seconds=90", "pause:int=-2"])
    assert str(err.value).splitlines() == [f"{path}: {line}" for line in [
        "steady-state-hypothesis.probes[0] ('whole'): tolerance.target: expected a key tp_groups_whole returns: one "
        f"of {', '.join((*schemas.VERDICT_KEYS, *schemas.PROBE_KEYS['tp_groups_whole']))}, got 'verdcit'",
        "method[1] ('back'): hold: expected a number from 0, got -1",
        "method[1] ('back'): window: expected a Prometheus duration above 0 like 30s, 1m or 1m30s, got '10 secs'",
        "method[0] ('kill'): pauses: unknown field 'during'; expected before or after",
        "method[0] ('kill'): pauses.before: expected seconds from 0, got -1",
        "method[0] ('kill'): pauses.after: expected seconds from 0, got -2",
        "method[1] ('back'): pauses: expected a mapping of before and/or after (seconds), got 10",
    ]]


def test_an_untyped_var_takes_the_type_the_experiment_declares_and_text_where_it_declares_none(tmp_path):
    path = tmp_path / "e.yaml"
    path.write_text(EVERYTHING_AT_ONCE)
    with pytest.raises(SpecError) as err:  # `budget_seconds: 60` declared: "90" is the number 90
        run.load(path, ["budget_seconds=90", "pause:int=2"])
    assert "budget:" not in str(err.value)
    with pytest.raises(SpecError) as err:
        run.load(path, ["budget_seconds=ninety"])
    assert str(err.value) == "--var budget_seconds=ninety: expected an integer (the experiment declares " \
                             "budget_seconds: 60), got 'ninety'"
    path.write_text(EVERYTHING_AT_ONCE.replace("  budget_seconds: 60\n", ""))  # declared nowhere: text, and said so
    with pytest.raises(SpecError) as err:
        run.load(path, ["budget_seconds=90"])
    assert "method[1] ('back'): budget: expected a number above 0, got '90' (text from --var budget_seconds: give " \
           "--var budget_seconds:int=90 or budget_seconds:float=90)" in str(err.value)


@pytest.mark.parametrize(("variables", "files", "said"), [
    (["budget_seconds:int=abc"], [], "--var budget_seconds:int=abc: expected an integer, got 'abc'"),
    (["budget_seconds:decimal=9"], [], "--var budget_seconds:decimal=9: expected a type of int, float, str, bytes, "
                                       "got 'decimal'"),
    (["=9", "x"], [], "--var: expected KEY[:TYPE]=VALUE, got '=9'\n--var: expected KEY[:TYPE]=VALUE, got 'x'"),
    ([], ["/nonexistent/vars.yaml"], "--var-file /nonexistent/vars.yaml: no such file"),
])
def test_bad_vars_and_var_files_are_refused_every_one_by_name(tmp_path, variables, files, said):
    path = tmp_path / "e.yaml"
    path.write_text(EVERYTHING_AT_ONCE)
    with pytest.raises(SpecError) as err:
        run.load(path, variables, files)
    assert str(err.value) == said


def test_an_undefined_variable_and_a_missing_control_are_named_as_such(tmp_path, caplog):
    path = tmp_path / "e.yaml"
    path.write_text("""title: t
description: d
configuration: {namespace: ns}
controls:
- {name: slack, provider: {type: python, module: chaosslack.control}}
method:
- type: action
  name: kill
  provider: {type: python, module: chaos.actions, func: kill_pods,
             arguments: {namespace: "${namespace}", label_selector: "m=${modell}", count: "${count"}}
""")
    with pytest.raises(SpecError) as err:
        run.load(path)
    assert str(err.value).splitlines() == [f"{path}: {line}" for line in [
        "method[0] ('kill'): label_selector: ${modell} is not defined: the configuration has namespace (or give "
        "--var modell=...)",
        "method[0] ('kill'): count: '${' without its closing '}' in '${count'",
        "controls[0] ('slack'): no Python module 'chaosslack.control': install it, or remove the control"]]
    # chaoslib's own "will carry on running nonetheless" would contradict the refusal: not said.
    assert not [r for r in caplog.records if "carry on running" in r.getMessage()], caplog.records


def test_pauses_are_checked_even_where_chaoslib_refuses_the_file(tmp_path):
    path = tmp_path / "e.yaml"
    path.write_text(EVERYTHING_AT_ONCE.replace("description: d\n", ""))
    with pytest.raises(SpecError) as err:
        run.load(path)
    assert str(err.value).splitlines() == [f"{path}: {line}" for line in [
        "experiment requires a description",
        "method[0] ('kill'): pauses: unknown field 'during'; expected before or after",
        "method[0] ('kill'): pauses.before: expected seconds from 0, got -1",  # its ${pause} is checked with vars
        "method[1] ('back'): pauses: expected a mapping of before and/or after (seconds), got 10",
    ]]


def test_pauses_from_the_configuration_and_typed_vars_are_fine(tmp_path):
    path = tmp_path / "e.yaml"
    path.write_text(EVERYTHING_AT_ONCE.replace("target: verdcit", "target: groups").replace("before: -1, ", "")
                    .replace(", during: 3", "").replace("pauses: 10", "pauses: {before: 0.5}")
                    .replace("hold: -1, window: 10 secs", "hold: 10, window: 10s"))
    assert run.load(path).data["method"][0]["pauses"] == {"after": "${pause}"}  # chaoslib substitutes it at run time
    typed = run.load(path, ["budget_seconds:int=90", "pause:float=2.5"])
    assert {k: typed.data["configuration"][k] for k in ("budget_seconds", "pause")} == {"budget_seconds": 90,
                                                                                        "pause": 2.5}
