"""The one reader of every file kilocard takes as input: experiments, fault files, game-day plans,
incident timelines, a folder's order, a recording's mapping, the settings a run reads.

A file in a pull request must not cost a CI runner more than it is worth, nor hide a value:
- at most LIMIT_BYTES;
- aliases are expanded into at most LIMIT_VALUES values, and nest at most LIMIT_DEPTH deep (YAML's
  aliases share one object, so a 1 KB "billion laughs" file parses at once and then costs gigabytes
  in whatever walks it: a schema check, a substitution, a copy, a journal);
- a key given twice in one mapping is refused, naming both lines (YAML's loaders keep the last one
  silently: `budget_seconds: 60` and, further down, `budget_seconds: 600` ran with 600);
- `.inf` and `.nan` are refused: every number kilocard reads is a time, a count, a threshold or a
  fraction, and none of them is infinite.
JSON files (by their suffix) are read as JSON, with the same rules.

Every refusal is a SpecError naming the file and the line: exit 2, nothing applied.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import yaml

from chaos.errors import SpecError

LIMIT_BYTES = 1024 * 1024  # the catalog's largest file is 12 KB; a recorded day of incidents, tens of KB
LIMIT_VALUES = 200_000  # values with every alias expanded: the catalog's largest file has about 300
LIMIT_DEPTH = 64  # mappings and lists inside each other: the catalog nests 8 deep

_Base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's parser when PyYAML was built with it
_FLOAT = "tag:yaml.org,2002:float"
_MERGE = "tag:yaml.org,2002:merge"


class _Loader(_Base):  # type: ignore[misc,valid-type]  # the base is chosen at import
    """YAML's safe loader, refusing a key given twice and a number that is not finite."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        first: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == _MERGE:  # `<<: *base` merges; a key given beside it overrides, as meant
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                line = first.setdefault(key, key_node.start_mark.line + 1)
            except TypeError:  # an unhashable key: the base constructor says what is wrong with it
                continue
            if line != key_node.start_mark.line + 1:
                raise _Refused(f"line {key_node.start_mark.line + 1}: key {key!r} is given twice "
                               f"(first at line {line}); say it once")
        return super().construct_mapping(node, deep)  # type: ignore[no-any-return]

    def construct_finite_float(self, node: yaml.ScalarNode) -> float:
        value = self.construct_yaml_float(node)
        if not math.isfinite(value):
            raise _Refused(f"line {node.start_mark.line + 1}: {node.value!r} is not a finite number "
                           "(a time, a count or a threshold is one)")
        return float(value)


_Loader.add_constructor(_FLOAT, _Loader.construct_finite_float)


class _Refused(Exception):
    """Why the file is refused, without its name (read() adds it)."""


def read(path: Path) -> Any:
    """The file's one document (None when empty). SpecError when it cannot be read or is refused."""
    return parse(raw(path), str(path), as_json=path.suffix == ".json")


def raw(path: Path) -> bytes:
    """The file's bytes, if it is a file of at most LIMIT_BYTES; SpecError if not."""
    where = str(path)
    try:
        if not path.is_file():
            raise SpecError(f"{where}: no such file")
        size = path.stat().st_size
        if size > LIMIT_BYTES:
            raise SpecError(f"{where}: {size} bytes, over the {LIMIT_BYTES} a file kilocard reads may have")
        return path.read_bytes()
    except OSError as exc:  # a name too long to look up, a folder, a file it may not read
        raise SpecError(f"{where[:200]}{'...' if len(where) > 200 else ''}: cannot read it: {exc.strerror}") from None


def parse(raw: bytes | str, where: str, as_json: bool = False) -> Any:
    """`raw` as one YAML (or JSON) document, by the rules above; `where` names it in errors."""
    if len(raw) > LIMIT_BYTES:
        raise SpecError(f"{where}: {len(raw)} bytes, over the {LIMIT_BYTES} a file kilocard reads may have")
    try:
        return _json(raw) if as_json else _yaml(raw)
    except _Refused as exc:
        raise SpecError(f"{where}: {exc}") from None
    except UnicodeDecodeError as exc:
        raise SpecError(f"{where}: not UTF-8 text (byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise SpecError(f"{where}: not valid JSON: line {exc.lineno}: {exc.msg}") from None
    except yaml.YAMLError as exc:
        raise SpecError(f"{where}: not valid YAML: {_said(exc)}") from None


def _said(exc: yaml.YAMLError) -> str:
    """The parser's problem where it found it, and what it was reading, from where."""
    if not isinstance(exc, yaml.MarkedYAMLError) or exc.problem is None:
        return str(exc).splitlines()[0]
    said = exc.problem + (f" (line {exc.problem_mark.line + 1}, column {exc.problem_mark.column + 1})"
                          if exc.problem_mark is not None else "")
    if exc.context and exc.context_mark is not None:
        said += f", {exc.context} from line {exc.context_mark.line + 1}, column {exc.context_mark.column + 1}"
    return said


def _yaml(raw: bytes | str) -> Any:
    loader = _Loader(raw)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _bounded(node)
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _bounded(root: yaml.Node) -> None:
    """Refuse a document whose aliases expand past LIMIT_VALUES values or LIMIT_DEPTH levels, or
    that holds itself. Linear in the nodes as written: each node's expanded size is counted once."""
    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    open_: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        children = _children(node)
        if done:
            open_.discard(key)
            size[key] = 1 + sum(size[id(c)] for c in children)
            depth[key] = 1 + max((depth[id(c)] for c in children), default=0)
            if size[key] > LIMIT_VALUES:
                raise _Refused(f"line {node.start_mark.line + 1}: its aliases expand to more than {LIMIT_VALUES} "
                               "values; write the values out, or fewer times")
            if depth[key] > LIMIT_DEPTH:
                raise _Refused(f"line {node.start_mark.line + 1}: nested more than {LIMIT_DEPTH} levels deep")
            continue
        if key in size:
            continue
        if key in open_:
            raise _Refused(f"line {node.start_mark.line + 1}: an alias refers to a value that holds it")
        open_.add(key)
        stack.append((node, True))
        stack.extend((c, False) for c in children if id(c) not in size)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def _json(raw: bytes | str) -> Any:
    text = raw.decode() if isinstance(raw, bytes) else raw
    return json.loads(text, object_pairs_hook=_pairs, parse_constant=_constant)


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _Refused(f"key {key!r} is given twice in one object; say it once")
        out[key] = value
    return out


def _constant(name: str) -> float:
    raise _Refused(f"{name} is not a finite number (a time, a count or a threshold is one)")
