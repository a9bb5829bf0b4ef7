"""Reports from real journals of the catalog (tests/unit/journals: S3, S7 and S8 as kilocard
wrote them on the testbed): the page, the JUnit, the hints, the trend score, and refusals."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest
from junitparser import Failure, JUnitXml

from chaos import report, schemas
from chaos.cli import main
from chaos.errors import SpecError
from chaos.report import hints, html, junit, markdown, trend
from chaos.report.journal import Check

JOURNALS = Path(__file__).parent / "journals"


def journal(name: str) -> dict:
    return json.loads((JOURNALS / f"{name}.json").read_text())


def run_of(data: dict, name: str = "j.json") -> report.Run:
    return report.parse(data, Path(name))


def with_placement(data: dict) -> dict:
    """S3's journal with a placement section as the runner now writes it."""
    data = copy.deepcopy(data)
    k = data["kilocard"]
    old, new = k["recovery"][0]["pod"], k["recovery"][0]["replacement"]
    pod = {"namespace": "kilocard-fleet", "model": "llama-3-70b", "cards": 8, "ready": True, "group": "g"}
    node = {"rack": "rack-01", "capacity": 8, "allocatable": 8, "unschedulable": False, "taints": [], "other_cards": 0}
    k["placement"] = {"card_resource": "nvidia.com/gpu",
                      "before": [{**node, "name": "gpu-070", "pods": [{**pod, "name": old}]},
                                 {**node, "name": "gpu-088", "pods": []}],
                      "after": [{**node, "name": "gpu-070", "unschedulable": True, "allocatable": 7,
                                 "taints": ["kilocard.io/quarantine=ecc:NoSchedule"], "pods": []},
                                {**node, "name": "gpu-088", "pods": [{**pod, "name": new}]}]}
    return data


def test_s3_reads_into_its_verdict_fault_window_checks_and_series() -> None:
    run = run_of(journal("s3"))
    assert (run.exit_code, run.verdict, run.scenario) == (0, "passed", "s3-ecc-one-tp-member")
    (fault,) = run.faults
    assert fault.kind == "gpu-ecc" and fault.target == "gpu-070 card 3" and fault.node == "gpu-070"
    assert 29 < fault.ended_at - fault.applied_at < 32  # reverted at the run's end
    assert [c.phase for c in run.checks] == ["before", "before", "method", "method", "after", "after"]
    assert all(c.ok for c in run.checks)
    (series,) = run.series
    assert series.check == "ttft-breached-then-recovered" and series.outcome == "recovered"
    assert series.points[0][0] >= 0 and series.threshold == 0.5 and series.budget == 90
    assert max(v for _, values in series.points for v in values.values()) > series.threshold  # the breach is there


def test_the_page_is_self_contained_and_draws_the_slo_with_its_fault_window(tmp_path: Path) -> None:
    page = report.write(run_of(with_placement(journal("s3"))), tmp_path)
    assert page == tmp_path / "run-20261201-144422-854bcf" / "index.html"
    text = page.read_text()
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", text)  # nothing fetched from the network
    assert "<script" not in text
    assert text.count("<svg") == 4  # timeline, SLO, recovery, placement
    assert "ttft-breached-then-recovered: recovered" in text and "threshold 0.5" in text
    assert "fault applied -&gt; reverted" in text  # the shaded window's legend
    assert "gpu-088" in text and "moved replica" in text
    assert {p.name for p in page.parent.iterdir()} == {"index.html", "summary.md", "junit.xml", "journal.json"}


