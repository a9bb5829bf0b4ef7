"""JSON Schemas (draft 2020-12) of kilocard's experiment input: every fault kind's mapping, the
arguments of the Chaos Toolkit actions and probes (generated from their signatures), and the
arguments of the guards and stop-conditions controls.

`problems(experiment, configuration, secrets)` checks an experiment's kilocard activities and
controls against them, after `${var}` substitution, and says every error at once in plain English.
`python -m chaos.schemas docs` prints docs/experiments.md from the same schemas; `python -m
chaos.schemas json` prints them as one JSON Schema document, for editors.

Each schema is declared beside the code that reads it (a fault kind's module, chaos.landed, ...),
with the builders of chaos.fields, and read through `chaos.fields.read`; this module only
assembles them. A field whose default is None accepts null, read as "not given".
"""

from __future__ import annotations

import inspect
import json
import sys
import typing
from collections.abc import Callable, Iterable, Iterator
from types import ModuleType, NoneType
from typing import Any

import yaml
from chaoslib import substitute

from chaos import actions, faults, guards, stop
from chaos import load as traffic
from chaos.fields import (
    MODEL,
    MODEL_MEANING,
    NAMESPACE,
    Schema,
    boolean,
    bound,
    choice,
    described,
    errors,
    expected,
    mapping,
    one_of,
    optional,
    rule_fields,
    text,
    types_of,
    union,
)
from chaos.vocabulary import DRA_DRIVER
from probes import chaostoolkit, remediation, slo
from probes.verdict import BUDGET_SECONDS, RECOVERED_AFTER_SECONDS, Verdict

DIALECT = "https://json-schema.org/draft/2020-12/schema"

FAULT_KINDS: dict[str, Schema] = {kind: module.SCHEMAS[kind] for kind, module in faults.registry().items()}
FAULT = union("fault", "A kilocard fault: its kind and that kind's fields.", FAULT_KINDS)

# --- controls ---------------------------------------------------------------------------------------
GUARDS, STOP, CONDITIONS = guards.SCHEMA, stop.SCHEMA, stop.CONDITIONS
CONTROLS = {guards.MODULE: GUARDS, stop.MODULE: STOP}

