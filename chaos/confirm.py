"""The hunt's predictions confirmed on a twin: the real fault for one failure domain, run as a
Chaos Toolkit experiment through the strict runner with the catalog's probes, and what it did set
against what was predicted.

    domain            fault(s) on the twin
    node, rack,       node-kubelet-stop and node-out-of-service on every node of it: the machines
    switch, zone      are lost and the loss remediated (non-graceful node shutdown), as the hunt
                      assumes when it places their replicas again
    tp-group          pod-kill of each of the replica's pods
    card              card-isolate of card 0 on the card's node (which card a pod holds is not in
                      the API: the pod that holds card 0 ends, which may be a sibling of the one
                      the domain names; compared per model, that is the same loss)
Per model the domain touches, the experiment's probes are tp_groups_recovered_within (the model
whole again within the budget) and slo_recovered_within (each replica's P95 TTFT against the SLO,
held or breached and back, over the whole budget). Observed:
    lost      the replicas with a pod deleted after the fault (the journal's recovery table)
    for good  the replicas not whole and Ready at the budget (tp_groups_recovered_within failed)
    SLO       breached (the probe's outcome `recovered`, or not back) or held
Guards are lifted on the twin (every limit, min_ready 0, room false, no opt-in): the loss is what
is rehearsed, on a copy.
"""

from __future__ import annotations

from typing import Any

GUARDS = {"max_pods": 100_000, "max_nodes": 100_000, "max_cards": 1_000_000, "min_ready": 0, "room": False,
          "require_opt_in": False}
NODE_KINDS = ("node", "rack", "switch", "zone")


def probe_name(check: str, model: dict[str, Any]) -> str:
    """The experiment's name for a model's probe (`whole`, `slo`), which `observed` reads back."""
    return f"{check}-{model['namespace']}-{model['model']}"


def faults(domain: dict[str, Any], ttl: float) -> list[dict[str, Any]]:
    """The faults that lose `domain` (an entry of the hunt's ranking) on a cluster."""
    if domain["kind"] in NODE_KINDS:
        return [{"kind": kind, "nodes": domain["nodes"], "ttl_seconds": ttl}
                for kind in ("node-kubelet-stop", "node-out-of-service")]
    if domain["kind"] == "tp-group":
        return [{"kind": "pod-kill", "namespace": namespace, "field_selector": f"metadata.name={name}",
                 "grace_seconds": 0}
                for namespace, name in (pod.split("/", 1) for pod in domain["pods"])]
    if domain["kind"] == "card":
        return [{"kind": "card-isolate", "nodes": domain["nodes"], "card": 0, "ttl_seconds": ttl}]
    raise ValueError(f"no fault for a domain of kind {domain['kind']!r}")


def experiment(domain: dict[str, Any], budget: float, slo_seconds: float, window: str) -> dict[str, Any]:
    """A Chaos Toolkit experiment that loses the domain and judges every model it touches."""
    method: list[dict[str, Any]] = [
        {"type": "action", "name": f"lose-{i}", "provider": {"type": "python", "module": "chaos.actions",
                                                            "func": "apply_fault", "arguments": {"fault": fault}}}
        for i, fault in enumerate(faults(domain, budget + 120))]
    # Each model's replicas first (the first probe waits, the others judge the run's record),
    # then each one's SLO over the whole budget (from Prometheus's record).
    for m in domain["models"]:
        method.append({"type": "probe", "name": probe_name("whole", m),
                       "tolerance": {"type": "regex", "target": "verdict", "pattern": "^ok$"},
                       "provider": {"type": "python", "module": "probes.chaostoolkit",
                                    "func": "tp_groups_recovered_within",
                                    "arguments": {"model": m["model"], "namespace": m["namespace"], "budget": budget}}})
    for m in domain["models"]:
        where = {"model": m["model"], "namespace": m["namespace"]}
        method.append({"type": "probe", "name": probe_name("slo", m),
                       "tolerance": {"type": "regex", "target": "verdict", "pattern": "^ok$"},
                       "provider": {"type": "python", "module": "probes.chaostoolkit", "func": "slo_recovered_within",
                                    "arguments": {**where, "budget": budget, "threshold": slo_seconds, "hold": 10,
                                                  "expect_impact": False, "window": window}}})
    return {"title": f"hunt: lose {domain['domain']}",
            "description": f"kilocard hunt's confirmation of {domain['domain']} (predicted {domain['severity']})",
            "tags": ["kilocard", "hunt"],
            "controls": [{"name": "guards", "provider": {"type": "python", "module": "chaos.guards",
                                                         "arguments": GUARDS}}],
            "method": method}


