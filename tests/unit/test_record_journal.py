"""A past kilocard run as an incident timeline (`kilocard record --journal`): the faults its
ledger applied and reverted, on the nodes they hit, with the experiment's parameters as the run
had them; the recovery it watched as symptoms; and every way a journal can fail to say enough."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from chaos import record, replay
from chaos.cli import main
from chaos.errors import SpecError

S3 = Path(__file__).parent / "journals" / "s3.json"
T0 = 1_800_000_000.0


def _iso(at: float) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(at, dt.UTC).isoformat()


def _record(kind: str, target: dict[str, Any], applied: float, reverted: float | None) -> dict[str, Any]:
    moves = [{"state": "recorded", "at": _iso(applied)}, {"state": "applied", "at": _iso(applied)}]
    return {"kind": kind, "target": target, "applied_at": applied, "state": "reverted" if reverted else "applied",
            "transitions": moves + ([{"state": "reverted", "at": _iso(reverted)}] if reverted else [])}


def _action(name: str, func: str, arguments: dict[str, Any], start: float, end: float,
            output: Any = None) -> dict[str, Any]:
    return {"activity": {"type": "action", "name": name, "provider": {
        "type": "python", "module": "chaos.actions", "func": func, "arguments": arguments}},
        "start": _iso(start), "end": _iso(end), "status": "succeeded" if output is not None else "failed",
        **({"output": output} if output is not None else {})}


def _journal(runs: list[dict[str, Any]], records: list[dict[str, Any]], configuration: dict[str, Any] | None = None,
             **state: Any) -> dict[str, Any]:
    return {"experiment": {"title": "a rack's network", "configuration": configuration or {}, "method": []},
            "start": _iso(T0 - 5), "end": _iso(T0 + 100), "run": runs,
            "kilocard": {"run_id": "run-x", "verdict": "passed", "reason": "held", "faults": records,
                         "recovery": [], **state}}


def test_the_s3_run_becomes_its_ecc_fault_on_the_card_it_hit_and_its_replaced_replica() -> None:
    journal = json.loads(S3.read_text())
    data = record.from_journal(journal, str(S3), None, None)
    (fault,) = data["faults"]
    # The ledger's node (the run's plan had resolved another before the guards' snapshot moved it).
    assert fault["fault"] == {"kind": "gpu-ecc", "card": 3, "params": {"type": "dbe", "speed": 0.5},
                              "nodes": ["gpu-070"], "ttl_seconds": 330}, fault
    applied = journal["kilocard"]["faults"][0]["applied_at"]
    assert fault["at"] == 0 and fault["for"] == round(1796136293.0 - applied, 3)  # reverted at 14:44:53Z
    assert fault["note"] == "recorded as run-20261201-144422-854bcf's action 'ecc-on-one-card'"
    (replica,) = data["symptoms"]["replicas"]
    # Each phase the run's journal has (this one has no Ready: none is judged).
    assert replica == {"owner": "llama-3-70b-5bf69b78c7", "pod": "llama-3-70b-5bf69b78c7-vf6w5", "deleted": 12.16,
                       "scheduled": 12.182, "started": 18.187}
    assert data["symptoms"]["alerts"] == [] and data["source"]["alerts"] is False
    assert data["configuration"] == {"namespace": "kilocard-fleet"} and "guards" not in data
    assert data["title"].startswith("S3") and data["title"].endswith("(run-20261201-144422-854bcf)")
    assert data["observe"] == 15  # the last symptom (started +18.2 s) within 15 s, after a 31 s fault
    replay.parse(data, Path("from-journal.yaml"))  # a timeline replay accepts


def test_node_choices_are_pinned_to_the_nodes_hit_and_pod_choices_stay_selectors() -> None:
    bandwidth = {"kind": "network-bandwidth", "node_selector": "kilocard.io/rack=${rack}", "percent": 100,
                 "seed": 4, "params": {"rate_mbit": "${rate}"}, "ttl_seconds": 300}
    kill = {"kind": "pod-kill", "namespace": "${namespace}", "label_selector": "kilocard.io/model=m", "count": 1}
    pods = [{"namespace": "ns", "name": "m-abc-1", "uid": "u1", "node": "gpu-3"}]
    journal = _journal(
        [_action("rack", "apply_fault", {"fault": bandwidth}, T0, T0 + 1,
                 [{"kind": "network-bandwidth", "target": {"node": n}} for n in ("gpu-1", "gpu-0")]),
         _action("kill", "apply_fault", {"fault": kill}, T0 + 10, T0 + 11, [{"kind": "pod-kill", "target": pods[0]}]),
         _action("over", "revert_faults", {}, T0 + 30, T0 + 31, [])],
        [_record("network-bandwidth", {"node": "gpu-1"}, T0 + 0.5, T0 + 30.2),
         _record("network-bandwidth", {"node": "gpu-0"}, T0 + 0.2, T0 + 30.6),
         _record("pod-kill", pods[0], T0 + 10.4, T0 + 10.4)],
        {"rack": "rack-02", "rate": 25000, "namespace": "ns", "kilocard_run_id": "run-x"})
    bw, pod = record.from_journal(journal, "j.json", "the rack", None)["faults"]
    assert bw["fault"] == {"kind": "network-bandwidth", "params": {"rate_mbit": 25000}, "ttl_seconds": 330,
                           "nodes": ["gpu-0", "gpu-1"]}
    assert bw["at"] == 0 and bw["for"] == 30.4  # the first applied (+0.2) to the last reverted (+30.6)
    assert pod == {"at": 10.2, "fault": {**kill, "namespace": "ns"},
                   "note": "recorded as run-x's action 'kill'"}  # a kill has no window and no TTL


def test_two_actions_of_one_kind_keep_their_own_targets_and_parameters() -> None:
    def slow(rate: int) -> dict[str, Any]:
        return {"kind": "network-bandwidth", "nodes_of": {"namespace": "ns", "label_selector": "x"},
                "params": {"rate_mbit": rate}, "ttl_seconds": 300}

    journal = _journal(  # two background actions at once: the outputs say which record is whose
        [_action("tp16", "apply_fault", {"fault": slow(100)}, T0, T0 + 2,
                 [{"kind": "network-bandwidth", "target": {"node": "gpu-7"}}]),
         _action("tp8", "apply_fault", {"fault": slow(200)}, T0, T0 + 2,
                 [{"kind": "network-bandwidth", "target": {"node": "gpu-2"}}])],
        [_record("network-bandwidth", {"node": "gpu-2"}, T0 + 0.1, T0 + 40),
         _record("network-bandwidth", {"node": "gpu-7"}, T0 + 0.3, T0 + 40)])
    tp8, tp16 = record.from_journal(journal, "j.json", None, None)["faults"]  # in the order applied
    assert (tp16["fault"]["nodes"], tp16["fault"]["params"]) == (["gpu-7"], {"rate_mbit": 100})
    assert (tp8["fault"]["nodes"], tp8["fault"]["params"]) == (["gpu-2"], {"rate_mbit": 200})


def test_a_failed_action_claims_the_records_of_its_kind_it_was_applying_and_one_never_reverted_lasts_to_the_end(
) -> None:
    stop = {"kind": "node-kubelet-stop", "nodes": ["gpu-4", "gpu-5"], "ttl_seconds": 600}
    journal = _journal([_action("machine", "apply_fault", {"fault": stop}, T0, T0 + 3)],  # failed: no output
                       [_record("node-kubelet-stop", {"node": "gpu-4"}, T0 + 1, None)])
    (fault,) = record.from_journal(journal, "j.json", None, None)["faults"]
    assert fault["fault"]["nodes"] == ["gpu-4"] and fault["for"] == 99.0  # to the journal's end


def test_a_replayed_incident_becomes_its_timeline_again_entry_by_entry() -> None:
    entries = [{"at": 0, "for": 20, "fault": {"kind": "gpu-ecc", "nodes": ["gpu-1"], "card": 2, "ttl_seconds": 300}},
               {"at": 5, "for": 20, "fault": {"kind": "gpu-ecc", "nodes": ["gpu-2"], "card": 2, "ttl_seconds": 300}}]
    journal = _journal(
        [_action("replay-timeline", "replay_timeline", {"timeline": entries, "observe": 15}, T0, T0 + 45,
                 [{"at": 0, "kind": "gpu-ecc", "targets": [{"node": "gpu-1", "card": 2}]},
                  {"at": 5, "kind": "gpu-ecc", "targets": [{"node": "gpu-2", "card": 2}]}])],
        [_record("gpu-ecc", {"node": "gpu-2", "card": 2}, T0 + 5.1, T0 + 25),
         _record("gpu-ecc", {"node": "gpu-1", "card": 2}, T0 + 0.1, T0 + 20)])
    first, second = record.from_journal(journal, "j.json", None, None)["faults"]
    assert (first["at"], first["fault"]["nodes"]) == (0, ["gpu-1"])
    assert (second["at"], second["fault"]["nodes"]) == (5.0, ["gpu-2"])


def test_the_alerts_of_its_range_that_are_not_faults_are_symptoms_and_the_guards_come_along() -> None:
    journal = json.loads(S3.read_text())
    journal["experiment"]["controls"] = [{"name": "guards", "provider": {
        "type": "python", "module": "chaos.guards", "arguments": {"max_nodes": "${nodes}", "min_ready": 1}}}]
    journal["experiment"]["configuration"]["nodes"] = 2
    applied = journal["kilocard"]["faults"][0]["applied_at"]
    alerts = [{"name": "ReplicaTtftP95High", "labels": {"alertname": "ReplicaTtftP95High", "pod": "p-1",
                                                        "model_name": "llama-3-70b", "namespace": "kilocard-fleet"},
               "firing_at": applied + 7, "resolved_at": applied + 30}]
    data = record.from_journal(journal, str(S3), "S3 again", alerts)
    assert data["guards"] == {"max_nodes": 2, "min_ready": 1} and data["title"] == "S3 again"
    (alert,) = data["symptoms"]["alerts"]
    assert alert["alert"] == "ReplicaTtftP95High" and alert["firing_at"] == 7 and "pod" not in alert["labels"]
    assert data["source"]["alerts"] is True


@pytest.mark.parametrize(("change", "message"), [
    (lambda j: j.pop("kilocard"), "not a kilocard run's journal"),
    (lambda j: j["kilocard"]["faults"].clear(), "the run applied no fault: nothing to replay"),
    (lambda j: j["run"].clear(), "1 applied fault(s) match no action of the journal's method, first gpu-ecc on"),
    (lambda j: j["experiment"]["configuration"].update(card={"type": "env", "key": "CARD"}),
     "'ecc-on-one-card': the journal does not hold the value of ${card}"),
])
def test_a_journal_that_cannot_say_what_ran_is_refused_by_name(change: Any, message: str) -> None:
    journal = json.loads(S3.read_text())
    journal["run"][0]["activity"]["provider"]["arguments"]["fault"]["card"] = "${card}"
    change(journal)
    with pytest.raises(SpecError, match=None) as caught:
        record.from_journal(journal, "s3.json", None, None)
    assert message in str(caught.value), caught.value


def test_cli_records_a_game_days_step_and_refuses_what_it_cannot(tmp_path: Path, capsys) -> None:
    step = tmp_path / "step-5-s3.json"
    step.write_text(S3.read_text())
    day = tmp_path / "gameday.json"
    day.write_text(json.dumps({"title": "weekly", "steps": [
        {"id": "step-1", "kind": "pause"}, {"id": "step-2", "kind": "experiment", "journal": "elsewhere/step-5-s3.json"}]}))
    out = tmp_path / "t.yaml"
    assert main(["record", "--journal", str(day), "--gameday-step", "2", "-o", str(out)]) == 0  # found beside it
    assert yaml.safe_load(out.read_text())["faults"][0]["fault"]["kind"] == "gpu-ecc"
    assert "1 fault(s), 1 replica(s) recovering" in capsys.readouterr().out
    for argv, said in [
        (["--journal", str(day)], "name one of its steps that ran an experiment (2 (step-2)), got None"),
        (["--journal", str(day), "--gameday-step", "step-1"], "got 'step-1'"),
        (["--journal", str(step), "--gameday-step", "1"], "is one run's journal, not a game day's"),
        (["--journal", str(step), "--since", "0"], "a journal's run sets the range"),
        (["--journal", str(tmp_path / "none.json")], "none.json: No such file or directory"),
        (["--since", "0", "--gameday-step", "1"], "give the journal with --journal"),
        (["--until", "5"], "--since and --until: required"),
        (["--journal", str(step), "--slo", "ttft_p95=0.5"], "--slo: reads a cluster's range"),
        (["--since", "0", "--until", "5", "--slo", "p99=0.5"], "--slo p99=0.5: expected INDICATOR=THRESHOLD, the "
                                                            "indicator one of ttft_p95, itl_p95, error_ratio"),
        (["--since", "0", "--until", "5", "--slo", "ttft_p95=-1"], "the threshold a number above 0"),
        (["--since", "0", "--until", "5", "--slo", "ttft_p95"], "expected INDICATOR=THRESHOLD"),
        (["--since", "0", "--until", "5", "--slo", "ttft_p95=0.5", "--prometheus-url", ""],
         "--slo: the indicators are read from Prometheus"),
        (["--since", "0", "--until", "5", "--slo", "ttft_p95=0.5", "--prometheus-url", "http://127.0.0.1:9"],
         "--slo: its models are those the -n namespaces serve: give -n NAMESPACE"),
        (["--since", "0", "--until", "5", "--slo", "ttft_p95=0.5", "--prometheus-url", "http://127.0.0.1:9", "-n",
          "fleet", "--slo-window", "30"], "--slo-window: not a Prometheus duration: '30'"),
    ]:
        assert main(["record", *argv, "-o", str(out)]) == 2, argv
        assert said in capsys.readouterr().err, argv
    broken = copy.deepcopy(json.loads(S3.read_text()))
    broken["run"] = []
    step.write_text(json.dumps(broken))
    assert main(["record", "--journal", str(step), "-o", str(out)]) == 2
    assert "match no action" in capsys.readouterr().err