def test_junit_of_s8_met_has_no_failure_its_finding_an_expected_failure_and_unmet_exactly_its_own(
        tmp_path: Path) -> None:
    path = tmp_path / "junit.xml"
    path.write_text(junit.render([run_of(journal("s8"))]))  # S8 declares that failure as its finding, and met it
    xml = JUnitXml.fromfile(str(path))
    assert (xml.failures, xml.errors, xml.skipped) == (0, 0, 1)
    cases = [case for suite in xml for case in suite]
    (xfail,) = [c for c in cases if c.is_skipped]
    assert xfail.name == "method: replicas-kept-apart"
    (skip,) = xfail.result
    assert skip.message.startswith("expected failure: llama-2-7b-fragile: nothing keeps its replicas apart")
    assert "requiredDuringSchedulingIgnoredDuringExecution" in skip.text  # the fix rides along
    verdict = next(c for c in cases if c.name == "verdict")
    assert verdict.is_passed and verdict.system_out.startswith("as expected (failed): probe 'replicas-kept-apart'")
    # A green game day (S3 passed, S7 aborted as it expects, S8 failed as it expects): not one failure.
    path.write_text(junit.render([run_of(journal(name)) for name in ("s3", "s7", "s8")]))
    assert (JUnitXml.fromfile(str(path)).failures, JUnitXml.fromfile(str(path)).errors) == (0, 0)
    # Its expectation not met (the run went red on it): exactly its own failures, the probe and the verdict.
    unmet = copy.deepcopy(journal("s8"))
    unmet["kilocard"].update(exit_code=1, reason="expected failed, got failed for another reason")
    path.write_text(junit.render([run_of(unmet), run_of(journal("s3"))]))
    xml = JUnitXml.fromfile(str(path))
    assert (xml.failures, xml.errors, xml.skipped) == (2, 0, 0)
    failing = [c.name for suite in xml for c in suite if any(isinstance(r, Failure) for r in c.result)]
    assert failing == ["method: replicas-kept-apart", "verdict"]


def test_junit_counts_an_invalid_run_as_an_error_and_a_failed_verdict_as_a_failure(tmp_path: Path) -> None:
    invalid = run_of({"kilocard": {"exit_code": 2, "verdict": "invalid", "reason": "x.yaml: method[0]: bad",
                                   "experiment_file": "x.yaml"}})
    failed = copy.deepcopy(journal("s3"))
    failed["kilocard"].update(exit_code=1, verdict="failed", reason="probe 'p' failed: slow")
    path = tmp_path / "junit.xml"
    path.write_text(junit.render([invalid, run_of(failed)]))
    xml = JUnitXml.fromfile(str(path))
    assert (xml.tests, xml.failures, xml.errors) == (1 + 7, 1, 1)


def test_a_game_days_junit_lists_every_step_in_order_the_ones_never_run_as_skipped_with_the_reason() -> None:
    failed = copy.deepcopy(journal("s3"))
    failed["kilocard"].update(exit_code=1, verdict="failed", reason="steady state not met before the method")
    run = run_of(failed)
    stopped = "step-1 failed and the plan does not continue on failure"
    day = {"title": "catalog", "steps": [
        {"id": "step-1", "kind": "experiment", "name": "S3", "status": "ran", "run_id": run.run_id},
        {"id": "step-2", "kind": "pause", "name": "", "describe": "pause 10 s", "status": "skipped", "reason": stopped},
        *({"id": f"step-{i}", "kind": "experiment", "name": f"S{i}", "describe": f"experiment s{i}.yaml",
           "status": "skipped", "reason": stopped} for i in range(3, 28))]}
    xml = JUnitXml.fromstring(junit.render([run], day).encode())
    suites = list(xml)
    assert [s.name for s in suites] == [run.scenario, "step-2: pause 10 s", *(f"step-{i}: S{i}" for i in range(3, 28))]
    assert (xml.tests, xml.failures, xml.errors, xml.skipped) == (7 + 26, 1, 0, 26)
    (case,) = list(suites[5])
    assert case.name == "experiment s6.yaml" and case.result[0].message == f"skipped: {stopped}"
    # A step that ran, whose journal was not read, is an error: never a silent pass.
    lost = {"title": "t", "steps": [{"id": "step-1", "kind": "experiment", "name": "S1", "status": "ran",
                                     "run_id": "run-lost", "reason": "r", "journal": "j.json"}]}
    assert JUnitXml.fromstring(junit.render([], lost).encode()).errors == 1
    # A pause and an approval that happened pass.
    done = {"title": "t", "steps": [{"id": "step-1", "kind": "pause", "describe": "pause 1 s", "status": "paused"},
                                    {"id": "step-2", "kind": "gate", "describe": "approve", "status": "approved"}]}
    assert (lambda x: (x.tests, x.failures, x.errors, x.skipped))(JUnitXml.fromstring(junit.render([], done).encode())) \
        == (2, 0, 0, 0)