# --- actions and probes: from their signatures --------------------------------------------------------
# Probe arguments: what each means, an example, and what the function itself refuses beyond its type
# (bounds where another value cannot mean anything: no time, a negative one, or nothing named).
_NAMED, _POSITIVE, _NOT_NEGATIVE = {"minLength": 1}, {"exclusiveMinimum": 0}, {"minimum": 0}
_PROBE_ARGUMENTS: dict[str, tuple[str, Any, Schema]] = {
    "model": (MODEL_MEANING, MODEL, _NAMED),
    "models": ("the models whose replicas must be Ready elsewhere", [MODEL],
               {"minItems": 1, "items": {"type": "string", **_NAMED}}),
    "namespace": ("the namespace (default: every namespace)", NAMESPACE, {}),
    "node": ("the node the fault hit", "worker-1", _NAMED),
    "topology_key": ("the node label that names a failure domain", "kubernetes.io/hostname", _NAMED),
    "max_skew": ("replicas one domain may have over another, when anti-affinity is preferred", 1, _NOT_NEGATIVE),
    "guaranteed": ("pass only a required rule (anti-affinity, or a DoNotSchedule spread)", True, {}),
    "budget": ("seconds from time zero (the fault: the probe's description says which)", 120, _POSITIVE),
    "driver": ("the DRA driver whose ResourceSlices carry the device taints", DRA_DRIVER, _NAMED),
    "deadline": ("the old name of budget (an experiment written before it may still say it)", 120, _POSITIVE),
    "hold": ("seconds the state must last: the indicator under the threshold, a straggler slow, every client "
             "request answered, or the traffic spread", 10,
             _NOT_NEGATIVE),
    "ratio": ("how many times its peers' median inter-token latency a straggler's is, at least", 1.3,
              {"exclusiveMinimum": 1}),
    "qps": ("requests per second to serve", 20, _POSITIVE),
    "prompt_tokens": ("prompt tokens per request", 2048, {"minimum": 1}),
    "output_tokens": ("output tokens per request", 256, {"minimum": 1}),
    "latency_seconds": ("seconds a request holds its KV cache", 8, _POSITIVE),
    "headroom": ("share of free KV cache kept spare", 0.25, _NOT_NEGATIVE),
    "losing_nodes": ("nodes assumed lost", ["worker-1"], {"items": {"type": "string", **_NAMED}}),
    "indicator": ("what is measured", "ttft_p95", {"enum": list(slo.INDICATORS)}),
    "threshold": ("the indicator's healthy bound (seconds, or a ratio for error_ratio)", 0.5, _NOT_NEGATIVE),
    "per": ("judge the worst replica, or the model as a whole", "replica", {"enum": ["replica", "model"]}),
    "window": ("the rate window (PromQL duration)", "1m", {"format": "prometheus-duration"}),
    "query": ("the PromQL of indicator promql (else the indicator's own metric)", "sum(rate(x[1m]))", _NAMED),
    "expect_impact": ("the indicator must first breach the threshold (no impact is its own outcome)", True, {}),
    "since": ("time zero's Unix time, when the run has applied no fault and run no action before the probe",
              1700000000.0, _POSITIVE),
    "fault_at": ("the fault's Unix time (default: when the run's last fault was applied, from its ledger)",
                 1700000000.0, _POSITIVE),
    "path": ("how the node is remediated", "quarantine", {"enum": list(remediation.PATHS)}),
    "symptoms": ("an incident's symptoms (kilocard record writes them): tolerance, alerts, replicas, slo",
                 {"tolerance": 15, "alerts": [{"alert": "ReplicaTtftP95High", "labels": {"model_name": MODEL},
                                               "firing_at": 3.0, "resolved_at": 41.0}],
                  "replicas": [{"owner": "llama-3-70b-tp8-5d4f7c9b8", "pod": "llama-3-70b-tp8-5d4f7c9b8-x2x9p",
                                "deleted": 16.0, "scheduled": 16.2, "started": 41.0, "ready": 68.0}]}, {}),
    "expect": ("reproduced: every symptom comes back within its tolerance; fixed: none does, or each within its "
               "budget in `fixed`", "reproduced", {"enum": ["reproduced", "fixed"]}),
    "fixed": ("the fix's budgets: alerts: {name: {resolved_within: s}}, replicas: {started_within: s} or "
              "{ready_within: s}, slo: {model: {recovered_within: s}}",
              {"alerts": {"ReplicaTtftP95High": {"resolved_within": 30}}}, {}),
    "namespaces": ("where the replicas' Events are (default: every namespace)", [NAMESPACE],
                   {"items": {"type": "string", **_NAMED}}),
    "step": ("the ALERTS range query's step, seconds (the rules' evaluation interval)", 1.0, _POSITIVE),
    "first_at": ("the first fault's offset in the timeline: time zero is its apply less this", 0.0, _NOT_NEGATIVE),
    "duration": ("seconds from time zero judged: the probe waits for their end", 60, _POSITIVE),
    "max_window": ("the clients' error window's longest span allowed, seconds (default: any)", 5, _NOT_NEGATIVE),
    "min_requests": ("requests the load must have sent after the error window, at least", 5, {"minimum": 1}),
    "share_window": ("seconds each replica's share of the finished requests is counted over", 10, _POSITIVE),
    "min_share": ("a replica's least share of the finished requests, as a fraction of an even share", 0.5,
                  {"exclusiveMinimum": 0, "maximum": 1}),
    "max_preemptions": ("requests a replica may preempt over the interval", 0, _NOT_NEGATIVE),
    "max_usage": ("a replica's highest KV-cache usage allowed (1: full)", 0.95, {"minimum": 0, "maximum": 1}),
    "min_usage": ("some replica's KV-cache usage must reach it: the load reached the model", 0.3,
                  {"minimum": 0, "maximum": 1}),
}
# What every probe of probes.chaostoolkit returns (probes.verdict's mapping, and `outcome` where it
# has one), and the keys each returns besides (its verdict's details): what a tolerance's `target`
# may name. tests/unit/test_schemas.py holds them to what the pure judges return.
VERDICT_KEYS = (*Verdict(True, "").to_json(), "outcome")
BUDGET_KEYS = (BUDGET_SECONDS, RECOVERED_AFTER_SECONDS)  # every budgeted probe's
_RECOVERY = ("fault_at", "threshold", "hold", *BUDGET_KEYS, "blind_until", "expect_impact", "breach_after",
             "worst", "peak", "impact_seen", "series")
