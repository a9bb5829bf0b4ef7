"""Fault kinds. Each module holds one kind (or a family of them): `SCHEMAS`, each kind's fields
declared once (JSON Schema from chaos.fields, the shared ones from `_spec`: chaos.plan reads and
checks them, chaos.schemas documents them), a frozen Spec, `build` (the Spec from the fields its
schema accepted; what a schema cannot say is a SpecError naming the field), `targets` (what the
spec selects, as plain dicts), optionally `check` (what only the cluster can tell: card indices,
agents, other runs holding the target; SpecError naming the field), `prepare` (the state revert
will need, read BEFORE anything changes, so the write-ahead ledger holds it), `apply` and `revert`
side by side. Revert is idempotent, undoes only what this run placed, and a vanished target
counts as reverted. `disrupts` says what one target takes away, for the guards' blast radius
(chaos/guards.py). A new module here is a new kind: nothing else lists them.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol, runtime_checkable

from chaos.agent.client import AgentClient
from chaos.errors import SpecError
from chaos.kube import Kube


@dataclass
class Context:
    kube: Kube
    agents: AgentClient
    run_id: str
    say: Callable[[str], None] = print
    card_resource: str | None = None  # None: the nodes' (vocabulary.card_resource_of)
    # Set by Ctrl-C, SIGTERM or a stop condition: a fault waiting (an eviction a PDB blocks) gives up.
    stop: threading.Event = field(default_factory=threading.Event)

    def for_run(self, run_id: str) -> Context:
        return Context(self.kube, self.agents, run_id, self.say, self.card_resource, self.stop)


class Look(NamedTuple):
    """One look at a fault's effect on one target (a kind's `verify`, read by chaos.landed):
    confirmed, mismatch or inconclusive; what was seen; and `final` when looking again cannot tell
    more (no read-back exists), so the look stands at once."""

    status: str
    evidence: str
    final: bool = False


@dataclass(frozen=True)
class Disruption:
    """What one target of a fault takes away: the pods it ends, the node it touches, the cards it
    takes out of service, and whether the pods on that node (`evicts="node"`) or on those cards
    (`"cards"`) are driven off."""

    pods: tuple[tuple[str, str], ...] = ()  # (namespace, name)
    node: str | None = None
    cards: tuple[int, ...] = ()
    evicts: str = "none"


@runtime_checkable
class FaultKind(Protocol):
    """What every kind module provides; chaos.plan, chaos.landed and chaos.revert call nothing
    else, but for what a kind may add: `check(ctx, spec, targets, where, earlier)`, `verify(ctx,
    spec, target, undo) -> Look` or `verify_all` (one look at many), `apply_all` (every target at
    once). `registry` refuses a module that lacks a part."""

    SCHEMAS: dict[str, dict[str, Any]]
    REVERTIBLE: bool

    def build(self, values: dict[str, Any], where: str) -> Any: ...

    def targets(self, ctx: Context, spec: Any, where: str) -> list[dict[str, Any]]: ...

    def prepare(self, ctx: Context, spec: Any, target: dict[str, Any], fault_id: str) -> dict[str, Any]: ...

    def disrupts(self, spec: Any, target: dict[str, Any]) -> Disruption: ...

    def apply(self, ctx: Context, spec: Any, target: dict[str, Any], undo: dict[str, Any]) -> dict[str, Any]: ...

    def revert(self, ctx: Context, undo: dict[str, Any]) -> None: ...


@functools.cache
def registry() -> dict[str, FaultKind]:
    """Every fault kind, by name: each module of this package (but the shared `_` ones) declares
    the kinds it holds in `SCHEMAS`. Sorted by kind, as the reference lists them."""
    modules = [importlib.import_module(f"{__name__}.{m.name}") for m in pkgutil.iter_modules(__path__)
               if not m.name.startswith("_")]
    lacking = [m.__name__ for m in modules if not isinstance(m, FaultKind)]
    if lacking:
        raise TypeError(f"not a fault kind (chaos.faults.FaultKind): {', '.join(lacking)}")
    kinds: dict[str, FaultKind] = {kind: module for module in modules for kind in module.SCHEMAS}
    return dict(sorted(kinds.items()))


def kind_module(kind: Any, where: str) -> FaultKind:
    kinds = registry()
    if kind not in kinds:
        raise SpecError(f"{where}.kind: unknown fault kind {kind!r}; expected one of {', '.join(sorted(kinds))}")
    return kinds[kind]


__all__ = ["Context", "Disruption", "FaultKind", "Look", "kind_module", "registry"]