def test_the_anti_affinity_hint_is_the_stanza_for_that_model() -> None:
    run = run_of(journal("s8"))
    (check,) = [c for c in run.checks if not c.ok]
    found = hints.hint(check, run)
    assert "matchLabels: {kilocard.io/model: llama-2-7b-fragile}" in found
    assert "topologyKey: kubernetes.io/hostname" in found
    assert all(hints.hint(c, run) is None for c in run.checks if c.ok)


def test_the_capacity_hint_counts_the_cards_and_replicas_missing() -> None:
    run = run_of(with_placement(journal("s3")))
    gib = 2**30
    check = Check("method", "fits", "capacity_fits", False, "short", {
        "model": "llama-3-70b", "need_bytes": 700 * gib, "supply_bytes": 320 * gib, "serving_replicas": 1})
    found = hints.hint(check, run)
    # 380 GiB short at 40 GiB of KV per card: 10 cards, two more TP=8 replicas.
    assert "380.0 GiB of KV cache short: at least 10 more cards" in found and "2 more TP=8 replica(s)" in found


def test_the_recovery_hint_names_the_slowest_phase() -> None:
    run = run_of(journal("s3"))
    check = Check("method", "ready", "tp_groups_recovered_within", False, "late", {"model": "llama-3-70b"})
    assert "the image pull" in hints.hint(check, run) and "6.0 s" in hints.hint(check, run)


def test_score_follows_its_documented_formula() -> None:
    s3 = run_of(journal("s3"))
    worst = trend.slowest(s3)  # the SLO back after 21.3 s of a 90 s deadline
    assert worst.check == "ttft-breached-then-recovered" and worst.budget == 90
    assert trend.score(s3) == pytest.approx(1 - 0.5 * worst.seconds / 90)
    failed = copy.deepcopy(journal("s3"))
    failed["kilocard"]["exit_code"] = 1
    assert trend.score(run_of(failed)) == 0
    s7, s8 = run_of(journal("s7")), run_of(journal("s8"))  # expected verdicts met
    assert trend.score(s7) == 1  # no budgeted recovery
    # S8's replacements were back within its budget, given as ${budget_seconds}: the run's configuration.
    slow = trend.slowest(s8)
    assert (slow.check, slow.budget) == ("replaced-within-budget",
                                         float(journal("s8")["experiment"]["configuration"]["budget_seconds"]))
    assert trend.score(s8) == pytest.approx(1 - 0.5 * slow.seconds / slow.budget)
    assert trend.resilience([s3, run_of(failed), s7, s8]) == round(
        100 * ((trend.score(s3) + 0) / 2 + 1 + trend.score(s8)) / 3)


def with_probe(data: dict, func: str, output: dict, arguments: dict | None = None) -> dict:
    """A journal with one more method probe, as chaoslib records it."""
    data = copy.deepcopy(data)
    data["run"].append({"activity": {"type": "probe", "name": f"the-{func}", "provider": {
        "type": "python", "module": "probes.chaostoolkit", "func": func, "arguments": arguments or {}}},
        "status": "succeeded", "output": {"verdict": "ok", "ok": True, "reason": "in time", **output}})
    return data


