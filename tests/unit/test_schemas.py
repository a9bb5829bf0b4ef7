"""chaos.schemas: the reference is current, what a kind's `build` adds to its schema refuses nothing
the schema accepts, the actions' and probes' schemas follow their signatures, and `problems` says
every error at once."""

import copy
import inspect
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from chaos import actions, faults, fields, guards, plan, schemas, stop
from chaos.errors import SpecError
from probes import chaostoolkit
from probes.snapshot import ClusterSnapshot, NodeView, PodView

ROOT = Path(__file__).parents[2]
CORPUS = sorted((ROOT / "tests" / "experiments" / "invalid").glob("*.yaml"))
# Corpus files about a kilocard activity's or control's arguments, besides those about `fault`.
ABOUT_ARGUMENTS = {"guard-negative", "stop-no-conditions", "unknown-argument",
                   "budget-as-text", "negative-budget", "negative-hold", "negative-threshold", "tolerance-target-typo",
                   "window-not-a-duration", "zero-deadline", "zero-qps"}
# Of those, the ones whose `# expect:` is worded by chaoslib or by the run's own check of variables.
WORDED_OTHERWISE = {"unknown-argument", "unresolved-var"}


def test_the_reference_is_current():
    assert (ROOT / "docs" / "experiments.md").read_text() == schemas.docs(), (
        "docs/experiments.md is stale: regenerate it with `python -m chaos.schemas docs > docs/experiments.md`")


def test_every_fault_kind_has_a_schema():
    assert set(schemas.FAULT_KINDS) == set(faults.registry())
    assert schemas.FAULT["properties"]["kind"]["enum"] == list(schemas.FAULT_KINDS)


# --- schema and parser agree --------------------------------------------------------------------------
def _accepted_by_parser(parse: Callable[[Any], object], value: Any) -> bool:
    try:
        parse(copy.deepcopy(value))
    except SpecError:
        return False
    return True


SUBJECTS: list[tuple[str, dict[str, Any], Callable[[Any], object]]] = [
    *((f"fault {kind}", schema, lambda raw: plan.parse(raw, "fault")) for kind, schema in schemas.FAULT_KINDS.items()),
    ("guards", schemas.GUARDS, lambda raw: guards.limits(raw, "controls[0]")),
    ("stop", schemas.STOP, lambda raw: stop.settings(raw, "controls[0]")),
    *((f"condition {kind}", schema, lambda raw: stop.settings({"conditions": [raw]}, "controls[0]"))
      for kind, schema in schemas.CONDITIONS.items()),
]


def paths_of(schema: dict[str, Any], prefix: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], dict[str, Any]]]:
    for name, s in schema["properties"].items():
        yield (*prefix, name), s
        if s.get("properties"):
            yield from paths_of(s, (*prefix, name))