_BUDGETED = (*BUDGET_KEYS, "impact_seen", "observed_from")  # probes.budget.first_within
_TP_GROUPS = ("model", "problems", "groups")
PROBE_KEYS: dict[str, tuple[str, ...]] = {
    "capacity_fits": ("model", "kv_bytes_per_token", "need_bytes", "supply_bytes", "serving_replicas", "headroom"),
    "client_errors_within": ("requests", "failed", "errors", "aborted_streams", "last_failure_seconds",
                             "window_start_seconds", "window_end_seconds", "window_seconds", "in_flight"),
    "devices_tainted_within": (*BUDGET_KEYS, "cards"),
    "image_pulls_failed": ("model", "pulled", "replacements", "failed_pulls"),
    "incident_symptoms": ("expect", "symptoms", "impact_seen"),
    "kv_cache_within": ("replica", "preemptions", "since_seconds", "preempting_replicas", "usage", "at_seconds",
                        "unseen", "first_unseen", "peak_usage", "replicas", "queries"),
    "no_hung_groups": ("model", "namespace", "window", "at", "demand", "settling", "replicas", "hung"),
    "placement_holds": ("model", "crowded", "unguarded", "domains", "skew"),
    "remediated_within": ("node", "left", "unhealthy", "stuck", *_BUDGETED),
    "room_to_reschedule": ("model", "lost_nodes", "pods_to_place", "cards_to_place", "moves", "unplaced",
                           "free_cards", "largest_free_block"),
    "slo_recovered_within": (*_RECOVERY, "indicator", "query", "per"),
    "slo_under": ("value", "threshold", "worst", "values", "silent"),
    "straggler_named_within": ("straggler", "ratio", "slow_since_seconds", "named_after_seconds", "budget_seconds",
                               "slowest", "unseen", "indicator", "query"),
    "tp_groups_recovered_within": (*_TP_GROUPS, "present", "desired", "stuck", *_BUDGETED),
    "tp_groups_whole": _TP_GROUPS,
    "traffic_spread_within": ("replica", "share", "at_seconds", "served", "unseen", "first_unseen",
                              "uneven_until_seconds", "lowest_share", "replicas", "query"),
}
_SKIPPED = ("configuration", "secrets")


def _of_annotation(annotation: Any) -> Schema:
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if annotation is Any:
        return {}
    if origin is typing.Union:
        (inner,) = [a for a in args if a is not NoneType]
        return optional(_of_annotation(inner))
    if origin is list:
        return {"type": "array", "items": _of_annotation(args[0])}
    if origin is dict:
        return {"type": "object", "additionalProperties": _of_annotation(args[1])}
    return {"type": {str: "string", int: "integer", float: "number", bool: "boolean"}[annotation]}


def parameters(func: Callable[..., Any]) -> list[inspect.Parameter]:
    """The arguments an experiment gives `func` (Chaos Toolkit passes configuration and secrets)."""
    return [p for p in inspect.signature(func).parameters.values() if p.name not in _SKIPPED]


def arguments_schema(func: Callable[..., Any], described: dict[str, tuple[str, Any, Schema]],
                     overrides: dict[str, Schema], rules: Iterable[Schema] = ()) -> Schema:
    """The schema of `func`'s arguments, from its signature: types from the annotations, defaults,
    required where there is none; a default None lets null through, as the function does. `rules`
    say what the signature cannot (one of two names); the example gives each rule's first."""
    properties: dict[str, Schema] = {}
    for p in parameters(func):
        found = overrides.get(p.name) or _of_annotation(p.annotation)
        if p.name in described:
            words, _example, extra = described[p.name]
            found = {**({k: v for k, v in found.items() if k != "type"} if "enum" in extra else found), **extra,
                     "description": words}
        if p.default is None:
            found = optional(found)
        elif p.default is not inspect.Parameter.empty:
            found = {**found, "default": p.default}
        properties[p.name] = found
    required = [p.name for p in parameters(func) if p.default is inspect.Parameter.empty]
    named = [*required, *(rule_fields(r)[0] for r in rules), "namespace"]
    example = {n: described[n][1] for n in named if n in properties and n in described}
    return mapping(func.__name__, " ".join((inspect.getdoc(func) or "").split()), properties, required, rules,
                   example=example or None)


def _functions(module: ModuleType) -> dict[str, Callable[..., Any]]:
    return {name: getattr(module, name) for name in module.__all__}


