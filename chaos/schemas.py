"""JSON Schemas (draft 2020-12) of kilocard's experiment input: every fault kind's mapping, the
arguments of the Chaos Toolkit actions and probes (generated from their signatures), and the
arguments of the guards and stop-conditions controls.

`problems(experiment, configuration, secrets)` checks an experiment's kilocard activities and
controls against them, after `${var}` substitution, and says every error at once in plain English.
`python -m chaos.schemas docs` prints docs/experiments.md from the same schemas; `python -m
chaos.schemas json` prints them as one JSON Schema document, for editors.

The fault parsers (chaos.faults) stay the authority at run time: tests/unit/test_schemas.py proves
that each schema and its parser accept and refuse the same input. A field whose parser default is
None accepts null, as the parser does (it reads null as "not given").
"""

from __future__ import annotations

import inspect
import ipaddress
import json
import math
import sys
import typing
from collections.abc import Callable, Iterable, Iterator
from types import ModuleType, NoneType
from typing import Any

import yaml
from chaoslib import substitute
from jsonschema import Draft202012Validator, FormatChecker, ValidationError, validators

from chaos import actions, guards, landed, mindx, stop
from chaos import load as traffic
from chaos.agent import kinds as agent_kinds
from chaos.agent import schema as agent_schema
from chaos.agent.kinds import rank_stall as rank_stall_kind
from chaos.agent.protocol import MAX_TTL_SECONDS
from chaos.faults._spec import MAX_CARD, selector_problem
from chaos.vocabulary import LOCAL_TESTBED_OPENAI
from probes import chaostoolkit, remediation, slo
from probes.verdict import BUDGET_SECONDS, RECOVERED_AFTER_SECONDS, Verdict

Schema = dict[str, Any]
DIALECT = "https://json-schema.org/draft/2020-12/schema"

# --- validation: JSON's types as the parsers read them ---------------------------------------------
_TYPES = Draft202012Validator.TYPE_CHECKER.redefine_many({
    "integer": lambda _c, v: isinstance(v, int) and not isinstance(v, bool),  # 1.0 is not an integer
    "number": lambda _c, v: isinstance(v, int | float) and not isinstance(v, bool) and not math.isnan(v),
})
Validator = validators.extend(Draft202012Validator, type_checker=_TYPES)
FORMATS = FormatChecker(formats=())


@FORMATS.checks("label-selector")
def _is_selector(value: object) -> bool:
    return not isinstance(value, str) or selector_problem(value) is None


@FORMATS.checks("cidr", raises=ValueError)
def _is_cidr(value: object) -> bool:
    return not isinstance(value, str) or ipaddress.ip_network(value, strict=False) is not None


@FORMATS.checks("prometheus-duration", raises=slo.SloError)
def _is_duration(value: object) -> bool:
    """probes.slo reads every window; a zero window has no rate."""
    return not isinstance(value, str) or slo.seconds(value) > 0


# What a format or pattern asks for, in words.
_FORMAT_WORDS = {"label-selector": "a label selector like 'a=b,c!=d,e in (f,g),!h'", "cidr": "a CIDR like 10.0.0.0/8",
                 "prometheus-duration": "a Prometheus duration above 0 like 30s, 1m or 1m30s"}
_INTERFACE, _NETNS, _CARD_PATTERN = r"^[A-Za-z0-9_.:-]{1,15}$", r"^[A-Za-z0-9_.-]{1,64}$", r"\{card\}"
_API_ROOT = r"^(?!.*/v1/?$)https?://[^/?#]+(/[^?#]*)?$"
_PATTERN_WORDS = {_INTERFACE: "an interface name (up to 15 letters, digits or _.:-)",
                  _NETNS: "a network namespace name (up to 64 letters, digits or _.-)",
                  _CARD_PATTERN: "a pattern containing {card}",
                  _API_ROOT: "an http:// or https:// URL of the API's root (without /v1)"}


# --- building blocks ------------------------------------------------------------------------------
def _field(schema: Schema, description: str, default: Any, example: Any) -> Schema:
    found = {**schema, "description": description}
    if default is not None:
        found["default"] = default
    if example is not None:
        found["examples"] = [example]
    return found


def text(description: str, default: str | None = None, example: str | None = None) -> Schema:
    return _field({"type": "string", "minLength": 1}, description, default, example)


def selector(description: str, example: str) -> Schema:
    return _field({"type": "string", "minLength": 1, "format": "label-selector"}, description, None, example)


def choice(choices: Iterable[str], description: str, default: str | None = None) -> Schema:
    return _field({"enum": list(choices)}, description, default, None)


def integer(low: int, high: int, description: str, default: int | None = None, example: int | None = None) -> Schema:
    return _field({"type": "integer", "minimum": low, "maximum": high}, description, default, example)


