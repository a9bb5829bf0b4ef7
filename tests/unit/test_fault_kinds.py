"""Every fault kind module is a chaos.faults.FaultKind: each part there, taking what the plan,
the landed check and the revert pass it; and what it adds (check, verify, verify_all, apply_all)
takes what they pass too."""

import inspect
import types

import pytest

from chaos import faults
from chaos.faults import FaultKind

MODULES = sorted({m.__name__: m for m in faults.registry().values()}.items())
OPTIONAL = {"check": ["ctx", "spec", "found", "where", "earlier"], "verify": ["ctx", "spec", "target", "undo"],
            "verify_all": ["ctx", "spec", "targets"], "apply_all": ["ctx", "spec", "targets"]}


def _protocol_parameters(name):
    return [p for p in inspect.signature(getattr(FaultKind, name)).parameters if p != "self"]


@pytest.mark.parametrize("name, module", MODULES, ids=[n for n, _ in MODULES])
def test_each_kind_module_is_a_fault_kind_with_the_parts_the_runners_call(name, module):
    assert isinstance(module, FaultKind)
    for part in ("build", "targets", "prepare", "disrupts", "apply", "revert"):
        assert len(inspect.signature(getattr(module, part)).parameters) == len(_protocol_parameters(part)), part
    for part, expected in OPTIONAL.items():
        if hasattr(module, part):
            assert len(inspect.signature(getattr(module, part)).parameters) == len(expected), part
    assert module.SCHEMAS and all(s["properties"]["kind"]["const"] == k for k, s in module.SCHEMAS.items())
    assert isinstance(module.REVERTIBLE, bool)


def test_a_module_missing_a_part_is_no_fault_kind():
    whole = {part: (lambda *a: None) for part in ("build", "targets", "prepare", "disrupts", "apply", "revert")}
    assert isinstance(types.SimpleNamespace(SCHEMAS={}, REVERTIBLE=True, **whole), FaultKind)
    for missing in [*whole, "SCHEMAS", "REVERTIBLE"]:
        parts = {k: v for k, v in {**whole, "SCHEMAS": {}, "REVERTIBLE": True}.items() if k != missing}
        assert not isinstance(types.SimpleNamespace(**parts), FaultKind), missing
