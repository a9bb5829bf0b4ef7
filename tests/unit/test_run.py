"""The strict runner's pure parts: what a journal means, and what bad input says (no cluster)."""

import re

import pytest

from chaos import judgement, run
from chaos.errors import Exit, SpecError


def journal(status="completed", before=True, after=True, deviated=False, runs=()):
    def state(met):
        return None if met is None else {"steady_state_met": met, "probes": [
            {"activity": {"name": "p"}, "tolerance_met": met, "output": {"verdict": "ok" if met else "failed",
                                                                         "reason": "two replicas on one node"}}]}

    return {"status": status, "deviated": deviated, "steady_states": {"before": state(before), "after": state(after)},
            "run": list(runs)}


def test_a_steady_state_not_met_before_the_method_fails_the_run():
    # chaoslib ends this run "completed", not deviated: chaos run exits 0 on it.
    code, reason, _basis = judgement.verdict(journal(before=False, after=None))
    assert code == Exit.FAILED and reason == "steady state not met before the method: p: two replicas on one node"


def test_a_failed_action_fails_a_completed_run():
    failed = {"activity": {"name": "kill", "type": "action"}, "status": "failed",
              "exception": ["Traceback ...\n", "chaoslib.exceptions.ActivityFailed: FileNotFoundError: x\n"]}
    code, reason, _basis = judgement.verdict(journal(runs=[failed]))
    assert code == Exit.FAILED
    assert reason == "action 'kill' failed: chaoslib.exceptions.ActivityFailed: FileNotFoundError: x"


def test_a_method_probe_out_of_its_tolerance_fails_the_run():
    probe = {"activity": {"name": "recovered", "type": "probe",
                          "tolerance": {"type": "regex", "target": "verdict", "pattern": "^ok$"}},
             "status": "succeeded", "output": {"verdict": "failed", "reason": "1 of 2 ranks present"}}
    assert judgement.verdict(journal(runs=[probe]))[:2] == (Exit.FAILED, "probe 'recovered' failed: 1 of 2 ranks present")
    probe["output"] = {"verdict": "ok"}
    assert judgement.verdict(journal(runs=[probe]))[0] == Exit.PASSED


def test_an_activity_past_its_timeout_fails_even_when_it_succeeded():
    slow = {"activity": {"name": "wait", "type": "action", "timeout": 2}, "status": "succeeded", "duration": 2.5}
    assert judgement.verdict(journal(runs=[slow]))[:2] == (Exit.FAILED, "activity 'wait' ran 2.5 s, over its 2 s timeout")


def test_deviation_interruption_and_a_pass():
    assert judgement.verdict(journal(after=False, deviated=True))[0] == Exit.FAILED
    assert judgement.verdict(journal(status="interrupted"))[0] == Exit.ABORTED
    assert judgement.verdict(journal(status="aborted"))[0] == Exit.FAILED
    assert judgement.verdict(journal())[:2] == (Exit.PASSED, "steady state met before and after the method")


def test_secrets_are_redacted_by_key_and_under_secrets():
    data = {"configuration": {"kilocard_context": "prod", "api_token": "abc"},
            "secrets": {"k8s": {"KUBERNETES_API_KEY": "xyz"}}, "run": [{"output": "fine"}]}
    assert run.redact(data) == {"configuration": {"kilocard_context": "prod", "api_token": "***"},
                                "secrets": {"k8s": {"KUBERNETES_API_KEY": "***"}}, "run": [{"output": "fine"}]}