def number(low: float, high: float, description: str, default: float | None = None, example: float | None = None,
           above: bool = False) -> Schema:
    bounds: Schema = {"exclusiveMinimum" if above else "minimum": low}
    if high != math.inf:
        bounds["maximum"] = high
    return _field({"type": "number", **bounds}, description, default, example)


def duration(description: str, default: str | None = None, example: str | None = None) -> Schema:
    return _field({"type": "string", "format": "prometheus-duration"}, description, default, example)


def boolean(description: str, default: bool) -> Schema:
    return {"type": "boolean", "description": description, "default": default}


def strings(description: str, example: list[str], items: Schema | None = None) -> Schema:
    return _field({"type": "array", "minItems": 1, "items": items or {"type": "string", "minLength": 1}},
                  description, None, example)


def optional(schema: Schema) -> Schema:
    """The default is None: null reads as not given (an Optional annotation says so already)."""
    types = schema.get("type")
    if types is None or types == "null" or (isinstance(types, list) and "null" in types):
        return schema
    return {**schema, "type": [*types, "null"] if isinstance(types, list) else [types, "null"]}


def mapping(title: str, description: str, properties: dict[str, Schema], required: Iterable[str] = (),
            rules: Iterable[Schema] = (), example: Any = None) -> Schema:
    found: Schema = {"title": title, "description": description, "type": "object", "properties": properties,
                     "required": list(required), "additionalProperties": False}
    if rules:
        found["allOf"] = list(rules)
    if example is not None:
        found["examples"] = [example]
    return found


def _given(*names: str) -> Schema:
    return {"required": list(names), "properties": {n: {"not": {"type": "null"}} for n in names}}


def one_of(description: str, *names: str) -> Schema:
    return {"description": description, "oneOf": [_given(n) for n in names]}


def any_of(description: str, *names: str) -> Schema:
    return {"description": description, "anyOf": [_given(n) for n in names]}


def not_both(description: str, first: str, second: str) -> Schema:
    return {"description": description, "not": _given(first, second)}


def union(title: str, description: str, members: dict[str, Schema]) -> Schema:
    """A mapping whose `kind` says which member schema it is."""
    return {"title": title, "description": description, "type": "object", "required": ["kind"],
            "properties": {"kind": choice(members, f"the {title}'s kind")},
            "allOf": [{"if": {"type": "object", "properties": {"kind": {"const": k}}, "required": ["kind"]}, "then": s}
                      for k, s in members.items()]}


# --- fault kinds ----------------------------------------------------------------------------------
NAMESPACE = "kilocard-fleet"
MODEL = "llama-3-70b"
_COUNT = optional(integer(1, 100_000, "how many to pick at random (default: one of what a selector matches, "
                                      "'percent: 100' for all; every node named in 'nodes')", example=1))
_PERCENT = optional(number(0, 100, "what share to pick at random, in percent", example=50, above=True))
_SEED = optional(integer(0, 2**62, "seed of the random pick, for a repeatable run", example=7))
_ALLOW_EMPTY = boolean("accept selectors that match nothing (else the plan refuses)", False)
_TTL = number(0, MAX_TTL_SECONDS, "seconds until the fault expires where it lives (every fault does)",
              example=300, above=True)
_EFFECT = choice(("NoSchedule", "NoExecute"), "taint effect: NoExecute also evicts what does not tolerate it",
                 "NoSchedule")
_NOT_BOTH = not_both("give either count or percent, not both", "count", "percent")

_PODS = {
    "namespace": optional(text("the pods' namespace (default: every namespace)", example=NAMESPACE)),
    "label_selector": optional(selector("which pods", f"kilocard.io/model={MODEL}")),
    "field_selector": optional(text("a field selector on the pods", example="spec.nodeName=worker-1")),
    "count": _COUNT, "percent": _PERCENT,
    "mode": choice(("delete", "evict"), "DELETE, or the Eviction API (honours PodDisruptionBudgets)", "delete"),
    "grace_seconds": optional(integer(0, 3600, "termination grace period (default: the pod's own)", example=0)),
    "seed": _SEED,
    "eviction_deadline_seconds": number(0, 3600, "how long an eviction a PodDisruptionBudget blocks is retried",
                                        60.0),
    "allow_empty": _ALLOW_EMPTY,
}
_PODS_RULES = (any_of("a selector (or a namespace): refusing to pick from every pod", "label_selector", "namespace"),
               _NOT_BOTH)