ACTIONS = {name: arguments_schema(func, {}, {"fault": FAULT} if func is actions.apply_fault else {})
           for name, func in _functions(actions).items()}
# A budget once called `deadline` (slo_recovered_within): either name, not both, not neither.
_PROBE_RULES = {"slo_recovered_within": (one_of("budget, or deadline (its old name): one of the two", "budget",
                                                 "deadline"),)}
PROBES = {name: arguments_schema(func, _PROBE_ARGUMENTS, {}, _PROBE_RULES.get(name, ()))
          for name, func in _functions(chaostoolkit).items()}
# The clients' budget may be 0: no failure allowed at all (every other budget is a time to wait).
PROBES["client_errors_within"]["properties"]["budget"] = {
    **{k: v for k, v in PROBES["client_errors_within"]["properties"]["budget"].items() if k != "exclusiveMinimum"},
    **_NOT_NEGATIVE, "description": "seconds from time zero by which the clients' error window has ended (0: no "
                                    "failure allowed)"}
CALLS = {actions.__name__: ACTIONS, chaostoolkit.__name__: PROBES}


# --- the Chaos Toolkit document's shape -------------------------------------------------------------
# What chaoslib reads without checking its type first (an activity as text, a provider as a list,
# the configuration as a list crash it with a traceback): checked before it reads anything. What
# is missing, and the values themselves, stay chaoslib's and the kilocard schemas' to judge.
def _typed(kind: str | list[str], description: str) -> Schema:
    return {"type": kind, "description": description}


_PROVIDER = {
    "type": "object", "description": "a provider", "required": ["type"],
    "properties": {"type": choice(("python", "process", "http"), "the provider's type"),
                   "module": text("the Python module"), "func": text("the function"),
                   "path": text("the program"), "url": text("the URL"),
                   "arguments": _typed(["object", "array", "string", "null"], "the arguments")},
    "allOf": [{"if": {"properties": {"type": {"const": kind}}, "required": ["type"]}, "then": then} for kind, then in (
        ("python", {"required": ["module", "func"],
                    "properties": {"arguments": _typed(["object", "null"], "the function's arguments")}}),
        ("process", {"required": ["path"]}), ("http", {"required": ["url"]}))]}
_ACTIVITY = {
    "type": "object", "description": "an activity", "if": {"required": ["ref"]},
    "then": {"properties": {"ref": text("the name of an activity declared before")}},
    "else": {"required": ["type", "name", "provider"], "properties": {
        "type": choice(("action", "probe"), "the activity's type"), "name": text("the activity's name"),
        "provider": _PROVIDER, "background": boolean("run beside the next activities", False),
        "controls": {"type": "array", "items": _typed("object", "a control"), "description": "controls"}}}}
_ACTIVITIES = {"type": "array", "items": _ACTIVITY, "description": "activities"}
_CONTROL = {"type": "object", "description": "a control", "required": ["name", "provider"],
            "properties": {"name": text("the control's name"), "provider": {
                "type": "object", "description": "a control's provider", "required": ["type", "module"],
                "properties": {"type": {"const": "python"}, "module": text("the control's Python module"),
                               "arguments": _typed(["object", "null"], "the control's arguments")}}}}
ENVELOPE = {
    "type": "object", "description": "a Chaos Toolkit experiment",
    "properties": {
        "title": text("the experiment's title"), "description": _typed("string", "what it rehearses"),
        "tags": {"type": "array", "items": _typed("string", "a tag"), "description": "tags"},
        "configuration": _typed("object", "configuration values"),
        "secrets": {**_typed("object", "secrets, by scope"), "additionalProperties": _typed("object", "a scope's")},
        "contributions": _typed("object", "contributions"), "runtime": _typed("object", "runtime settings"),
        "extensions": {"type": "array", "items": {"type": "object", "required": ["name"], "description":
                                                  "an extension", "properties": {"name": text("its name")}},
                       "description": "extensions"},
        "controls": {"type": "array", "items": _CONTROL, "description": "controls"},
        "steady-state-hypothesis": {"type": "object", "description": "a steady-state hypothesis",
                                    "properties": {"title": text("its title"), "probes": _ACTIVITIES}},
        "method": _ACTIVITIES, "rollbacks": _ACTIVITIES}}


def shape(experiment: Any) -> list[str]:
    """What is wrong with the document's shape (every problem, each with its path), before
    chaoslib reads it."""
    return errors(ENVELOPE, experiment)


