"""The hunt's confirmation: the faults that lose each kind of domain, and predicted against
observed read from a journal as the strict runner writes it."""

from __future__ import annotations

import yaml

from chaos import confirm, plan, run

DOMAIN = {"domain": "node/n1", "kind": "node", "nodes": ["n1"], "pods": [], "severity": "slo",
          "models": [{"namespace": "ns", "model": "m", "replicas": 2, "lost": 1, "nowhere": 0, "slo": "broken"}]}


def journal(ended: list[str], whole: str, outcome: str) -> dict:
    pods = [{"namespace": "ns", "name": f"p{i}", "model": "m", "group": f"g{i}"} for i in range(2)]
    pods.append({"namespace": "ns", "name": "x0", "model": "other", "group": "gx"})
    return {"kilocard": {"recovery": [{"pod": p, "deleted": 1.0} for p in ended],
                         "placement": {"before": [{"name": "n1", "pods": pods}]}},
            "run": [{"activity": {"name": "whole-ns-m"}, "output": {"verdict": whole, "reason": "w"}},
                    {"activity": {"name": "slo-ns-m"},
                     "output": {"verdict": "ok" if outcome != "not_recovered" else "failed", "reason": "s",
                                "outcome": outcome}}]}


def test_each_kind_of_domain_has_its_real_fault(tmp_path):
    assert [f["kind"] for f in confirm.faults(DOMAIN, 60)] == ["node-kubelet-stop", "node-out-of-service"]
    group = {**DOMAIN, "kind": "tp-group", "pods": ["ns/a-0", "ns/a-1"]}
    assert [f["field_selector"] for f in confirm.faults(group, 60)] == ["metadata.name=a-0", "metadata.name=a-1"]
    assert confirm.faults({**DOMAIN, "kind": "card"}, 60) == [
        {"kind": "card-isolate", "nodes": ["n1"], "card": 0, "ttl_seconds": 60}]
    for domain in (DOMAIN, group, {**DOMAIN, "kind": "card"}, {**DOMAIN, "kind": "rack", "nodes": ["n1", "n2"]}):
        faults = confirm.faults(domain, 60)
        assert len(plan.parse_all(plan.entries(faults, "hunt"))) == len(faults)  # each as the runner reads it
    probes = [a["provider"]["func"] for a in confirm.experiment(DOMAIN, 90, 0.5, "10s")["method"]
              if a["type"] == "probe"]
    for domain in (DOMAIN, group):  # a whole experiment, as the strict runner loads it (no cluster)
        path = tmp_path / f"{domain['kind']}.yaml"
        path.write_text(yaml.safe_dump(confirm.experiment(domain, 90, 0.5, "10s")))
        assert len(run.load(path).faults) == len(confirm.faults(domain, 0))
    assert probes == ["tp_groups_recovered_within", "slo_recovered_within"]


def test_as_predicted_and_not():
    seen = confirm.observed(DOMAIN, journal(["p0", "x0"], "ok", "recovered"))  # x0: another model's
    assert seen["ns/m"]["lost"] == 1 and seen["ns/m"]["back_in_budget"] and seen["ns/m"]["slo_breached"]
    agreed = confirm.compare(DOMAIN, seen, 0)
    assert agreed["agree"] and agreed["summary"].startswith("as predicted: ns/m: lost 1 (predicted 1), all back")
    held = confirm.compare(DOMAIN, confirm.observed(DOMAIN, journal(["p0", "p1"], "failed", "held")), 1)
    assert not held["agree"] and held["models"]["ns/m"]["agree"] == {"lost": False, "for_good": False, "slo": False}
    assert held["summary"].startswith("NOT as predicted")


def test_a_probe_that_could_not_judge_says_neither_held_nor_breached():
    unknown = journal(["p0"], "ok", "held")
    unknown["run"][1]["output"].update(verdict="failed", judgement="unknown", outcome=None)
    seen = confirm.observed(DOMAIN, unknown)
    assert seen["ns/m"]["slo_breached"] is None
    assert "slo" not in confirm.compare(DOMAIN, seen, 1)["models"]["ns/m"]["agree"]
