"""Reading a fault's spec from plain data, with errors that name the field (`faults[2].ttl_seconds:
expected ...`). Kinds build their frozen Spec dataclasses from these readers."""

from __future__ import annotations

import builtins
import math
import re
from typing import Any

from chaos.agent.protocol import MAX_TTL_SECONDS
from chaos.errors import SpecError
from chaos.targets import NodeSelection

_MISSING = object()
MAX_CARD = 1023
# Kubernetes label selector syntax (apimachinery labels.Parse): requirements joined by commas.
_NAME = r"[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_KEY = rf"(?:[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*/)?{_NAME}"
_VALUE = rf"(?:{_NAME})?"
_REQUIREMENT = re.compile(
    rf"^\s*(?:!\s*{_KEY}|{_KEY}(?:\s*(?:==|=|!=)\s*{_VALUE}"
    rf"|\s+(?:in|notin)\s*\(\s*{_VALUE}(?:\s*,\s*{_VALUE})*\s*\)|\s*[<>]\s*-?\d+)?)\s*$")


def selector_problem(text: str) -> str | None:
    """The first requirement of a label selector that is not valid syntax, or None. (The
    apiserver would refuse it too, but only once the run has started.)"""
    parts, depth, current = [], 0, ""
    for char in text:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    return next((part.strip() for part in parts if not _REQUIREMENT.match(part)), None)


class Fields:
    """Reads fields off one mapping; `done()` refuses fields nobody asked for (typos)."""

    def __init__(self, raw: Any, where: str) -> None:
        if not isinstance(raw, dict):
            raise SpecError(f"{where}: expected a mapping of fields, got {type(raw).__name__}")
        self.raw = raw
        self.where = where
        self.seen: set[str] = set()

    def fail(self, name: str, expected: str, value: Any) -> SpecError:
        """The error for a field: where, what was expected, what was given."""
        return SpecError(f"{self.where}.{name}: expected {expected}, got {value!r}")

    def has(self, name: str) -> bool:
        return name in self.raw

    def str(self, name: str, default: Any = _MISSING, choices: tuple[str, ...] | None = None) -> Any:
        value = self.value(name, default)
        if value is default and default is not _MISSING:
            return value
        if not isinstance(value, str) or not value:
            raise self.fail(name, "a non-empty string", value)
        if choices and value not in choices:
            raise self.fail(name, f"one of {', '.join(choices)}", value)
        return value

    def selector(self, name: builtins.str, default: Any = _MISSING) -> Any:
        value = self.str(name, default)
        bad = None if value is default and default is not _MISSING else selector_problem(value)
        if bad is not None:
            part = "" if bad == value.strip() else f" ({bad!r} is not)"
            raise self.fail(name, f"a label selector like 'a=b,c!=d,e in (f,g),!h'{part}", value)
        return value

    def int(self, name: builtins.str, default: Any = _MISSING, low: builtins.int = 0,
            high: builtins.int = 2**31) -> Any:
        value = self.value(name, default)
        if value is default and default is not _MISSING:
            return value
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise self.fail(name, f"an integer from {low} to {high}", value)
        return value

    def number(self, name: builtins.str, default: Any = _MISSING, low: float = 0.0, high: float = math.inf,
               low_open: bool = False) -> Any:
        value = self.value(name, default)
        if value is default and default is not _MISSING:
            return value
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and not math.isnan(value)
        if not ok or value > high or value < low or (low_open and value == low):
            bound = f"above {low:g}" if low_open else f"from {low:g}"
            raise self.fail(name, f"a number {bound}{'' if high == math.inf else f' to {high:g}'}", value)
        return float(value)

    def bool(self, name: builtins.str, default: bool = False) -> bool:
        value = self.value(name, default)
        if not isinstance(value, bool):
            raise self.fail(name, "true or false", value)
        return value

    def str_list(self, name: builtins.str, default: Any = _MISSING) -> Any:
        value = self.value(name, default)
        if value is default and default is not _MISSING:
            return value
        if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
            raise self.fail(name, "a non-empty list of strings", value)
        return value

    def cards(self, name: builtins.str) -> tuple[builtins.int, ...]:
        """A non-empty list of distinct card indices, in the order given."""
        value = self.value(name, _MISSING)
        if not isinstance(value, list) or not value or not all(
                isinstance(c, int) and not isinstance(c, bool) and 0 <= c <= MAX_CARD for c in value):
            raise self.fail(name, f"a non-empty list of card indices (0 to {MAX_CARD})", value)
        twice = sorted({c for c in value if value.count(c) > 1})
        if twice:
            raise SpecError(f"{self.where}.{name}: card {twice[0]} listed twice")
        return tuple(value)

    def card_or_cards(self) -> tuple[builtins.str, tuple[builtins.int, ...]]:
        """`card: 3` or `cards: [3, 5]`, exactly one of the two: (the field given, the indices)."""
        if self.has("card") == self.has("cards"):
            raise self.fail("card", "a card index, or a list of them as 'cards' (one of the two)", self.raw.get("card"))
        if self.has("card"):
            return "card", (self.int("card", high=MAX_CARD),)
        return "cards", self.cards("cards")

    def ttl(self) -> float:
        """Every revertible fault expires where it lives; a missing TTL is an error, not a default."""
        if not self.has("ttl_seconds"):
            raise SpecError(f"{self.where}.ttl_seconds: required (every fault expires; at most {MAX_TTL_SECONDS})")
        return float(self.number("ttl_seconds", low=0, high=MAX_TTL_SECONDS, low_open=True))

    def blast_radius(self) -> tuple[builtins.int | None, float | None]:
        count = self.int("count", None, low=1, high=100_000)
        percent = self.number("percent", None, low=0, high=100, low_open=True)
        if count is not None and percent is not None:
            raise SpecError(f"{self.where}: give either count or percent, not both")
        return count, percent

    def nodes(self) -> NodeSelection:
        """`nodes: [names]`, `node_selector`, or `nodes_of: {namespace, label_selector}` (the
        nodes those pods are on), with an optional count/percent and seed."""
        names = self.str_list("nodes", None)
        selector = self.selector("node_selector", None)
        pods = self._nodes_of()
        if sum(x is not None for x in (names, selector, pods)) != 1:
            raise self.fail("nodes", "one of: a list of node names, a node_selector, or nodes_of "
                                      "{namespace, label_selector}", names)
        count, percent = self.blast_radius()
        return NodeSelection(tuple(names) if names else None, selector, count, percent,
                             self.int("seed", None, high=2**62), pods)

    def _nodes_of(self) -> tuple[builtins.str | None, builtins.str] | None:
        raw = self.value("nodes_of", None)
        if raw is None:
            return None
        inner = Fields(raw, f"{self.where}.nodes_of")
        found = inner.str("namespace", None), inner.selector("label_selector")
        inner.done()
        return found

    def value(self, name: builtins.str, default: Any) -> Any:
        """The field as given, unchecked (marked as read); required when there is no default."""
        self.seen.add(name)
        if name in self.raw:
            return self.raw[name]
        if default is _MISSING:
            raise SpecError(f"{self.where}.{name}: required")
        return default

    def done(self) -> None:
        unknown = sorted(set(self.raw) - self.seen)
        if unknown:
            raise SpecError(f"{self.where}: unknown field {unknown[0]!r}; "
                            f"expected one of {', '.join(sorted(self.seen))}")