_NODES = {
    "nodes": optional(strings("node names", ["worker-1"])),
    "node_selector": optional(selector("a label selector of nodes", "kilocard.io/pool=gpu")),
    "nodes_of": optional(mapping("nodes_of", "the nodes the pods matching label_selector (in namespace) run on", {
        "namespace": optional(text("the pods' namespace (default: every namespace)", example=NAMESPACE)),
        "label_selector": selector("which pods", "kilocard.io/tp-group=g0,apps.kubernetes.io/pod-index=1"),
    }, ["label_selector"], example={"namespace": NAMESPACE, "label_selector": "kilocard.io/tp-group=g0"})),
    "count": _COUNT, "percent": _PERCENT, "seed": _SEED,
}
_NODES_RULES = (one_of("one of: a list of node names, a node_selector, or nodes_of {namespace, label_selector}",
                       "nodes", "node_selector", "nodes_of"), _NOT_BOTH)
_CARDS = _field({"type": "array", "minItems": 1, "uniqueItems": True, "items": {"type": "integer", "minimum": 0,
                                                                                  "maximum": MAX_CARD}},
                "card indices on each node, each listed once", None, [0, 1])
_CARD = integer(0, MAX_CARD, "one card index on each node", example=0)
_CARD_RULE = one_of("a card index, or a list of them as 'cards' (one of the two)", "card", "cards")
_VERIFY = mapping(landed.FIELD, "how the fault's effect is read back once applied (chaos.landed): confirmed, mismatch "
                  "or inconclusive per target; a mismatch fails the fault", {
                      "within_seconds": number(0, landed.MAX_WITHIN_SECONDS, "how long the read-back may take to "
                                               "confirm (effects take a moment to show)",
                                               landed.DEFAULT_WITHIN_SECONDS),
                      "allow_mismatch": boolean("a mismatch is reported, not failed", False)},
                  example={"within_seconds": 30})


def _kind(kind: str, description: str, properties: dict[str, Schema], required: Iterable[str],
          rules: Iterable[Schema], example: dict[str, Any]) -> Schema:
    return mapping(kind, description, {"kind": {"const": kind, "description": "the fault kind"}, **properties,
                                       landed.FIELD: _VERIFY}, ["kind", *required], rules, {"kind": kind, **example})


def _agent_kind(fault: str, module: ModuleType) -> Schema:
    declared: dict[str, agent_schema.Param] = module.PARAMS
    properties = {name: p.schema() for name, p in declared.items()}
    required = [name for name, p in declared.items() if p.required]
    # A parameter needed once another is a non-empty list (the ports' protocol).
    rules = [{"if": {"properties": {p.needed_by: {"minItems": 1}}, "required": [p.needed_by]},
              "then": {"required": [name], "properties": {name: properties[name]}}}
             for name, p in declared.items() if p.needed_by]
    example = module.EXAMPLE
    params = _field({**mapping("params", "", properties, required, rules), "default": {}},
                    f"parameters of {module.NAME}" + ("" if properties else " (it takes none)"), None,
                    example or None)
    target: dict[str, Schema] = {}
    rule: list[Schema] = []
    sample: dict[str, Any] = {"nodes": ["worker-1"]}
    if module.TARGET == "card":
        target = {"card": _CARD, "cards": _CARDS}
        rule = [_CARD_RULE]
        sample["cards"] = [0]
    elif module.TARGET == "node":
        target = {"interface": optional(_field({"type": "string", "pattern": _INTERFACE}, "the interface "
                                               "(default: the node's own)", None, "eth0")),
                  "netns": optional(_field({"type": "string", "pattern": _NETNS}, "a network namespace on the "
                                           "node (a pod's) instead of the node's own", None, "cni-1234"))}
    return _kind(fault, module.DESCRIPTION, {**_NODES, **target, "params": params, "ttl_seconds": _TTL,
                                              "allow_empty": _ALLOW_EMPTY},
                 ["ttl_seconds", *(["params"] if required else [])], [*_NODES_RULES, *rule],
                 {**sample, **({"params": example} if example else {}), "ttl_seconds": 300})