def _target(item: dict[str, Any], func: str) -> list[str]:
    """A tolerance's `target` must name a key the probe returns: chaoslib falls back to the whole
    output, and a regex over a mapping raises."""
    tolerance = item.get("tolerance")
    target = tolerance.get("target") if isinstance(tolerance, dict) else None
    keys = (*VERDICT_KEYS, *PROBE_KEYS[func])
    if not isinstance(target, str) or not target or target in keys:
        return []
    return [f"tolerance.target: expected a key {func} returns: one of {', '.join(keys)}, got {target!r}"]


def _places(experiment: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    hypothesis = experiment.get("steady-state-hypothesis")
    sections = (("steady-state-hypothesis.probes", hypothesis.get("probes") if isinstance(hypothesis, dict) else None),
                ("method", experiment.get("method")), ("rollbacks", experiment.get("rollbacks")),
                ("controls", experiment.get("controls")))
    for section, items in sections:
        for i, item in enumerate(items if isinstance(items, list) else []):
            if isinstance(item, dict) and isinstance(item.get("provider"), dict):
                yield f"{section}[{i}]", item


def problems(experiment: dict[str, Any], configuration: dict[str, Any] | None = None,
             secrets: dict[str, Any] | None = None, texts: dict[str, str] | None = None) -> list[str]:
    """Every error in the arguments of an experiment's kilocard activities (python providers of
    chaos.actions and probes.chaostoolkit) and controls (chaos.guards, chaos.stop), after `${var}`
    substitution, and in the `target` of a kilocard probe's tolerance:
    `"{where} ('{name}'): {field}: expected {what}, got {value!r}"`, in file order. `texts` (text
    value -> the untyped --var that gave it) names the --var behind a number given as text.
    Providers of other modules, and functions those modules do not export, are Chaos Toolkit's to judge."""
    found: list[str] = []
    for where, item in _places(experiment):
        provider = item["provider"]
        module, func = provider.get("module"), provider.get("func")
        if provider.get("type") != "python" or not isinstance(module, str) or not isinstance(func, str | None):
            continue
        schema = CONTROLS.get(module) if where.startswith("controls") else CALLS.get(module, {}).get(func or "")
        if schema is None:
            continue
        raw = provider.get("arguments")
        arguments = substitute(raw, configuration or {}, secrets or {}) if isinstance(raw, dict) else raw
        arguments = {} if arguments is None else arguments
        named = f"{where} ({item['name']!r})" if item.get("name") else where
        said = errors(schema, arguments, texts=texts)
        if not said and module == actions.__name__ and func != actions.apply_fault.__name__:
            said = [m for fault in actions.faults_of(getattr(actions, str(func)), arguments)
                    for m in errors(FAULT, fault, "fault", texts)]
        if module == chaostoolkit.__name__:
            said += _target(item, str(func))
        found += [f"{named}: {m}" for m in said]
    return found


# --- the reference and the JSON document ------------------------------------------------------------
def _type_name(schema: Schema) -> str:
    kind = (types_of(schema) or ["any"])[0]
    if ("const" in schema or "enum" in schema) and kind == "any":
        return "string"
    if kind == "array":
        return f"list of {_type_name(schema.get('items', {}))}s"
    if kind == "object" and "kind" in schema.get("properties", {}):
        return str(schema["title"])
    return {"object": "mapping", "any": "any"}.get(kind, kind)


def _literal(value: Any) -> str:
    return f"`{value}`" if isinstance(value, str) else f"`{json.dumps(value)}`"


def _constraint(schema: Schema) -> str:
    if "const" in schema:
        return _literal(schema["const"])
    if "enum" in schema:
        return "one of " + ", ".join(map(_literal, schema["enum"]))
    kind = (types_of(schema) or [""])[0]
    if kind == "string" and ("format" in schema or "pattern" in schema):
        return expected(schema).removeprefix("a ").removeprefix("an ").replace("|", "\\|")
    if kind in ("integer", "number"):
        return bound(schema, str if kind == "integer" else lambda x: f"{x:g}").strip()
    items = schema.get("items")
    parts = ["non-empty" if schema.get("minLength") or schema.get("minItems") or schema.get("minProperties") else "",
             f"each {_constraint(items)}" if items and _constraint(items) else "",
             "none twice" if schema.get("uniqueItems") else ""]
    return ", ".join(p for p in parts if p)


def _rows(schema: Schema, prefix: str = "") -> Iterator[str]:
    for name, s in schema["properties"].items():
        default = "required" if name in schema.get("required", []) else (
            _literal(s["default"]) if "default" in s else "—")
        yield (f"| `{prefix}{name}` | {_type_name(s)} | {default} | {_constraint(s)} | "
               f"{s.get('description', '')} |")
        if "properties" in s and s["properties"]:
            yield from _rows(s, f"{prefix}{name}.")


def _table(schema: Schema) -> str:
    rules = [f"- {', '.join(f'`{n}`' for n in rule_fields(r))}: {r['description']}"
             for r in schema.get("allOf", []) if "description" in r]
    lines = ["| Field | Type | Default | Constraint | Description |", "| --- | --- | --- | --- | --- |",
             *_rows(schema)]
    return "\n".join(lines) + ("\n\nAcross fields:\n\n" + "\n".join(rules) if rules else "")


def _yaml(value: Any) -> str:
    return "```yaml\n" + yaml.safe_dump(value, sort_keys=False, default_flow_style=False, width=100) + "```"


def _activity(kind: str, name: str, module: str, func: str, arguments: dict[str, Any]) -> list[dict[str, Any]]:
    activity: dict[str, Any] = {"type": kind, "name": name}
    if kind == "probe":
        activity["tolerance"] = {"type": "regex", "target": "verdict", "pattern": "^ok$"}
    return [{**activity, "provider": {"type": "python", "module": module, "func": func, "arguments": arguments}}]


def _control(name: str, module: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"controls": [{"name": name, "provider": {"type": "python", "module": module, "arguments": arguments}}]}


# chaos.run reads and checks the extension (run._expectation); this is its description.
EXPECT = mapping(
    "expect", "The verdict an experiment declares as its finding, in its `kilocard` extension. Met, the run "
    "exits 0 and the journal keeps the real verdict; not met, it exits 1 naming both. Invalid input (2) and an "
    "incomplete revert (4) are never expected.",
    {"exit": described({"type": "integer", "enum": [0, 1, 3]},
                    "the expected exit: 0 passed, 1 failed, 3 aborted by a stop condition", None, None),
     "reason": text("how the verdict's reason starts, e.g. the probe that must fail")},
    required=["exit"], example={"exit": 1, "reason": "probe 'replicas-kept-apart' failed: "})


LOAD = traffic.SCHEMA


def _section(level: str, title: str, schema: Schema, example: Any) -> str:
    return f"{level} {title}\n\n{schema['description']}\n\n{_table(schema)}\n\n{_yaml(example)}\n"


def docs() -> str:
    """The Markdown of docs/experiments.md."""
    out = ["# Experiment reference\n",
           "Generated from `chaos/schemas.py` by `python -m chaos.schemas docs > docs/experiments.md`; do not "
           "edit by hand. The same schemas check every kilocard activity and control of an experiment (after "
           "`${var}` substitution) and report all the errors of a file at once; `python -m chaos.schemas json` "
           "prints them as one JSON Schema document (draft 2020-12) for editors.\n",
           "A field left out takes its default; `null` is the same as leaving out a field whose default is —.\n",
           "## Fault kinds\n",
           "A fault is applied by the action `apply_fault`, its `fault` argument being one of these mappings, "
           "or by one of the thin actions below. Each expires where it lives after `ttl_seconds` (pod kills have "
           "nothing to revert), and every fault of a run is reverted at its end.\n"]
    for kind, schema in FAULT_KINDS.items():
        example = _activity("action", kind, actions.__name__, "apply_fault", {"fault": schema["examples"][0]})
        out.append(_section("###", kind, schema, {"method": example}))
    out += ["## Actions\n", f"Python provider module `{actions.__name__}`. Each applies one fault (checked as "
            "its kind above) and records it in the run's ledger; `revert_faults` is the rollback.\n",
            "| Function | Arguments | Description |", "| --- | --- | --- |"]
    out += [f"| `{name}` | {_arguments(s)} | {s['description']} |"
            for name, s in ACTIONS.items()]
    out += ["", "## Probes\n", f"Python provider module `{chaostoolkit.__name__}`. Each returns a verdict "
            "mapping; the tolerance `{type: regex, target: verdict, pattern: \"^ok$\"}` passes an `ok`. Every "
            "probe returns " + ", ".join(f"`{k}`" for k in VERDICT_KEYS[:-1]) + " and may return "
            f"`{VERDICT_KEYS[-1]}`; what else each returns is listed under it. A tolerance's `target` must name "
            "one of these keys.\n"]
    for name, schema in PROBES.items():
        example = _activity("probe", name.replace("_", "-"), chaostoolkit.__name__, name, schema["examples"][0])
        returns = f" Returns besides: {', '.join(f'`{k}`' for k in PROBE_KEYS[name])}."
        out.append(_section("###", name, {**schema, "description": schema["description"] + returns},
                            {"steady-state-hypothesis": {"probes": example}}))
    out += ["## Guards\n"]
    out.append(_section("###", guards.MODULE, GUARDS, _control("guards", guards.MODULE, GUARDS["examples"][0])))
    out += ["## Stop conditions\n"]
    out.append(_section("###", stop.MODULE, STOP, _control("stop-conditions", stop.MODULE, STOP["examples"][0])))
    for kind, schema in CONDITIONS.items():
        example = _control("stop-conditions", stop.MODULE, {"conditions": schema["examples"]})
        out.append(_section("####", kind, schema, example))
    out += ["## Expected verdict\n"]
    out.append(_section("###", "extensions: kilocard", EXPECT,
                        {"extensions": [{"name": "kilocard", "expect": EXPECT["examples"][0]}]}))
    out += ["## Built-in load\n"]
    out.append(_section("###", "extensions: kilocard load", LOAD,
                        {"extensions": [{"name": "kilocard", "load": LOAD["examples"][0]}]}))
    return "\n".join(out)


def _arguments(schema: Schema) -> str:
    given = [f"`{n}`" for n in schema["required"]]
    optional = [f"`{n}`" + (f"={_literal(s['default'])[1:-1]}" if "default" in s else "")
                for n, s in schema["properties"].items() if n not in schema["required"]]
    return ", ".join(given) + ("; optional: " if given and optional else "optional: " if optional else "") + \
        ", ".join(optional)


def document() -> Schema:
    """Every schema as one JSON Schema document: an experiment whose kilocard activities and controls
    are checked by module and function (a fault kind's schema is written out once, under $defs)."""
    def then(schema: Schema, ref: str) -> Schema:
        return {"then": {"properties": {"provider": {"properties": {"arguments": {"$ref": ref}}}}}, **schema}

    def calls(section: str, module: str, funcs: Iterable[str]) -> list[Schema]:
        return [then({"if": {"properties": {"provider": {"properties": {"module": {"const": module},
                                                                        "func": {"const": f}},
                                                         "required": ["module", "func"]}}, "required": ["provider"]}},
                     f"#/$defs/{section}/{f}") for f in funcs]

    activity = {"allOf": [*calls("actions", actions.__name__, ACTIONS),
                          *calls("probes", chaostoolkit.__name__, PROBES)]}
    control = {"allOf": [then({"if": {"properties": {"provider": {"properties": {"module": {"const": m}},
                                                                  "required": ["module"]}}, "required": ["provider"]}},
                              f"#/$defs/controls/{m}") for m in CONTROLS]}
    fault = {**FAULT, "allOf": [{**rule, "then": {"$ref": f"#/$defs/faults/{kind}"}}
                                for kind, rule in zip(FAULT_KINDS, FAULT["allOf"], strict=True)]}
    apply = ACTIONS[actions.apply_fault.__name__]
    calls_ = {**ACTIONS, apply["title"]: {**apply, "properties": {"fault": {"$ref": "#/$defs/fault"}}}}
    return {"$schema": DIALECT, "title": "kilocard experiment input",
            "description": "The arguments of kilocard's activities and controls in a Chaos Toolkit experiment.",
            "type": "object",
            "properties": {"steady-state-hypothesis": {"type": "object", "properties": {
                               "probes": {"type": "array", "items": activity}}},
                           "method": {"type": "array", "items": activity},
                           "rollbacks": {"type": "array", "items": activity},
                           "controls": {"type": "array", "items": control}},
            "$defs": {"faults": FAULT_KINDS, "fault": fault, "actions": calls_, "probes": PROBES,
                      "controls": CONTROLS}}


def main(argv: list[str]) -> int:
    if argv == ["docs"]:
        sys.stdout.write(docs())
    elif argv == ["json"]:
        sys.stdout.write(json.dumps(document(), indent=2) + "\n")
    else:
        sys.stderr.write("usage: python -m chaos.schemas docs|json\n")
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