def test_every_budgeted_probe_counts_in_the_score_by_its_two_keys_alone() -> None:
    """The score reads `budget_seconds` and `recovered_after_seconds`, never a probe's name: the
    device-taint and remediation probes were once left out, the trend knowing other keys."""
    budgeted = sorted(f for f, keys in schemas.PROBE_KEYS.items() if set(schemas.BUDGET_KEYS) <= set(keys))
    assert budgeted == ["devices_tainted_within", "remediated_within", "slo_recovered_within",
                        "tp_groups_recovered_within"]
    for func in budgeted:
        run = run_of(with_probe(journal("s7"), func, {"budget_seconds": 100, "recovered_after_seconds": 60.0}))
        assert trend.slowest(run) == trend.Recovery(60.0, 100.0, f"the-{func}"), func
        assert trend.score(run) == pytest.approx(0.7), func
    not_met = run_of(with_probe(journal("s7"), budgeted[0], {"budget_seconds": 100, "recovered_after_seconds": None}))
    assert trend.slowest(not_met) is None


def test_a_journal_of_today_is_read_without_looking_up_any_probes_argument(monkeypatch) -> None:
    """Only a journal from before the two keys needs the budget from the probe's arguments (a scan
    of the whole journal per probe)."""
    from chaos.report import journal as reader

    def scanned(*_a):
        raise AssertionError("an argument was looked up")

    monkeypatch.setattr(reader, "_argument", scanned)
    run = run_of(with_probe(journal("s7"), "slo_recovered_within", {"budget_seconds": 90, "recovered_after_seconds": 9.0}))
    assert trend.slowest(run) == trend.Recovery(9.0, 90.0, "the-slo_recovered_within")


@pytest.mark.parametrize(("func", "output", "arguments", "expected"), [
    ("remediated_within", {"recovered_after": 30.0}, {"budget": "${budget}"}, (30.0, 120.0)),
    ("remediated_within", {"seconds": 12.5}, {"budget": 50}, (12.5, 50.0)),
    ("tp_groups_recovered_within", {"recovered_after": 8.0}, {"budget": 40}, (8.0, 40.0)),
    ("slo_recovered_within", {"deadline": 90, "recovered_after": 45.0}, {"deadline": 90}, (45.0, 90.0)),
    ("devices_tainted_within", {"budget": 10}, {"budget": 10}, None),  # never scored before: still not
    ("tp_groups_recovered_within", {"recovered_after": 8.0}, {}, None),  # no budget to weigh it by
])
def test_a_journal_written_before_the_two_keys_keeps_its_score(func: str, output: dict, arguments: dict,
                                                               expected: tuple[float, float] | None) -> None:
    data = with_probe(journal("s7"), func, output, arguments)
    data["experiment"]["configuration"] = {**(data["experiment"].get("configuration") or {}), "budget": 120}
    found = trend.slowest(run_of(data))
    assert (found and (found.seconds, found.budget)) == expected


def test_trend_and_compare_pages_link_and_overlay(tmp_path: Path) -> None:
    runs = [run_of(journal(n), f"{n}.json") for n in ("s3", "s7", "s8")]
    page = report.write_trend(runs, tmp_path).read_text()
    assert re.search(r"Resilience: \d+ / 100", page)
    for r in runs:
        assert f'href="../{r.key}/index.html"' in page and (tmp_path / r.key / "index.html").is_file()
    compared = report.compare(runs[0], runs[2], tmp_path).read_text()
    assert runs[0].run_id in compared and runs[2].run_id in compared
    assert "one of the runs has no SLO series" in compared  # S8 judged no SLO


def test_markdown_summary_carries_the_verdict_and_the_fix() -> None:
    text = markdown.summary(run_of(journal("s8")))
    assert "**failed** (exit 0): as expected (failed)" in text
    assert "**Fix for replicas-kept-apart:**" in text