FAULT_KINDS: dict[str, Schema] = {
    "pod-kill": _kind("pod-kill", "Kill pods picked by selectors, by DELETE or through the Eviction API. Nothing "
                      "to revert: the workload's controller brings replacements.", _PODS, [], _PODS_RULES,
                      {"namespace": NAMESPACE, "label_selector": f"kilocard.io/model={MODEL}", "count": 1}),
    "tp-group-kill": _kind("tp-group-kill", "Kill every pod of whole tensor-parallel groups (kilocard.io/tp-group "
                           "or LeaderWorkerSet's group-key).", _PODS, [], _PODS_RULES,
                           {"namespace": NAMESPACE, "label_selector": f"kilocard.io/model={MODEL}", "count": 1}),
    "rank-kill": _kind("rank-kill", "Kill only the member of the given rank in each chosen tensor-parallel group, "
                       "which stalls the whole group.",
                       {**_PODS, "rank": integer(0, 2**31, "the rank killed in each group", example=1)}, ["rank"],
                       _PODS_RULES, {"namespace": NAMESPACE, "label_selector": f"kilocard.io/model={MODEL}",
                                     "rank": 1, "count": 1}),
    "rank-stall": _kind(
        "rank-stall", "Freeze the engine process of one rank in each chosen tensor-parallel group through the node "
        "agent (its cgroup's freezer, or SIGSTOP), for ttl_seconds: every pod stays Ready while the group serves "
        "nothing.",
        {"namespace": _PODS["namespace"], "label_selector": _PODS["label_selector"], "count": _COUNT,
         "percent": _PERCENT, "seed": _SEED,
         "rank": integer(0, 2**31, "the rank stalled in each group", 0),
         "container": optional(text("the engine container (default: the one requesting cards, else the first)",
                                    example="engine")),
         "method": choice(rank_stall_kind.METHODS, "the cgroup freezer (v2 cgroup.freeze, else v1 freezer.state), "
                          "or SIGSTOP to every process of the container", "freeze"),
         "ttl_seconds": _TTL, "allow_empty": _ALLOW_EMPTY},
        ["ttl_seconds"], _PODS_RULES, {"namespace": NAMESPACE, "label_selector": f"kilocard.io/model={MODEL}",
                                       "rank": 3, "ttl_seconds": 60}),
    "node-isolate": _kind("node-isolate", "Cordon nodes and taint them kilocard.io/isolated (NoSchedule, or "
                          "NoExecute, which evicts), optionally draining them through the Eviction API.",
                          {**_NODES, "effect": _EFFECT,
                           "drain": boolean("evict the node's pods (not DaemonSets' nor static pods)", False),
                           "eviction_deadline_seconds": _PODS["eviction_deadline_seconds"],
                           "ttl_seconds": _TTL, "allow_empty": _ALLOW_EMPTY},
                          ["ttl_seconds"], _NODES_RULES, {"nodes": ["worker-1"], "ttl_seconds": 300}),
    "node-out-of-service": _kind("node-out-of-service", "Taint nodes node.kubernetes.io/out-of-service (Kubernetes' "
                                 "non-graceful node shutdown): PodGC force-deletes the pods stuck Terminating there.",
                                 {**_NODES, "ttl_seconds": _TTL, "allow_empty": _ALLOW_EMPTY}, ["ttl_seconds"],
                                 _NODES_RULES, {"nodes_of": {"namespace": NAMESPACE, "label_selector":
                                                             "kilocard.io/tp-group=g0"}, "ttl_seconds": 600}),
    "network-policy-partition": _kind(
        "network-policy-partition", "Cut pods off the network with a NetworkPolicy that allows no ingress and no "
        "egress (or only to and from allow_cidrs); the CNI enforces it, no agent needed.",
        {"namespace": text("the pods' namespace", example=NAMESPACE),
         "pod_selector": _field({"type": "object", "minProperties": 1, "propertyNames": {"type": "string"},
                                 "additionalProperties": {"type": "string"}},
                                "label: value pairs the pods carry (never empty: that would be the whole namespace)",
                                None, {"kilocard.io/model": MODEL}),
         "directions": _field(strings("", ["ingress"], {"enum": ["ingress", "egress"]}), "the directions cut",
                              ["ingress", "egress"], ["ingress"]),
         "allow_cidrs": strings("destinations still allowed", ["10.0.0.0/8"],
                                {"type": "string", "minLength": 1, "format": "cidr"}),
         "ttl_seconds": _TTL},
        ["namespace", "pod_selector", "ttl_seconds"], [],
        {"namespace": NAMESPACE, "pod_selector": {"kilocard.io/model": MODEL}, "ttl_seconds": 300}),
    "dra-card-isolate": _kind(
        "dra-card-isolate", "Isolate cards the cluster allocates with Dynamic Resource Allocation: one "
        "DeviceTaintRule per card (NoExecute also evicts the pods whose claims hold it).",
        {**_NODES, "cards": _CARDS,
         "device_name": _field({"type": "string", "minLength": 1, "pattern": _CARD_PATTERN},
                               "the device's name in its pool, {card} standing for the index", "gpu-{card}", None),
         "driver": text("the DRA driver", "gpu.nvidia.com"), "effect": _EFFECT,
         "ttl_seconds": _TTL, "allow_empty": _ALLOW_EMPTY},
        ["cards", "ttl_seconds"], _NODES_RULES, {"nodes": ["worker-1"], "cards": [0], "ttl_seconds": 300}),
    "npu-isolate": _kind(
        "npu-isolate", "Isolate Ascend NPU chips as MindX DL does: their names join ManuallySeparateNPU in the "
        "node's device-info ConfigMap; the device plugin reports them Unhealthy (allocatable drops), evicting nothing.",
        {**_NODES, "card": _CARD, "cards": _CARDS, "ttl_seconds": _TTL, "allow_empty": _ALLOW_EMPTY},
        ["ttl_seconds"], [*_NODES_RULES, _CARD_RULE], {"nodes": ["worker-1"], "cards": [3], "ttl_seconds": 300}),
    "npu-fault": _kind(
        "npu-fault", "A fault code on Ascend NPU chips: through ClusterD's public fault API where ClusterD runs "
        "(a ConfigMap, no agent), else through the node agent.",
        {**_NODES, "card": _CARD, "cards": _CARDS,
         "via": choice(("auto", "clusterd", "agent"), "the path: ClusterD where its Service exists (auto), or "
                       "always one of the two", "auto"),
         "fault_type": choice(("NPU", "Network"), "the chip itself, or its parameter-plane network", "NPU"),
         "code": optional(text("the fault code: ClusterD's 9 digits (default 220001001), or the device plugin's "
                               "hex through the agent (default 80E18402)", example="220001001")),
         "level": _field({"enum": [*mindx.LEVELS, None]}, "through the agent: the device plugin's handling level",
                         "SeparateNPU", None),
         "speed": optional(agent_schema.SPEED.schema()),
         "namespace": optional(text("through ClusterD: the public fault ConfigMap's namespace",
                                    mindx.CLUSTERD_NAMESPACE)),
         "reporter": optional(text("through ClusterD: the public fault's resource, who reports it (one ClusterD "
                                   "lists)", mindx.PUBLIC_REPORTERS[0])),
         "allow_unlisted": boolean("through ClusterD: send a code or reporter its default configuration does not "
                                   "list", False),
         "ttl_seconds": _TTL, "allow_empty": _ALLOW_EMPTY},
        ["ttl_seconds"], [*_NODES_RULES, _CARD_RULE], {"nodes": ["worker-1"], "card": 3, "ttl_seconds": 300}),
    **{fault: _agent_kind(fault, module) for fault, module in sorted(agent_kinds.BY_FAULT.items())},
}
FAULT = union("fault", "A kilocard fault: its kind and that kind's fields.", FAULT_KINDS)

