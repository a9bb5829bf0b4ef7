"""The fields of kilocard's input: how a schema is declared (JSON Schema, draft 2020-12, built by
the small functions below), the one validator every schema is checked with, and its errors in
plain English, each naming its field (`faults[2].grace_seconds: expected an integer from 0 to
3600, got 'x'`).

Each kind of input declares its schema beside the code that uses it (a fault kind's module, the
guards, the stop conditions, the load block); `read(schema, raw, where)` checks a value against
it and returns its fields with their defaults, so what is accepted, and what a field defaults
to, is written once. chaos.schemas assembles the declarations into the reference and the
editors' JSON Schema.
"""

from __future__ import annotations

import copy
import ipaddress
import math
import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from jsonschema import Draft202012Validator, FormatChecker, ValidationError, validators

from chaos.agent.kinds.io_throttle import DEVICE
from chaos.agent.kinds.pull_block import REGISTRY
from chaos.errors import SpecError
from probes import slo

Schema = dict[str, Any]
# The examples' names, in every part of the reference.
NAMESPACE = "kilocard-fleet"
MODEL = "llama-3-70b"
MODEL_MEANING = "the model: label kilocard.io/model, or the name its serving stack serves it under (kilocard discover)"

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


# --- validation: JSON's types as the parsers read them ---------------------------------------------
_TYPES = Draft202012Validator.TYPE_CHECKER.redefine_many({
    "integer": lambda _c, v: isinstance(v, int) and not isinstance(v, bool),  # 1.0 is not an integer
    "number": lambda _c, v: isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v),
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
INTERFACE, NETNS, CARD_PATTERN = r"^[A-Za-z0-9_.:-]{1,15}$", r"^[A-Za-z0-9_.-]{1,64}$", r"\{card\}"
API_ROOT = r"^(?!.*/v1/?$)https?://[^/?#]+(/[^?#]*)?$"
_PATTERN_WORDS = {INTERFACE: "an interface name (up to 15 letters, digits or _.:-)",
                  NETNS: "a network namespace name (up to 64 letters, digits or _.-)",
                  CARD_PATTERN: "a pattern containing {card}",
                  API_ROOT: "an http:// or https:// URL of the API's root (without /v1)",
                  f"^(?:{REGISTRY})$": "a registry name like docker.io, nvcr.io or harbor.internal:5000",
                  f"^(?:{DEVICE})$": "a block device as MAJ:MIN like 259:0"}


# --- building blocks ------------------------------------------------------------------------------
def described(schema: Schema, description: str, default: Any, example: Any) -> Schema:
    found = {**schema, "description": description}
    if default is not None:
        found["default"] = default
    if example is not None:
        found["examples"] = [example]
    return found


def text(description: str, default: str | None = None, example: str | None = None) -> Schema:
    return described({"type": "string", "minLength": 1}, description, default, example)


def selector(description: str, example: str) -> Schema:
    return described({"type": "string", "minLength": 1, "format": "label-selector"}, description, None, example)


def choice(choices: Iterable[str], description: str, default: str | None = None) -> Schema:
    return described({"enum": list(choices)}, description, default, None)


def integer(low: int, high: int, description: str, default: int | None = None, example: int | None = None) -> Schema:
    return described({"type": "integer", "minimum": low, "maximum": high}, description, default, example)


def number(low: float, high: float, description: str, default: float | None = None, example: float | None = None,
           above: bool = False) -> Schema:
    bounds: Schema = {"exclusiveMinimum" if above else "minimum": low}
    if high != math.inf:
        bounds["maximum"] = high
    return described({"type": "number", **bounds}, description, default, example)


def duration(description: str, default: str | None = None, example: str | None = None) -> Schema:
    return described({"type": "string", "format": "prometheus-duration"}, description, default, example)


def boolean(description: str, default: bool) -> Schema:
    return {"type": "boolean", "description": description, "default": default}


def strings(description: str, example: list[str], items: Schema | None = None) -> Schema:
    return described({"type": "array", "minItems": 1, "items": items or {"type": "string", "minLength": 1}},
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


# --- errors in plain English ----------------------------------------------------------------------
def types_of(schema: Schema) -> list[str]:
    found = schema.get("type", [])
    return [t for t in ([found] if isinstance(found, str) else found) if t != "null"]


def bound(schema: Schema, show: Callable[[Any], str]) -> str:
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
    kind = (types_of(schema) or [""])[0]
    if kind == "string":
        if "format" in schema:
            return _FORMAT_WORDS[schema["format"]]
        if "pattern" in schema:
            return _PATTERN_WORDS[schema["pattern"]]
        return "a non-empty string" if schema.get("minLength") else "a string"
    if kind == "integer":
        return "an integer" + bound(schema, str)
    if kind == "number":
        return "a number" + bound(schema, lambda x: f"{x:g}")
    if kind == "boolean":
        return "true or false"
    if kind == "array":
        items = schema.get("items")
        each = f", each {expected(items)}" if items else ""
        return f"a {'non-empty ' if schema.get('minItems') else ''}list{each}" + (
            ", none twice" if schema.get("uniqueItems") else "")
    if kind == "object":
        return "a non-empty mapping" if schema.get("minProperties") else "a mapping"
    return "a value"


def _path(parts: Iterable[str | int], where: str = "") -> str:
    found = where
    for part in parts:
        if isinstance(part, int):
            found += f"[{part}]"
        elif not part or any(c.isspace() or c in ".[]'\"" for c in part) or not part.isprintable():
            found += f"[{part!r}]"  # a key that would not read as one: quoted
        else:
            found += f"{'.' if found else ''}{part}"
    return found


def rule_fields(rule: Schema) -> list[str]:
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


def _say(error: ValidationError, where: str, texts: dict[str, str] | None = None) -> Iterator[str]:
    path, schema, value = _path(error.absolute_path, where), error.schema, error.instance
    if error.validator == "required":
        for name in error.validator_value:
            if name not in value:
                inner = schema.get("properties", {}).get(name, {})
                needs = f" with {', '.join(inner['required'])}" if inner.get("required") else ""  # params: {xid}
                yield f"{_path([*error.absolute_path, name], where)}: required: expected {expected(inner)}{needs}"
    elif error.validator == "additionalProperties":
        known = sorted(schema.get("properties", {}))
        for name in sorted(set(value) - set(known), key=str):
            unknown = f"unknown field {name!r}" if path else f"unknown argument {name!r}"
            yield f"{path + ': ' if path else ''}{unknown}; " + (
                f"expected one of {', '.join(known)}" if known else "expected none")
    elif error.validator == "uniqueItems":
        twice = next(v for i, v in enumerate(value) if v in value[:i])
        yield f"{path}: {twice!r} listed twice; expected {expected(schema)}"
    elif error.validator in ("oneOf", "anyOf", "not"):  # a rule across fields: named by its first
        if not isinstance(value, dict):
            return  # not a mapping: its type's error says so
        names = rule_fields(schema)
        got = {k: value[k] for k in names if value.get(k) is not None} or "nothing"
        if error.validator == "not":
            yield f"{path + ': ' if path else ''}{schema['description']}, got {got}"
        else:
            yield f"{_path([*error.absolute_path, names[0]], where)}: expected {schema['description']}, got {got}"
    else:
        kinds = types_of(schema) if error.validator == "type" else []
        hint = as_text(value, integer="number" not in kinds, texts=texts) if {"number", "integer"} & set(kinds) else ""
        yield f"{path or 'arguments'}: expected {expected(schema)}, got {value!r}{hint}"


def errors(schema: Schema, value: Any, where: str = "", texts: dict[str, str] | None = None) -> list[str]:
    """Every way `value` breaks `schema`, each naming its field after `where`, in plain English (a
    number given as text says so; `texts`, text value -> the --var key that gave it, names the key)."""
    found = [m for e in Validator(schema, format_checker=FORMATS).iter_errors(value) for m in _say(e, where, texts)]
    return list(dict.fromkeys(found))


def read(schema: Schema, raw: Any, where: str) -> dict[str, Any]:
    """`raw`'s fields as `schema` declares them (`filled`); SpecError says every error at once,
    each naming its field."""
    said = errors(schema, raw, where)
    if said:
        raise SpecError("\n".join(said))
    return filled(schema, raw)


def filled(schema: Schema, raw: dict[str, Any]) -> dict[str, Any]:
    """`raw`, which `schema` accepts, with every property: given or its default (None where it has
    none), a number as a float, a mapping as given."""
    return {name: _value(declared, raw[name] if name in raw else copy.deepcopy(declared.get("default")))
            for name, declared in schema["properties"].items()}


def _value(declared: Schema, value: Any) -> Any:
    return float(value) if "number" in types_of(declared) and isinstance(value, int) else value