def _probe(journal: dict[str, Any], name: str) -> dict[str, Any]:
    run = next((r for r in journal.get("run") or [] if (r.get("activity") or {}).get("name") == name), None)
    output = (run or {}).get("output")
    return output if isinstance(output, dict) else {"verdict": "not run", "reason": (run or {}).get("exception")}


def observed(domain: dict[str, Any], journal: dict[str, Any]) -> dict[str, Any]:
    """Per model (namespace/model), what the run saw. Which model and replica each pod was is read
    from the journal's placement before the method (the twin starts from the real placement,
    names and all)."""
    section = journal.get("kilocard") or {}
    was = {f"{p['namespace']}/{p['name']}": (p["model"], p["group"])
           for n in (section.get("placement") or {}).get("before") or [] for p in n["pods"]}
    ended = [r["pod"] for r in section.get("recovery") or []]
    out = {}
    for m in domain["models"]:
        name = f"{m['namespace']}/{m['model']}"
        whole, slo = _probe(journal, probe_name("whole", m)), _probe(journal, probe_name("slo", m))
        lost = len({was[key][1] for pod in ended if (key := f"{m['namespace']}/{pod}") in was
                    and was[key][0] == m["model"]})
        # Held, or breached (and back, or not): a probe that could not judge says neither.
        breached = None if slo.get("judgement") == "unknown" or slo.get("verdict") == "not run" else (
            slo.get("outcome") != "held")
        out[name] = {"lost": lost, "back_in_budget": whole.get("verdict") == "ok", "whole": whole.get("reason"),
                     "slo_breached": breached, "slo": slo.get("reason")}
    return out


def compare(domain: dict[str, Any], seen: dict[str, Any], exit_code: int) -> dict[str, Any]:
    """Predicted against observed, model by model, and a line that says it."""
    rows, agree = {}, True
    for m in domain["models"]:
        name = f"{m['namespace']}/{m['model']}"
        o = seen[name]
        predicted_breach = None if m["slo"] in ("unknown", "already") else m["slo"] in ("broken", "lasting")
        checks = {"lost": o["lost"] == m["lost"], "for_good": (m["nowhere"] == 0) == o["back_in_budget"]}
        if predicted_breach is not None and o["slo_breached"] is not None:
            checks["slo"] = predicted_breach == o["slo_breached"]
        rows[name] = {"predicted": {"lost": m["lost"], "for_good": m["nowhere"], "slo": m["slo"]},
                      "observed": o, "agree": checks}
        agree = agree and all(checks.values())
    said = "; ".join(
        f"{name}: lost {r['observed']['lost']} (predicted {r['predicted']['lost']}), "
        f"{'all back' if r['observed']['back_in_budget'] else 'not all back'} "
        f"(predicted {r['predicted']['for_good']} for good), SLO "
        f"{'breached' if r['observed']['slo_breached'] else 'held' if r['observed']['slo_breached'] is False else '?'}"
        f" (predicted {r['predicted']['slo']})" for name, r in rows.items())
    return {"exit": exit_code, "agree": agree, "models": rows,
            "summary": f"{'as predicted' if agree else 'NOT as predicted'}: {said}"}