def container(schema: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
    for name in path[:-1]:
        schema = schema["properties"][name]
    return schema


def valid(s: dict[str, Any]) -> Any:
    return s["const"] if "const" in s else s["examples"][0] if "examples" in s else s.get("default", s.get("enum", [0])[0])


def setting(example: dict[str, Any], schema: dict[str, Any], path: tuple[str, ...], value: Any) -> dict[str, Any]:
    """The example with the field at `path` set, and the fields it excludes (one of a group) left out."""
    found = copy.deepcopy(example)
    here = found
    for name in path[:-1]:
        here = here.setdefault(name, {})
    for rule in container(schema, path).get("allOf", []):
        group = fields.rule_fields(rule) if ("oneOf" in rule or "not" in rule) else []
        if path[-1] in group:
            for other in group:
                here.pop(other, None)
    here[path[-1]] = value
    return found


def without(example: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
    found = copy.deepcopy(example)
    here = found
    for name in path[:-1]:
        here = here[name]
    here.pop(path[-1], None)
    return found


def cases(schema: dict[str, Any]) -> Iterator[tuple[str, Any, bool | None]]:
    """(label, input, must it be accepted: True, False, or None for "as the parser says")."""
    example = schema["examples"][0]
    yield "the example", example, True
    yield "an unknown field", {**example, "bogus": 1}, False
    for path, s in paths_of(schema):
        name = ".".join(path)
        # A nested field's mapping is first given its own valid value (nodes_of for nodes).
        base = setting(example, schema, path[:-1], valid(container(schema, path))) if len(path) > 1 else example

        def given(value: Any, path: tuple[str, ...] = path, base: dict[str, Any] = base) -> dict[str, Any]:
            return setting(base, schema, path, value)

        yield f"{name} = {valid(s)!r}", given(valid(s)), True
        types = fields.types_of(s)
        wrong = 12345 if ("string" in types or "enum" in s or "const" in s) else "x"
        yield f"{name} = {wrong!r}", given(wrong), False
        yield f"{name} = null", given(None), None
        required = path[-1] in container(schema, path)["required"]
        yield f"{name} missing", without(base, path), False if required else None
        if "enum" in s:
            yield f"{name} = 'no-such'", given("no-such"), False
        if s.get("minLength"):
            yield f"{name} = ''", given(""), False
        if "integer" in types:
            yield f"{name} = 1.5", given(1.5), False
        for bound, inside, outside in (("minimum", 0, -1), ("maximum", 0, 1), ("exclusiveMinimum", 0.001, 0)):
            if bound in s:
                yield f"{name} = {s[bound] + inside}", given(s[bound] + inside), True
                yield f"{name} = {s[bound] + outside}", given(s[bound] + outside), False
        if s.get("properties"):
            yield f"{name}.bogus", setting(given(valid(s)), schema, (*path, "bogus"), 1), False


@pytest.mark.parametrize("label, schema, parse", SUBJECTS, ids=[s[0] for s in SUBJECTS])
def test_schema_and_parser_accept_and_refuse_the_same(label, schema, parse):
    disagreements = []
    for case, value, ok in cases(schema):
        by_schema, by_parser = not fields.errors(schema, value), _accepted_by_parser(parse, value)
        if by_schema != by_parser:
            disagreements.append(f"{case}: schema {'accepts' if by_schema else 'refuses'}, parser "
                                 f"{'accepts' if by_parser else 'refuses'}")
        elif ok is not None and by_schema != ok:
            disagreements.append(f"{case}: both {'accept' if by_schema else 'refuse'} it")
    assert not disagreements, "\n".join(disagreements)


# --- every example, every signature -------------------------------------------------------------------
def with_examples(schema: Any) -> Iterator[dict[str, Any]]:
    if isinstance(schema, dict):
        if "examples" in schema:
            yield schema
        for value in schema.values():
            yield from with_examples(value)
    elif isinstance(schema, list):
        for value in schema:
            yield from with_examples(value)


def test_every_example_validates_against_its_schema():
    every = [schemas.FAULT_KINDS, schemas.CONTROLS, schemas.ACTIONS, schemas.PROBES]
    found = [(s, e) for s in with_examples(every) for e in s["examples"]]
    assert len(found) > 100
    for schema, example in found:
        assert fields.errors(schema, example) == [], (schema.get("title"), example)
    fields.Validator.check_schema(schemas.document())


def test_the_document_checks_an_experiment_by_module_and_function():
    document = fields.Validator(schemas.document(), format_checker=fields.FORMATS)
    fault = {"kind": "node-isolate", "nodes": ["n"], "ttl_seconds": 60}
    experiment = {"method": [{"provider": {"type": "python", "module": "chaos.actions", "func": "apply_fault",
                                           "arguments": {"fault": fault}}}],
                  "controls": [{"provider": {"module": "chaos.guards", "arguments": {"max_pods": 3}}}]}
    assert list(document.iter_errors(experiment)) == []
    fault["effect"] = "NoRun"
    experiment["controls"][0]["provider"]["arguments"]["max_pod"] = 3
    assert len(list(document.iter_errors(experiment))) == 2


@pytest.mark.parametrize("module, schemas_of", [(actions, schemas.ACTIONS), (chaostoolkit, schemas.PROBES)],
                         ids=["actions", "probes"])
def test_the_argument_schemas_follow_the_signatures(module, schemas_of):
    assert set(schemas_of) == set(module.__all__)
    for name, schema in schemas_of.items():
        params = {p.name: p for p in inspect.signature(getattr(module, name)).parameters.values()
                  if p.name != "configuration"}
        assert list(schema["properties"]) == list(params), name
        assert schema["required"] == [n for n, p in params.items() if p.default is inspect.Parameter.empty], name
        assert schema["description"] == " ".join(inspect.getdoc(getattr(module, name)).split())
        for arg, p in params.items():
            s = schema["properties"][arg]
            if p.default is None:
                assert "null" in s.get("type", []), (name, arg)
            elif p.default is not inspect.Parameter.empty:
                assert s["default"] == p.default and fields.errors(s, p.default) == [], (name, arg)
            if module is chaostoolkit:
                assert s["description"], (name, arg)


# --- problems ---------------------------------------------------------------------------------------
def activity(kind: str, name: str, module: str, func: str, **arguments: Any) -> dict[str, Any]:
    return {"type": kind, "name": name, "provider": {"type": "python", "module": module, "func": func,
                                                     "arguments": arguments}}


def test_problems_reports_every_error_of_an_experiment_at_once():
    experiment = {
        "title": "t", "description": "d",
        "steady-state-hypothesis": {"title": "h", "probes": [
            activity("probe", "fine", "probes.chaostoolkit", "tp_groups_whole", model="m"),
            activity("probe", "slo", "probes.chaostoolkit", "slo_under", model="m", threshold="high", per="pod"),
        ]},
        "method": [
            activity("action", "isolate", "chaos.actions", "apply_fault",
                     fault={"kind": "node-isolate", "nodes": ["n"], "effect": "NoRun", "ttl_seconds": "${ttl}",
                            "ttl_second": 60}),
            activity("action", "kill", "chaos.actions", "kill_pods", namespace="ns", count=0),
            activity("action", "not ours", "os.path", "exists", path="/"),
            activity("action", "ecc", "chaos.actions", "apply_fault",
                     fault={"kind": "gpu-ecc", "node_selector": "a in (b", "cards": [1, 1], "count": 1, "percent": 5,
                            "params": {"speeed": 1}}),
        ],
        "rollbacks": [activity("action", "revert", "chaos.actions", "revert_faults", now=True)],
        "controls": [
            {"name": "guards", "provider": {"type": "python", "module": "chaos.guards",
                                            "arguments": {"min_ready": -1, "max_pod": 3}}},
            {"name": "stop", "provider": {"type": "python", "module": "chaos.stop", "arguments": {
                "conditions": [{"kind": "slo", "model": "${model}", "indicator": "p99"}]}}},
        ],
    }
    assert schemas.problems(experiment, {"ttl": -5, "model": "m"}, {}) == [
        "steady-state-hypothesis.probes[1] ('slo'): threshold: expected a number from 0, got 'high'",
        "steady-state-hypothesis.probes[1] ('slo'): per: expected one of replica, model, got 'pod'",
        "method[0] ('isolate'): fault.effect: expected one of NoSchedule, NoExecute, got 'NoRun'",
        "method[0] ('isolate'): fault.ttl_seconds: expected a number above 0 to 86400, got -5",
        "method[0] ('isolate'): fault: unknown field 'ttl_second'; expected one of allow_empty, count, drain, effect, "
        "eviction_deadline_seconds, kind, node_selector, nodes, nodes_of, percent, seed, ttl_seconds, verify",
        "method[1] ('kill'): fault.count: expected an integer from 1 to 100000, got 0",
        "method[3] ('ecc'): fault.node_selector: expected a label selector like 'a=b,c!=d,e in (f,g),!h', "
        "got 'a in (b'",
        "method[3] ('ecc'): fault.cards: 1 listed twice; expected a non-empty list, each an integer from 0 to 1023, "
        "none twice",
        "method[3] ('ecc'): fault.params: unknown field 'speeed'; expected one of count, speed, type",
        "method[3] ('ecc'): fault.ttl_seconds: required: expected a number above 0 to 86400",
        "method[3] ('ecc'): fault: give either count or percent, not both, got {'count': 1, 'percent': 5}",
        "rollbacks[0] ('revert'): unknown argument 'now'; expected none",
        "controls[0] ('guards'): min_ready: expected an integer from 0 to 100000, got -1",
        "controls[0] ('guards'): unknown argument 'max_pod'; expected one of contexts, max_cards, max_nodes, "
        "max_pods, min_ready, require_opt_in, room",
        "controls[1] ('stop'): conditions[0].indicator: expected one of ttft_p95, itl_p95, error_ratio, got 'p99'",
        "controls[1] ('stop'): conditions[0].limit: required: expected a number above 0",
    ]


def test_problems_names_the_rule_a_selection_breaks():
    experiment = {"method": [
        activity("action", "a", "chaos.actions", "apply_fault", fault={"kind": "gpu-xid", "ttl_seconds": 5}),
        activity("action", "b", "chaos.actions", "apply_fault", fault="pod-kill"),
        activity("action", "c", "chaos.actions", "apply_fault", fault={"kind": "pod-kil"}),
    ]}
    assert schemas.problems(experiment) == [
        "method[0] ('a'): fault.params: required: expected a mapping with xid",
        "method[0] ('a'): fault.nodes: expected one of: a list of node names, a node_selector, or nodes_of "
        "{namespace, label_selector, model, replica, rank}, got nothing",
        "method[0] ('a'): fault.card: expected a card index, or a list of them as 'cards' (one of the two), got nothing",
        "method[1] ('b'): fault: expected a mapping, got 'pod-kill'",
        "method[2] ('c'): fault.kind: expected one of " + ", ".join(schemas.FAULT_KINDS) + ", got 'pod-kil'",
    ]


def test_a_valid_experiment_has_no_problems():
    for path in sorted((ROOT / "experiments").glob("*.yaml")):
        data = yaml.safe_load(path.read_text())
        assert schemas.problems(data, data.get("configuration") or {}, {}) == [], path.name


@pytest.mark.parametrize("path", CORPUS, ids=[p.stem for p in CORPUS])
def test_the_corpus_of_malformed_experiments(path):
    """Those about a kilocard activity's arguments have a problem naming the activity, most in the
    words the file expects; none raises."""
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError:
        return
    found = schemas.problems(data, data.get("configuration") or {}, {}) if isinstance(data, dict) else []
    expect = path.read_text().splitlines()[0].removeprefix("# expect: ")
    if expect.startswith("fault") or path.stem in ABOUT_ARGUMENTS:
        assert found, "the schemas miss what the parser refuses"
        assert path.stem in WORDED_OTHERWISE or any(expect in p for p in found), found
    assert all(re.match(r"(method|controls|steady-state-hypothesis\.probes)\[0\] \('[agsp]'\): ", p) for p in found), found


# --- the probes' arguments: bounds, windows, tolerance targets, numbers given as text --------------------
BOUNDS = {  # argument: (the last value refused, the first accepted)
    "budget": (0, 0.001), "deadline": (0, 0.001), "hold": (-0.001, 0), "threshold": (-0.001, 0),
    "headroom": (-0.001, 0), "qps": (0, 0.001), "latency_seconds": (0, 0.001), "fault_at": (0, 1),
    "prompt_tokens": (0, 1), "output_tokens": (0, 1), "max_skew": (-1, 0), "since": (0, 1),
}
RENAMED = {"deadline": "budget"}  # an old name: given instead of the new one, never beside it
# Probes whose bound differs: the clients' budget may be 0 (no failure allowed at all).
BOUNDS_OF = {"client_errors_within": {"budget": (-0.001, 0)}}


def test_every_probe_argument_with_a_bound_refuses_what_cannot_mean_anything():
    seen = set()
    for name, schema in schemas.PROBES.items():
        for arg, (refused, accepted) in {**BOUNDS, **BOUNDS_OF.get(name, {})}.items():
            if arg in schema["properties"]:
                seen.add(arg)
                example = {k: v for k, v in schema["examples"][0].items() if k != RENAMED.get(arg)}
                assert fields.errors(schema, {**example, arg: accepted}) == [], (name, arg)
                (said,) = fields.errors(schema, {**example, arg: refused})
                assert said.startswith(f"{arg}: expected "), said
    assert seen == set(BOUNDS)
    models = schemas.PROBES["remediated_within"]
    assert fields.errors(models, {"models": [], "budget": 60}) == ["models: expected a non-empty list, each a "
                                                                     "non-empty string, got []"]
    assert fields.errors(schemas.PROBES["slo_under"], {"model": ""}) == [
        "model: expected a non-empty string, got ''"]


@pytest.mark.parametrize("window, ok", [("30s", True), ("1m30s", True), ("500ms", True), ("2h", True),
                                        ("10 secs", False), ("10", False), ("0s", False), ("", False),
                                        ("1m ", False), ("thirty", False)])
def test_a_window_is_a_prometheus_duration_as_probes_slo_reads_it(window, ok):
    for schema in (schemas.PROBES["slo_under"], schemas.PROBES["slo_recovered_within"],
                   schemas.PROBES["no_hung_groups"]):
        said = fields.errors(schema, {**schema["examples"][0], "window": window})
        assert said == ([] if ok else [f"window: expected a Prometheus duration above 0 like 30s, 1m or 1m30s, "
                                      f"got {window!r}"])
    for condition in ("slo", "hung-group"):
        schema = schemas.CONDITIONS[condition]
        assert bool(fields.errors(schema, {**schema["examples"][0], "window": window})) is not ok


def probe(name: str, func: str, target: str | None = "verdict", **arguments: Any) -> dict[str, Any]:
    found = activity("probe", name, "probes.chaostoolkit", func, **arguments)
    return {**found, "tolerance": {"type": "regex", "target": target, "pattern": "^ok$"}} if target else found


def keys_of(func: str) -> str:
    return ", ".join((*schemas.VERDICT_KEYS, *schemas.PROBE_KEYS[func]))


def test_problems_reports_every_bad_probe_argument_and_target_at_once():
    experiment = {"steady-state-hypothesis": {"title": "h", "probes": [
        probe("whole", "tp_groups_whole", "verdcit", model="m"),
        probe("slo", "slo_recovered_within", "peak", model="m", budget=0, hold=-1, window="10 secs"),
    ]}, "method": [
        probe("moved", "tp_groups_recovered_within", "peak", model="m", budget="${budget}"),
        probe("room", "capacity_fits", "need_bytes", model="m", qps=0, prompt_tokens=0, output_tokens=1,
              latency_seconds=8, headroom=-0.1),
        {**probe("no target", "slo_under", None, model="m"), "tolerance": True},
        activity("probe", "not ours", "os.path", "exists", path="/"),
    ]}
    assert schemas.problems(experiment, {"budget": -5}) == [
        "steady-state-hypothesis.probes[0] ('whole'): tolerance.target: expected a key tp_groups_whole returns: "
        f"one of {keys_of('tp_groups_whole')}, got 'verdcit'",
        "steady-state-hypothesis.probes[1] ('slo'): budget: expected a number above 0, got 0",
        "steady-state-hypothesis.probes[1] ('slo'): hold: expected a number from 0, got -1",
        "steady-state-hypothesis.probes[1] ('slo'): window: expected a Prometheus duration above 0 like 30s, 1m or "
        "1m30s, got '10 secs'",
        "method[0] ('moved'): budget: expected a number above 0, got -5",
        "method[0] ('moved'): tolerance.target: expected a key tp_groups_recovered_within returns: one of "
        f"{keys_of('tp_groups_recovered_within')}, got 'peak'",
        "method[1] ('room'): qps: expected a number above 0, got 0",
        "method[1] ('room'): prompt_tokens: expected an integer from 1, got 0",
        "method[1] ('room'): headroom: expected a number from 0, got -0.1",
    ]


def test_the_slo_budget_may_still_be_called_deadline_but_not_both_and_not_neither():
    def said(**arguments):
        return schemas.problems({"method": [probe("p", "slo_recovered_within", model="m", **arguments)]})

    assert said(budget=60) == said(deadline=60) == []
    assert said(deadline=0) == ["method[0] ('p'): deadline: expected a number above 0, got 0"]  # bounded as before
    rule = "budget, or deadline (its old name): one of the two"
    assert said() == [f"method[0] ('p'): budget: expected {rule}, got nothing"]
    assert said(budget=60, deadline=60) == [
        f"method[0] ('p'): budget: expected {rule}, got {{'budget': 60, 'deadline': 60}}"]


def test_every_key_a_probe_returns_may_be_a_target_and_no_other():
    for name in schemas.PROBES:
        for key in (*schemas.VERDICT_KEYS, *schemas.PROBE_KEYS[name]):
            assert schemas.problems({"method": [probe("p", name, key)]}) == [
                m for m in schemas.problems({"method": [probe("p", name)]})], (name, key)
    assert set(schemas.PROBE_KEYS) == set(schemas.PROBES)
    assert schemas.PROBE_KEYS["slo_recovered_within"][-3:] == ("indicator", "query", "per")


def test_a_number_given_as_text_says_so_and_names_its_var():
    experiment = {"method": [probe("p", "slo_recovered_within", model="m", budget="${budget}",
                                   threshold="${threshold}"),
                             activity("action", "a", "chaos.actions", "kill_pods", label_selector="a=b",
                                      count="${count}")]}
    config = {"budget": "90", "threshold": "0.5", "count": "2"}
    assert schemas.problems(experiment, config, {}, {"90": "budget", "2": "count"}) == [
        "method[0] ('p'): budget: expected a number above 0, got '90' (text from --var budget: give --var "
        "budget:int=90 or budget:float=90)",
        "method[0] ('p'): threshold: expected a number from 0, got '0.5' (text, not a number: write it without "
        "quotes)",
        "method[1] ('a'): count: expected an integer, got '2' (text from --var count: give --var count:int=2)",
    ]
    assert fields.as_text("0.5", texts={"0.5": "t"}) == " (text from --var t: give --var t:float=0.5)"
    assert fields.as_text("1.5", integer=True, texts={"1.5": "n"}) == " (text from --var n)"
    assert fields.as_text("soon") == fields.as_text("nan") == fields.as_text(90) == ""
    assert schemas.problems({"method": [probe("p", "slo_under", model="m", threshold="high")]}) == [
        "method[0] ('p'): threshold: expected a number from 0, got 'high'"]  # not a number at all: no hint


# --- what each probe returns, against its pure judge -------------------------------------------------------
def _node(name, cards=8, **kw):
    return NodeView(name, {"kubernetes.io/hostname": name}, cards_capacity=cards, cards_allocatable=cards, **kw)


def _pod(name, node, group=None, rank=0, ready=True, cards=8, required=(), model="m", **labels):
    shape = {"kilocard.io/model": model, "kilocard.io/layers": "32", "kilocard.io/kv-heads": "8",
             "kilocard.io/head-dim": "128", **labels}
    return PodView("ns", name, f"uid-{name}", node, model, ready, False, cards, group or f"ns/{name}", rank, shape,
                   required_anti_affinity=required, ready_since=NOW - 600 if ready else None)


NOW = 1_700_000_000.0
NODES = (_node("a"), _node("b"), _node("c"))
HOST = ("kubernetes.io/hostname",)
APART = ClusterSnapshot((_pod("1", "a", required=HOST), _pod("2", "b", required=HOST)), NODES)
PILED = ClusterSnapshot((_pod("1", "a", cards=1), _pod("2", "a", cards=1), _pod("3", "a", cards=1)), NODES)
SPLIT = ClusterSnapshot((_pod("s-0", "a", "ns/s", 0, cards=4, **{"kilocard.io/tp-size": "8"}),
                         _pod("s-1", "b", "ns/s", 1, cards=4, **{"kilocard.io/tp-size": "8"})), NODES)


class _Prometheus:
    def __init__(self, rows):
        self.rows = rows

    def custom_query(self, query):
        return self.rows


# What probes.chaostoolkit's wrappers add to their pure judge's verdict.
WRAPPERS = {"slo_recovered_within": ("indicator", "query", "per"), "straggler_named_within": ("indicator", "query"),
            "kv_cache_within": ("queries",), "traffic_spread_within": ("query",)}


def _returned() -> dict[str, list[dict[str, Any]]]:
    """Each probe's outputs from its pure judge, over small fixtures that reach every branch with a
    key of its own (a budgeted probe's judge is probes.budget over the cluster's moments)."""
    from probes import (
        budget,
        capacity,
        client_errors,
        device_taints,
        hung,
        incident,
        kv,
        placement,
        pulls,
        remediation,
        slo,
        spread,
        straggler,
        tp_groups,
    )
    from probes.slo import Indicator, Sample
    from probes.snapshot import Moment

    def within(snapshot, check):
        return budget.first_within([Moment(NOW, snapshot)], check, NOW, 60, "the fault").to_json()

    def recovered(snapshot, faulted=frozenset(), desired=None):
        return tp_groups.recovered(snapshot, "m", set(faulted), desired=desired)

    quarantined = _node("a", unschedulable=True, taints=("nvidia.com/gpu-error=ecc:NoSchedule",))
    drained = ClusterSnapshot((_pod("2", "b"),), (quarantined, _node("b")))
    pending = ClusterSnapshot((_pod("1", "a"), _pod("2", None, cards=16)), NODES)
    hung_world = ClusterSnapshot((_pod("g0-0", "a", "ns/g0"), _pod("g1-0", "b", "ns/g1")), NODES)
    one = Indicator("m", "q", "1m", "pod")
    breach_then_back = [Sample(NOW + t, {"pod-a": 2.0 if 5 <= t < 20 else 0.1}) for t in range(0, 61)]
    xid = device_taints.XidFault("a", 3, NOW)
    symptoms = {"alerts": [{"alert": "A", "labels": {}, "firing_at": 2.0}]}
    return {
        "placement_holds": [placement.anti_affinity(APART, "m").to_json(), placement.anti_affinity(PILED, "m").to_json(),
                            placement.anti_affinity(PILED, "m", guaranteed=True).to_json()],
        "tp_groups_whole": [tp_groups.check(APART, "m").to_json(), tp_groups.check(SPLIT, "m").to_json()],
        "tp_groups_recovered_within": [within(APART, recovered), within(SPLIT, recovered),
                                       within(APART, lambda s: recovered(s, desired=3)),
                                       within(APART, lambda s: recovered(s, faulted={"a"}))],
        "capacity_fits": [capacity.fits(APART, "m", capacity.Demand(10, 1000, 100, 5)).to_json()],
        "room_to_reschedule": [capacity.room(APART, "m").to_json(), capacity.room(pending, "m", ()).to_json()],
        "slo_under": [slo.under(_Prometheus([{"metric": {"pod": "a"}, "value": [NOW, "0.2"]}]), one, 0.5, {"b"}).to_json(),
                      slo.under(_Prometheus([]), one, 0.5).to_json()],
        "slo_recovered_within": [slo.judge(breach_then_back, NOW, slo.Recovery(0.5, 60, 10, 5), final=True).to_json()],
        "no_hung_groups": [
            hung.judge(hung_world, hung.Figures(NOW, {("ns", "g0-0"): hung.Progress(5),
                                                      ("ns", "g1-0"): hung.Progress(0, 3)}), "m").to_json(),
            hung.judge(hung_world, hung.Figures(NOW, {("ns", "g0-0"): hung.Progress(5),
                                                      ("ns", "g1-0"): hung.Progress(4)}), "m").to_json()],
        "remediated_within": [
            within(drained, lambda s: remediation.check(s, "a", ("m",))),
            within(drained, lambda s: remediation.check(s, "z", ("m",))),
            remediation.check(ClusterSnapshot((_pod("1", "a"),), (quarantined,)), "a", ("m",)).to_json(),
            remediation.check(ClusterSnapshot((_pod("2", "b", ready=False),), (quarantined, _node("b"))), "a",
                              ("m",)).to_json(),
            remediation.out_of_service(ClusterSnapshot((_pod("1", "a"),), ()), "a", ("m",)).to_json()],
        "devices_tainted_within": [device_taints.judge([], [xid], 10, NOW + 30).to_json(),
                                   device_taints.judge([], [], 10, NOW).to_json()],
        "incident_symptoms": [incident.reproduced(symptoms, [incident.Firing("A", {}, 3.0, 9.0)], [], 60).to_json(),
                              incident.fixed(symptoms, {}, [], [], 60).to_json()],
        "straggler_named_within": [
            straggler.judge([straggler.Sample(NOW + t, {"a": 0.05, "b": 0.09 if t > 5 else 0.05}) for t in range(61)],
                            NOW, straggler.Rule()).to_json(),
            straggler.judge([straggler.Sample(NOW + t, {"a": 0.05, "b": 0.05}) for t in range(61)], NOW,
                            straggler.Rule()).to_json(),
            straggler.judge([straggler.Sample(NOW + t, {"a": 0.05}, frozenset("ab")) for t in range(61)], NOW,
                            straggler.Rule()).to_json()],
        "client_errors_within": [
            client_errors.judge([client_errors.Request(NOW + 1, "http_503", True)] + [
                client_errors.Request(NOW + t) for t in range(2, 20)], NOW, client_errors.Rule(5)).to_json(),
            client_errors.judge([client_errors.Request(NOW + 9, "timeout")], NOW, client_errors.Rule(5)).to_json(),
            client_errors.judge([client_errors.Request(NOW + 1, "x"), client_errors.Request(NOW + 4, "x")], NOW,
                                client_errors.Rule(5, max_window=1)).to_json(),
            client_errors.judge([], NOW, client_errors.Rule(5), (NOW + 1,)).to_json()],
        "traffic_spread_within": [
            spread.judge([spread.Sample(NOW + t, {"a": 5.0 * t, "b": 5.0 * t}) for t in range(-10, 30)], NOW,
                         spread.Rule(10)).to_json(),
            spread.judge([spread.Sample(NOW + t, {"a": 5.0 * t, "b": 1.0}) for t in range(-10, 30)], NOW,
                         spread.Rule(10)).to_json(),
            spread.judge([spread.Sample(NOW + t, {"a": 1.0, "b": 1.0}) for t in range(-10, 30)], NOW,
                         spread.Rule(10)).to_json(),
            spread.judge([spread.Sample(NOW + t, {"a": 5.0 * t}, frozenset("ab")) for t in range(-10, 30)], NOW,
                         spread.Rule(10)).to_json(),
            spread.judge([], NOW, spread.Rule(10)).to_json()],
        "kv_cache_within": [
            kv.judge([kv.Sample(NOW + 5, {"a": 0.0}, {"a": 0.5})], NOW, kv.Bounds(20)).to_json(),
            kv.judge([kv.Sample(NOW + 5, {"a": 2.0}, {"a": 1.0})], NOW, kv.Bounds(20)).to_json(),
            kv.judge([kv.Sample(NOW + 5, {"a": 0.0}, {"a": 1.0})], NOW, kv.Bounds(20, max_usage=0.9)).to_json(),
            kv.judge([kv.Sample(NOW + 5, {}, {}, frozenset("a"))], NOW, kv.Bounds(20)).to_json(),
            kv.judge([kv.Sample(NOW + 5, {"a": 0.0}, {"a": 0.0})], NOW, kv.Bounds(20)).to_json()],
        "image_pulls_failed": [
            pulls.judge([(NOW, []), (NOW + 1, [pulls.PodAt("u", "p", False, "ErrImagePull")])], "m", NOW).to_json(),
            pulls.judge([(NOW, []), (NOW + 1, [pulls.PodAt("u", "p", True)])], "m", NOW).to_json(),
            pulls.judge([(NOW, []), (NOW + 1, [pulls.PodAt("u", "p", False)])], "m", NOW).to_json()],
    }


def test_the_keys_listed_for_each_probe_are_the_keys_its_judge_returns():
    returned = _returned()
    assert set(returned) == set(schemas.PROBE_KEYS) == set(schemas.PROBES)
    for name, outputs in returned.items():
        listed = {*schemas.VERDICT_KEYS, *schemas.PROBE_KEYS[name]}
        got = {key for output in outputs for key in output} | set(WRAPPERS.get(name, ()))
        assert got <= listed, f"{name} returns keys PROBE_KEYS does not list: {sorted(got - listed)}"
        assert got >= listed - {"outcome"}, (f"PROBE_KEYS[{name!r}] lists keys no fixture returns: "
                                              f"{sorted(listed - {'outcome'} - got)} (drop them, or add a fixture)")
        assert all({"verdict", "ok", "reason"} <= set(output) for output in outputs), name