# --- controls -------------------------------------------------------------------------------------
_LIMITS = guards.Limits()
GUARDS = mapping(guards.MODULE, "Limits the run may not pass, checked against the resolved plan and the cluster "
                 "before anything is applied (and, declared, before each kilocard action).", {
                     "max_pods": integer(0, 100_000, "pods the run may disrupt", _LIMITS.max_pods),
                     "max_nodes": integer(0, 100_000, "nodes the run may touch", _LIMITS.max_nodes),
                     "max_cards": integer(0, 1_000_000, "cards the run may take away", _LIMITS.max_cards),
                     "min_ready": integer(0, 100_000, "Ready replicas left per model it touches", _LIMITS.min_ready),
                     "room": boolean("the replicas driven off their nodes must have somewhere to go", _LIMITS.room),
                     "require_opt_in": boolean("every namespace whose pods it ends or displaces carries "
                                               "kilocard.io/chaos=enabled", _LIMITS.require_opt_in),
                     "contexts": strings("the kubeconfig contexts the run may act on (default: any)",
                                         ["kind-kilocard"]),
                 }, example={"max_pods": 40, "min_ready": 0})
_MODEL = text("the model (label kilocard.io/model)", example=MODEL)
_CONDITION_NAMESPACE = optional(text("the model's namespace (default: every namespace)", example=NAMESPACE))


def _condition(kind: str, description: str, properties: dict[str, Schema], required: list[str],
               example: dict[str, Any]) -> Schema:
    return mapping(kind, description, {"kind": {"const": kind, "description": "the condition's kind"},
                                       "model": _MODEL, "namespace": _CONDITION_NAMESPACE, **properties},
                   ["kind", "model", *required], example={"kind": kind, "model": MODEL, **example})


CONDITIONS: dict[str, Schema] = {
    "zero-ready": _condition("zero-ready", "The model is left with no Ready replica (TP groups whole and Ready).",
                             {}, [], {"namespace": NAMESPACE}),
    "unhealthy": _condition("unhealthy", "More than max of the model's replica pods are not Ready (Pending "
                            "included).", {"max": integer(0, 100_000, "pods not Ready the run tolerates", example=2)},
                            ["max"], {"max": 2}),
    "slo": _condition("slo", "The model's indicator is past a hard limit on its worst replica; no series at all "
                      "counts as past it.",
                      {"indicator": choice(stop.INDICATORS, "what is measured", "ttft_p95"),
                       "limit": number(0, math.inf, "the hard limit (seconds, or a ratio for error_ratio)",
                                       example=5.0, above=True),
                       "window": duration("the rate window (PromQL duration)", "30s")},
                      ["limit"], {"limit": 5.0}),
    "hung-group": _condition("hung-group", "A replica of the model, all its pods Ready for the window, finished no "
                             "request over it while requests wait in its queue, or its lead exports no series (a "
                             "stalled rank); no series for the model, or no demand at all, counts as hung.",
                             {"window": duration("the window progress is judged over (PromQL duration)", "30s")}, [],
                             {"window": "30s"}),
}
STOP = mapping(stop.MODULE, "Stop conditions: checks beside the method that end the run (exit 3, faults reverted) "
               "when the cluster goes past a hard limit; missing data is a breach.", {
                   "every_seconds": number(0.2, 600, "how often the conditions are checked", 2.0),
                   "conditions": _field({"type": "array", "minItems": 1,
                                         "items": union("stop condition", "", CONDITIONS)},
                                        "the conditions, any of which stops the run", None,
                                        [CONDITIONS["zero-ready"]["examples"][0]]),
               }, ["conditions"], example={"every_seconds": 2, "conditions": [CONDITIONS["zero-ready"]["examples"][0],
                                                                             CONDITIONS["slo"]["examples"][0]]})