@pytest.mark.parametrize("content, message", [
    ("not json", "not a kilocard journal: not JSON"),
    ("[1, 2]", "not a kilocard journal: no 'kilocard' section"),
    ('{"status": "completed", "run": []}', "not a kilocard journal: no 'kilocard' section"),
    ('{"kilocard": {"verdict": "passed", "reason": "r"}}', "kilocard.exit_code: not a kilocard journal"),
])
def test_a_journal_that_is_not_ours_is_refused_and_nothing_is_written(tmp_path: Path, capsys, content: str,
                                                                      message: str) -> None:
    bad = tmp_path / "journal.json"
    bad.write_text(content)
    with pytest.raises(SpecError, match=re.escape(f"{bad}: {message}")):
        report.load(bad)
    out = tmp_path / "reports"
    assert main(["report", str(JOURNALS / "s3.json"), str(bad), "--out", str(out)]) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


def test_report_cli_writes_each_run_and_the_trend(tmp_path: Path, capsys) -> None:
    assert main(["report", str(JOURNALS), "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[-1] == f"trend {tmp_path / 'trend' / 'index.html'}"
    assert len([line for line in printed if line.startswith("report ")]) == 3
    assert main(["report", "--compare", str(JOURNALS / "s3.json"), "--out", str(tmp_path)]) == 2
    assert "--compare: expected two journals, got 1" in capsys.readouterr().err


def test_html_escapes_what_the_journal_says() -> None:
    data = copy.deepcopy(journal("s8"))
    data["kilocard"]["reason"] = "<script>alert(1)</script>"
    assert "<script>alert" not in html.run_page(run_of(data))


def test_every_summary_and_report_names_the_cluster_the_run_ran_against(tmp_path: Path) -> None:
    import yaml

    from chaos.kube import Kube

    kubeconfig = tmp_path / "staging.kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "staging",
        "clusters": [{"name": "c", "cluster": {"server": "https://10.0.0.1:6443", "insecure-skip-tls-verify": True}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "staging", "context": {"cluster": "c", "user": "u"}}]}))
    kube = Kube.from_kubeconfig(kubeconfig)
    target = kube.target()
    kube.close()
    assert target == {"source": f"kubeconfig {kubeconfig}", "context": "staging", "server": "https://10.0.0.1:6443"}
    data = copy.deepcopy(journal("s3"))
    data["kilocard"]["cluster"] = target
    run = run_of(data)
    line = f"kubeconfig {kubeconfig}, context staging, https://10.0.0.1:6443"
    assert run.cluster == line and run_of(journal("s3")).cluster == "-"  # a journal from before it was kept
    assert f"cluster {line}" in markdown.summary(run)
    assert f"<td>cluster</td><td>{line}</td>" in html.run_page(run).replace("\n", "")
    (suite,) = JUnitXml.fromstring(junit.render([run]).split("\n", 1)[1])
    assert {p.name: p.value for p in suite.properties()}["cluster"] == line


@pytest.mark.parametrize(("output", "expected"), [
    ({"budget_seconds": 90, "recovered_after_seconds": 0}, (0.0, 90.0)),  # back at once: still a recovery
    ({"budget_seconds": 90.5, "recovered_after_seconds": 12.25}, (12.25, 90.5)),
    ({"budget_seconds": 90, "recovered_after_seconds": None}, None),  # not met
    ({"budget_seconds": 0, "recovered_after_seconds": 0}, None),  # nothing to weigh it by
    ({"budget_seconds": True, "recovered_after_seconds": 1}, None),
    ({"budget_seconds": 90, "recovered_after_seconds": True}, None),
    ({"budget_seconds": "90", "recovered_after_seconds": 1}, None),
    ({"recovered_after_seconds": 1}, None), ({"budget_seconds": 90}, None), ({}, None),
])
def test_a_recovery_is_two_numbers_and_a_budget_above_zero(output: dict, expected: tuple | None) -> None:
    from probes.verdict import budgeted, recovery

    assert recovery(output) == expected
    assert budgeted(90, 1.23456) == {"budget_seconds": 90, "recovered_after_seconds": 1.235}
    assert budgeted(90, None) == {"budget_seconds": 90, "recovered_after_seconds": None}


