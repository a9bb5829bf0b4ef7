"""Bad fault specs are refused before anything is recorded or applied, naming the field."""

import pytest

from chaos import plan
from chaos.errors import SpecError


@pytest.mark.parametrize("raw, message", [
    ({"kind": "meteor"}, "fault.kind: unknown fault kind 'meteor'; expected one of card-isolate,"),
    ("pod-kill", "fault: expected a mapping with a 'kind', got str"),
    ({"kind": "pod-kill"}, "fault.label_selector: expected a selector, a model (or a namespace)"),
    ({"kind": "pod-kill", "namespace": "a", "percent": 101}, "fault.percent: expected a number above 0 to 100, got 101"),
    ({"kind": "pod-kill", "namespace": "a", "count": 0}, "fault.count: expected an integer from 1 to 100000, got 0"),
    ({"kind": "pod-kill", "namespace": "a", "count": 1, "percent": 5}, "fault: give either count or percent, not both"),
    ({"kind": "pod-kill", "namespace": "a", "mode": "nuke"}, "fault.mode: expected one of delete, evict, got 'nuke'"),
    ({"kind": "pod-kill", "namespace": "a", "lable_selector": "x"}, "fault: unknown field 'lable_selector'"),
    ({"kind": "rank-kill", "namespace": "a"}, "fault.rank: required"),
    ({"kind": "node-isolate", "nodes": ["n"]}, "fault.ttl_seconds: required: expected a number above 0 to 86400"),
    ({"kind": "node-isolate", "nodes": ["n"], "ttl_seconds": -1}, "fault.ttl_seconds: expected a number above 0"),
    ({"kind": "node-isolate", "ttl_seconds": 5}, "fault.nodes: expected one of: a list of node names, a node_selector, or nodes_of"),
    ({"kind": "node-isolate", "ttl_seconds": 5, "nodes": ["a"], "nodes_of": {"label_selector": "a=b"}},
     "fault.nodes: expected one of: a list of node names, a node_selector, or nodes_of"),
    ({"kind": "node-kubelet-stop", "ttl_seconds": 5, "nodes_of": {"label_selector": "a in (b"}},
     "fault.nodes_of.label_selector: expected a label selector"),
    ({"kind": "node-kubelet-stop", "ttl_seconds": 5, "nodes_of": {"selector": "a=b"}},
     "fault.nodes_of: unknown field 'selector'; expected one of label_selector, model, namespace, rank, replica\n"
     "fault.nodes_of.label_selector: expected a label_selector or a model, got nothing"),
    ({"kind": "node-kubelet-stop", "ttl_seconds": 5, "nodes": ["a"], "interface": "eth0"},
     "fault: unknown field 'interface'"),
    ({"kind": "node-isolate", "nodes": ["n"], "effect": "NoWay", "ttl_seconds": 5}, "fault.effect: expected one of"),
    ({"kind": "gpu-ecc", "nodes": ["n"], "ttl_seconds": 5}, "fault.card: expected a card index, or a list"),
    ({"kind": "gpu-xid", "nodes": ["n"], "card": 0, "ttl_seconds": 5}, "fault.params: required: expected a mapping with xid"),
    ({"kind": "network-loss", "nodes": ["n"], "params": {"percent": 200}, "ttl_seconds": 5},
     "fault.params.percent: expected a number from 0 to 100, got 200"),
    ({"kind": "network-partition", "nodes": ["n"], "params": {"cidrs": ["10.0.0.300/8"]}, "ttl_seconds": 5},
     "fault.params.cidrs[0]: expected a CIDR like 10.0.0.0/8"),
    ({"kind": "network-policy-partition", "namespace": "a", "pod_selector": {}, "ttl_seconds": 5},
     "fault.pod_selector: expected a non-empty mapping, got {}"),
    ({"kind": "dra-card-isolate", "nodes": ["n"], "cards": [], "ttl_seconds": 5},
     "fault.cards: expected a non-empty list, each an integer from 0 to 1023"),
    ({"kind": "gpu-ecc", "nodes": ["n"], "cards": [3, 1, 3], "ttl_seconds": 5}, "fault.cards: 3 listed twice"),
    ({"kind": "dra-card-isolate", "nodes": ["n"], "cards": [0], "device_name": "gpu", "ttl_seconds": 5},
     "fault.device_name: expected a pattern containing {card}"),
])
def test_bad_specs_name_the_field(raw, message):
    with pytest.raises(SpecError) as err:
        plan.parse(raw, "fault")
    assert str(err.value).startswith(message), str(err.value)


def test_good_specs_parse_into_frozen_specs():
    _, spec = plan.parse({"kind": "tp-group-kill", "label_selector": "kilocard.io/model=x", "percent": 50}, "f")
    assert (spec.kind, spec.percent, spec.rank, spec.mode) == ("tp-group-kill", 50.0, None, "delete")
    _, spec = plan.parse({"kind": "gpu-ecc", "node_selector": "a=b", "count": 2, "cards": [3, 1],
                          "params": {"speed": 0.25}, "ttl_seconds": 30}, "f")
    assert spec.cards == (3, 1) and spec.params == {"speed": 0.25} and spec.ttl_seconds == 30.0
    with pytest.raises(AttributeError):
        spec.ttl_seconds = 1  # frozen


@pytest.mark.parametrize("selector", ["app=x", "a,b", "kilocard.io/model=llama-3-70b,!foo", "x notin (a, b),y!=z",
                                      "k>3", "a==", "kilocard.io/model in (llama-3-70b, llama-2-7b)"])
def test_label_selectors_kubernetes_accepts_parse(selector):
    from chaos.fields import selector_problem

    assert selector_problem(selector) is None


@pytest.mark.parametrize(("selector", "bad"), [("app in (x", "app in (x"), ("=x", "=x"), ("a b", "a b"),
                                               ("app=x,", ""), ("a=b,-c=d", "-c=d"), ("a=b c", "a=b c")])
def test_bad_label_selectors_are_refused_before_the_apiserver_sees_them(selector, bad):
    from chaos.fields import selector_problem

    assert selector_problem(selector) == bad