def write(tmp_path, text, name="e.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return path


BASE = """title: t
description: d
method:
- type: action
  name: kill
  provider:
    type: python
    module: chaos.actions
    func: {func}
    arguments: {arguments}
"""


def test_every_problem_of_a_file_is_reported_at_once(tmp_path):
    path = write(tmp_path, BASE.format(func="apply_fault", arguments="{fault: {kind: pod-kil}}") + """- type: action
  name: isolate
  timeout: -3
  provider: {type: python, module: chaos.actions, func: isolate_nodes, arguments: {ttl_seconds: -5, nodes: [a]}}
""")
    with pytest.raises(SpecError) as err:
        run.load(path)
    lines = str(err.value).splitlines()
    assert lines[0].startswith(f"{path}: method[0] ('kill'): fault.kind: expected one of card-isolate, dns-failure, dra-card-isolate, ")
    assert lines[1] == f"{path}: method[1] ('isolate'): fault.ttl_seconds: expected a number above 0 to 86400, got -5"
    assert lines[2] == f"{path}: method[1] ('isolate'): timeout: expected seconds above 0, got -3"


@pytest.mark.parametrize(("text", "message"), [
    ("title: x\ndescription: [unclosed\n", "line 2, column 14"),
    ("- just\n- a list\n", "expected an experiment"),
    ("title: t\n", "experiment requires a description"),
    (BASE.format(func="kill_pods", arguments="{label_selector: 'app=x', nope: 1}"),
     "argument 'nope' is not part of the function signature in activity 'kill_pods'"),
    (BASE.format(func="apply_fault", arguments="{fault: {kind: pod-kill, label_selector: 'app in (x'}}"),
     "method[0] ('kill'): fault.label_selector: expected a label selector"),
])
def test_bad_experiments_name_the_place(tmp_path, text, message):
    with pytest.raises(SpecError, match=r"e\.yaml: .*" + re.escape(message)):
        run.load(write(tmp_path, text))


def test_vars_substitute_into_fault_arguments(tmp_path):
    path = write(tmp_path, BASE.format(func="apply_fault",
                                       arguments="{fault: {kind: pod-kill, label_selector: '${selector}'}}"))
    experiment = run.load(path, ["selector=kilocard.io/model=llama-3-70b"])
    assert [f for f, _ in experiment.faults] == [{"kind": "pod-kill", "label_selector": "kilocard.io/model=llama-3-70b"}]
    with pytest.raises(SpecError, match="--var: expected KEY\\[:TYPE\\]=VALUE, got 'no-equals-sign'"):
        run.load(path, ["no-equals-sign"])


def test_a_declared_expected_failure_is_met_or_not():
    expect = judgement.Expectation(Exit.FAILED, "probe 'apart' failed: ")
    assert judgement.judged(expect, Exit.FAILED, "probe 'apart' failed: 4 of 8 on n1") == (
        Exit.PASSED, "as expected (failed): probe 'apart' failed: 4 of 8 on n1")
    # The finding went away (someone fixed the fleet), or the run failed for another reason.
    assert judgement.judged(expect, Exit.PASSED, "steady state met") == (
        Exit.FAILED, "expected failed with \"probe 'apart' failed: \", got passed: steady state met")
    assert judgement.judged(expect, Exit.FAILED, "action 'kill' failed: x")[0] == Exit.FAILED
    # Invalid input and an incomplete revert are never what an experiment expects.
    assert judgement.judged(expect, Exit.INVALID, "bad")[0] == Exit.INVALID
    assert judgement.judged(judgement.Expectation(Exit.ABORTED), Exit.REVERT_INCOMPLETE, "x")[0] == Exit.REVERT_INCOMPLETE
    assert judgement.judged(None, Exit.ABORTED, "stop") == (Exit.ABORTED, "stop")
    # Missing data, or a probe that raised, is never the expected finding, even where the reason starts the same way.
    blind = "probe 'apart' failed: no data: list pods: connection refused: cannot judge, not healthy"
    assert judgement.judged(expect, Exit.FAILED, blind, judgement.UNKNOWN)[0] == Exit.FAILED
    assert judgement.judged(expect, Exit.FAILED, "probe 'apart' failed: KeyError", judgement.ERROR)[0] == Exit.FAILED
    fired = "stop condition fired: zero-ready m: the cluster could not be read: a stop condition treats that as a breach"
    assert judgement.judged(judgement.Expectation(Exit.ABORTED, "stop condition fired: zero-ready"), Exit.ABORTED, fired,
                      judgement.UNKNOWN)[0] == Exit.FAILED


@pytest.mark.parametrize("expect", [{"exit": 1, "reason": "probe 'x' failed: "}, {"exit": 3}, {"exit": 0},
                                    {"exit": 2}, {"exit": True}, {"exit": 1, "reason": 5}, {"reason": "x"},
                                    {"exit": 1, "why": "x"}])
def test_the_expect_extension_and_its_documented_schema_agree(expect):
    from jsonschema import Draft202012Validator

    from chaos import schemas

    by_schema = not list(Draft202012Validator(schemas.EXPECT).iter_errors(expect))
    try:
        run._expectation({"extensions": [{"name": "kilocard", "expect": expect}]})
    except SpecError:
        by_runner = False
    else:
        by_runner = True
    assert by_schema == by_runner, expect


def test_the_journal_keeps_every_transition_of_a_fault_from_its_ledger(tmp_path):
    from chaos import ledger

    book = ledger.Ledger("run-1", None, tmp_path)
    record = ledger.Record(run_id="run-1", fault_id="f1", kind="node-isolate", target={"node": "n"},
                           expires_at="2030-01-01T00:00:00Z")
    for state, error in (("recorded", ""), ("applied", ""), ("applied", "revert: 503"), ("reverted", "")):
        record.state, record.error = state, error
        book.write([record])
    with book.path.open("a") as out:
        out.write('{"torn')  # a runner killed mid-write leaves a torn line: skipped
    steps = ledger.transitions(book.path)["f1"]
    assert [(s["state"], s.get("error")) for s in steps] == [
        ("recorded", None), ("applied", None), ("applied", "revert: 503"), ("reverted", None)]
    assert all(s["at"].endswith("Z") for s in steps)