def as_replay(data: dict, ok: bool) -> dict:
    """S3's journal as a replay's: the replay extension, and incident_symptoms' judgement of two
    symptoms in the method (the shape probes.incident writes)."""
    data = copy.deepcopy(data)
    data["experiment"].setdefault("extensions", []).append(
        {"name": "kilocard-replay", "timeline": "incidents/ecc.yaml", "expect": "reproduced", "recorded": {}})
    rows = [{"symptom": "alert ReplicaTtftP95High {model=llama-3-70b}", "recorded": "firing at 12.0 s",
             "observed": "firing at 14.5 s" if ok else "never fired", "judgement": "ok" if ok else "failed",
             "why": "" if ok else "not seen within 15 s of 12.0 s"},
            {"symptom": "replica llama-3-70b-0 replaced", "recorded": "ready at 41.0 s", "observed": "ready at 39.2 s",
             "judgement": "ok", "why": ""}]
    reason = "reproduced: every symptom came back" if ok else "not reproduced: alert ReplicaTtftP95High never fired"
    data["run"].append({"activity": {"type": "probe", "name": "incident-symptoms",
                                     "provider": {"type": "python", "func": "incident_symptoms"}},
                        "status": "succeeded", "start": data["run"][-1]["end"], "end": data["run"][-1]["end"],
                        "output": {"ok": ok, "reason": reason, "judgement": "reproduced" if ok else "failed",
                                   "symptoms": rows}})
    return data


@pytest.mark.parametrize("ok", [True, False])
def test_a_replays_symptoms_recorded_against_observed_are_in_its_summary_page_and_junit(ok: bool) -> None:
    run = run_of(as_replay(journal("s3"), ok))
    assert [r[0] for r in run.symptom_rows] == ["alert ReplicaTtftP95High {model=llama-3-70b}",
                                               "replica llama-3-70b-0 replaced"]
    summary = markdown.summary(run)
    observed = "firing at 14.5 s" if ok else "never fired"
    assert "| symptom | recorded | observed | judgement | why |" in summary
    assert f"| alert ReplicaTtftP95High {{model=llama-3-70b}} | firing at 12.0 s | {observed} |" in summary
    assert "| replica llama-3-70b-0 replaced | ready at 41.0 s | ready at 39.2 s | ok |  |" in summary
    assert f"<td>{observed}</td>" in html.run_page(run)
    suite = JUnitXml.fromstring(junit.render([run]).encode())
    (verdict,) = [c for s in suite for c in s if c.name == "verdict"]
    assert f"alert ReplicaTtftP95High {{model=llama-3-70b}}: recorded firing at 12.0 s, observed {observed}" \
        in verdict.system_out
    assert "replica llama-3-70b-0 replaced: recorded ready at 41.0 s, observed ready at 39.2 s: ok" in verdict.system_out


def test_a_run_that_is_no_replay_has_no_symptom_table() -> None:
    run = run_of(journal("s3"))
    assert run.symptom_rows == [] and "| symptom |" not in markdown.summary(run)
    assert "recorded" not in (JUnitXml.fromstring(junit.render([run]).encode()).tostring() or b"").decode()


def test_the_summary_says_what_the_plan_warned_before_anything_was_applied() -> None:
    from chaos.report import markdown

    warned = copy.deepcopy(journal("s3"))
    warned["kilocard"]["plan"]["warnings"] = ["load: at its peak (12 QPS ...) exceeds the 8.0 GiB of 2 Ready replicas"]
    text = markdown.summary(run_of(warned))
    assert "Plan warned: load: at its peak (12 QPS ...) exceeds the 8.0 GiB of 2 Ready replicas" in text
    assert "Plan warned" not in markdown.summary(run_of(journal("s3")))