CONTROLS = {guards.MODULE: GUARDS, stop.MODULE: STOP}

# --- actions and probes: from their signatures --------------------------------------------------------
# Probe arguments: what each means, an example, and what the function itself refuses beyond its type
# (bounds where another value cannot mean anything: no time, a negative one, or nothing named).
_NAMED, _POSITIVE, _NOT_NEGATIVE = {"minLength": 1}, {"exclusiveMinimum": 0}, {"minimum": 0}
_PROBE_ARGUMENTS: dict[str, tuple[str, Any, Schema]] = {
    "model": ("the model (label kilocard.io/model)", MODEL, _NAMED),
    "models": ("the models whose replicas must be Ready elsewhere", [MODEL],
               {"minItems": 1, "items": {"type": "string", **_NAMED}}),
    "namespace": ("the namespace (default: every namespace)", NAMESPACE, {}),
    "node": ("the node the fault hit", "worker-1", _NAMED),
    "topology_key": ("the node label that names a failure domain", "kubernetes.io/hostname", _NAMED),
    "max_skew": ("replicas one domain may have over another, when anti-affinity is preferred", 1, _NOT_NEGATIVE),
    "guaranteed": ("pass only a required rule (anti-affinity, or a DoNotSchedule spread)", True, {}),
    "budget": ("seconds from the run's fault (the first; per card for the device-taint probe)", 120, _POSITIVE),
    "driver": ("the DRA driver whose ResourceSlices carry the device taints", "gpu.nvidia.com", _NAMED),
    "deadline": ("seconds from the fault", 120, _POSITIVE),
    "hold": ("seconds the indicator must stay under the threshold", 10, _NOT_NEGATIVE),
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
    "symptoms": ("an incident's symptoms (kilocard record writes them): tolerance, alerts, replicas",
                 {"tolerance": 15, "alerts": [{"alert": "ReplicaTtftP95High", "labels": {"model_name": MODEL},
                                               "firing_at": 3.0, "resolved_at": 41.0}],
                  "replicas": [{"owner": "llama-3-70b-tp8-5d4f7c9b8", "pod": "llama-3-70b-tp8-5d4f7c9b8-x2x9p",
                                "deleted": 16.0, "started": 41.0}]}, {}),
    "expect": ("reproduced: every symptom comes back within its tolerance; fixed: none does, or each within its "
               "budget in `fixed`", "reproduced", {"enum": ["reproduced", "fixed"]}),
    "fixed": ("the fix's budgets: alerts: {name: {resolved_within: s}}, replicas: {started_within: s}",
              {"alerts": {"ReplicaTtftP95High": {"resolved_within": 30}}}, {}),
    "namespaces": ("where the replicas' Events are (default: every namespace)", [NAMESPACE],
                   {"items": {"type": "string", **_NAMED}}),
    "step": ("the ALERTS range query's step, seconds (the rules' evaluation interval)", 1.0, _POSITIVE),
    "first_at": ("the first fault's offset in the timeline: time zero is its apply less this", 0.0, _NOT_NEGATIVE),
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
    "devices_tainted_within": (*BUDGET_KEYS, "cards"),
    "incident_symptoms": ("expect", "symptoms", "impact_seen"),
    "no_hung_groups": ("model", "namespace", "window", "at", "demand", "settling", "replicas", "hung"),
    "placement_holds": ("model", "crowded", "unguarded", "domains", "skew"),
    "remediated_within": ("node", "left", "unhealthy", "stuck", *_BUDGETED),
    "room_to_reschedule": ("model", "lost_nodes", "pods_to_place", "cards_to_place", "moves", "unplaced",
                           "free_cards", "largest_free_block"),
    "slo_recovered_within": (*_RECOVERY, "indicator", "query", "per"),
    "slo_under": ("value", "threshold", "worst", "values", "silent"),
    "tp_groups_recovered_within": (*_TP_GROUPS, "present", "desired", "stuck", *_BUDGETED),
    "tp_groups_whole": _TP_GROUPS,
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
                     overrides: dict[str, Schema]) -> Schema:
    """The schema of `func`'s arguments, from its signature: types from the annotations, defaults,
    required where there is none; a default None lets null through, as the function does."""
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
    example = {n: described[n][1] for n in [*required, "namespace"] if n in properties and n in described}
    return mapping(func.__name__, " ".join((inspect.getdoc(func) or "").split()), properties, required,
                   example=example or None)


def _functions(module: ModuleType) -> dict[str, Callable[..., Any]]:
    return {name: getattr(module, name) for name in module.__all__}


ACTIONS = {name: arguments_schema(func, {}, {"fault": FAULT} if func is actions.apply_fault else {})
           for name, func in _functions(actions).items()}
PROBES = {name: arguments_schema(func, _PROBE_ARGUMENTS, {}) for name, func in _functions(chaostoolkit).items()}
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


# --- errors in plain English ----------------------------------------------------------------------
def _types(schema: Schema) -> list[str]:
    found = schema.get("type", [])
    return [t for t in ([found] if isinstance(found, str) else found) if t != "null"]


def _bound(schema: Schema, show: Callable[[Any], str]) -> str:
    if "exclusiveMinimum" in schema:
        low = f" above {show(schema['exclusiveMinimum'])}"
    else:
        low = f" from {show(schema['minimum'])}" if "minimum" in schema else ""
    return low + (f" to {show(schema['maximum'])}" if "maximum" in schema else "")


def expected(schema: Schema) -> str:
    """What a value of `schema` must be, in words."""
    if "const" in schema:
        return repr(schema["const"])
    if "enum" in schema:
        return "one of " + ", ".join(map(str, schema["enum"]))
    kind = (_types(schema) or [""])[0]
    if kind == "string":
        if "format" in schema:
            return _FORMAT_WORDS[schema["format"]]
        if "pattern" in schema:
            return _PATTERN_WORDS[schema["pattern"]]
        return "a non-empty string" if schema.get("minLength") else "a string"
    if kind == "integer":
        return "an integer" + _bound(schema, str)
    if kind == "number":
        return "a number" + _bound(schema, lambda x: f"{x:g}")
    if kind == "boolean":
        return "true or false"
    if kind == "array":
        items = schema.get("items")
        each = f", each {expected(items)}" if items else ""
        return f"a {'non-empty ' if schema.get('minItems') else ''}list{each}" + (
            ", none twice" if schema.get("uniqueItems") else "")
    return "a mapping" if kind == "object" else "a value"


def _path(parts: Iterable[str | int]) -> str:
    found = ""
    for part in parts:
        if isinstance(part, int):
            found += f"[{part}]"
        elif not part or any(c.isspace() or c in ".[]'\"" for c in part) or not part.isprintable():
            found += f"[{part!r}]"  # a key that would not read as one: quoted
        else:
            found += f"{'.' if found else ''}{part}"
    return found


def _rule_fields(rule: Schema) -> list[str]:
    subschemas = rule.get("oneOf") or rule.get("anyOf") or [rule["not"]]
    return [name for s in subschemas for name in s["required"]]


def as_text(value: Any, integer: bool = False, texts: dict[str, str] | None = None) -> str:
    """A hint for a number given as text ("90"), else "": a `--var` without a type gives text.
    `texts` (text value -> the untyped --var's key that gave it) names the key and its typed form."""
    if not isinstance(value, str) or not _parses(float, value) or not math.isfinite(float(value)):
        return ""
    key = (texts or {}).get(value)
    if key is None:
        return " (text, not a number: write it without quotes)"
    typed = [f"{key}:{t}={value}" for t, parse in (("int", int), ("float", float))
             if (t == "int" or not integer) and _parses(parse, value)]
    return f" (text from --var {key}" + (f": give --var {' or '.join(typed)})" if typed else ")")


def _parses(parse: Callable[[str], object], value: str) -> bool:
    try:
        parse(value)
    except ValueError:
        return False
    return True


def _say(error: ValidationError, prefix: tuple[str, ...], texts: dict[str, str] | None = None) -> Iterator[str]:
    path, schema, value = _path([*prefix, *error.absolute_path]), error.schema, error.instance
    if error.validator == "required":
        for name in error.validator_value:
            if name not in value:
                yield f"{_path([*prefix, *error.absolute_path, name])}: required: expected " \
                      f"{expected(schema.get('properties', {}).get(name, {}))}"
    elif error.validator == "additionalProperties":
        known = sorted(schema.get("properties", {}))
        for name in sorted(set(value) - set(known), key=str):
            unknown = f"unknown field {name!r}" if path else f"unknown argument {name!r}"
            yield f"{path + ': ' if path else ''}{unknown}; " + (
                f"expected one of {', '.join(known)}" if known else "expected none")
    elif error.validator in ("oneOf", "anyOf", "not"):  # a rule across fields: named by its first
        names = _rule_fields(schema)
        got = {k: value[k] for k in names if value.get(k) is not None} or "nothing"
        if error.validator == "not":
            yield f"{path}: {schema['description']}, got {got}"
        else:
            yield f"{_path([*prefix, *error.absolute_path, names[0]])}: expected {schema['description']}, got {got}"
    else:
        kinds = _types(schema) if error.validator == "type" else []
        hint = as_text(value, integer="number" not in kinds, texts=texts) if {"number", "integer"} & set(kinds) else ""
        yield f"{path or 'arguments'}: expected {expected(schema)}, got {value!r}{hint}"


def errors(schema: Schema, value: Any, prefix: tuple[str, ...] = (), texts: dict[str, str] | None = None) -> list[str]:
    """Every way `value` breaks `schema`, each naming its field, in plain English (a number given
    as text says so; `texts`, text value -> the --var key that gave it, names the key)."""
    found = [m for e in Validator(schema, format_checker=FORMATS).iter_errors(value) for m in _say(e, prefix, texts)]
    return list(dict.fromkeys(found))


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
                    for m in errors(FAULT, fault, ("fault",), texts)]
        if module == chaostoolkit.__name__:
            said += _target(item, str(func))
        found += [f"{named}: {m}" for m in said]
    return found


# --- the reference and the JSON document ------------------------------------------------------------
def _type_name(schema: Schema) -> str:
    kind = (_types(schema) or ["any"])[0]
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
    kind = (_types(schema) or [""])[0]
    if kind == "string" and ("format" in schema or "pattern" in schema):
        return expected(schema).removeprefix("a ").removeprefix("an ").replace("|", "\\|")
    if kind in ("integer", "number"):
        return _bound(schema, str if kind == "integer" else lambda x: f"{x:g}").strip()
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
    rules = [f"- {', '.join(f'`{n}`' for n in _rule_fields(r))}: {r['description']}"
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
    {"exit": _field({"type": "integer", "enum": [0, 1, 3]},
                    "the expected exit: 0 passed, 1 failed, 3 aborted by a stop condition", None, None),
     "reason": text("how the verdict's reason starts, e.g. the probe that must fail")},
    required=["exit"], example={"exit": 1, "reason": "probe 'replicas-kept-apart' failed: "})


# chaos.load parses the extension's load block (run._load); this is its description.
LOAD = mapping(
    "load", "Traffic the experiment brings, in its `kilocard` extension, for a cluster no production traffic "
    "reaches: requests to an OpenAI-compatible endpoint (`POST {url}/v1/completions`, streamed) at `qps`, as a "
    "seeded Poisson process (open loop: a slow server does not slow it), from before the steady-state hypothesis "
    "until after the revert. Each is measured from the client (TTFT, TPOT, HTTP status, error kind); a request "
    "over `max_in_flight` counts as an error, `client_saturated`. The journal keeps the summary (P50/P95/P99 TTFT "
    "and TPOT, errors by kind, achieved QPS) and a series per second under `kilocard.load`. `kilocard load` "
    "offers the same from the command line.",
    {"url": _field({"type": "string", "pattern": _API_ROOT}, "the API's root, without /v1 (default: the local "
                   "testbed's)", LOCAL_TESTBED_OPENAI, "http://vllm.inference:8000"),
     "model": text("the model's served name", example=MODEL),
     "qps": number(0, traffic.MAX_QPS, "requests per second offered", example=10, above=True),
     "prompt_tokens": integer(1, traffic.MAX_TOKENS, "about this many prompt tokens a request", example=1024),
     "output_tokens": integer(1, traffic.MAX_TOKENS, "max_tokens of each request", example=128),
     "api": choice(traffic.APIS, "completions (/v1/completions) or chat (/v1/chat/completions)", "completions"),
     "seed": integer(0, 2**62, "seed of the arrivals and the prompts", 0),
     "max_in_flight": integer(1, traffic.MAX_IN_FLIGHT, "requests open at once; one more counts as an error",
                              traffic.DEFAULT_MAX_IN_FLIGHT),
     "timeout_seconds": number(0, traffic.MAX_TIMEOUT_SECONDS, "seconds a request may take in all",
                               traffic.DEFAULT_TIMEOUT_SECONDS, above=True),
     "token_env": optional(text("an environment variable that holds a bearer token (never logged)",
                                example="LLM_API_TOKEN")),
     "token_file": optional(text("a file that holds a bearer token (never logged)",
                                 example="/var/run/secrets/llm/token"))},
    required=["model", "qps", "prompt_tokens", "output_tokens"],
    rules=[not_both("give either token_env or token_file, not both", "token_env", "token_file")],
    example={"url": "http://vllm.inference:8000", "model": MODEL, "qps": 10, "prompt_tokens": 1024,
             "output_tokens": 128})


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
