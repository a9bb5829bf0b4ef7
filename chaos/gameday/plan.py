"""A game-day plan: a YAML file naming experiments to run in order, with pauses and approval
gates between them, inside a time window (chaos/gameday/__init__.py shows the format).

`load(path)` reads and checks it all before anything runs: every field of the plan, and every
experiment it names, loaded by the strict runner's own `chaos.run.load` with the step's vars. Every
problem is reported at once, as `<plan file>: steps[2].timeout: required: ...`, in one SpecError.
"""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from chaos import input_file, run
from chaos.errors import SpecError
from chaos.gameday import window as windows
from chaos.gameday._check import Problems, shown
from chaos.gameday.window import Window

KINDS = ("experiment", "pause", "approve")
VIAS = ("terminal", "configmap")
_TOP = {"title": "what the game day is, in a line", "steps": "the list of steps: experiment, pause or approve"}
_TOP_OPTIONAL = ("description", "notes", "window", "control")
_STEP_OPTIONAL = ("name", "note")
_FIELDS = {"experiment": ("experiment", "vars", "continue_on_failure", *_STEP_OPTIONAL),
           "pause": ("pause", *_STEP_OPTIONAL),
           "approve": ("approve", "via", "configmap", *_STEP_OPTIONAL)}
_REQUIRED = {"approve": {"timeout": "how many seconds the gate waits for its answer before the game day is "
                                    "aborted (above 0)"}}


@dataclass(frozen=True)
class ConfigMapRef:
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, kw_only=True)
class Step(ABC):
    index: int  # in the plan, from 0 (steps[index] in messages)
    name: str = ""
    note: str = ""  # for the facilitator

    @property
    def id(self) -> str:
        """How people and a gate's ConfigMap name the step: step-1 is steps[0]."""
        return f"step-{self.index + 1}"

    kind: ClassVar[str]

    @abstractmethod
    def describe(self) -> str:
        """What the step does, in a line."""

    @property
    def label(self) -> str:
        return self.name or self.describe()


@dataclass(frozen=True, kw_only=True)
class ExperimentStep(Step):
    path: Path  # the plan's folder joined with `written`
    written: str  # as the plan gives it
    variables: tuple[str, ...] = ()  # the runner's --var KEY[:TYPE]=VALUE strings
    continue_on_failure: bool = False

    kind: ClassVar[str] = "experiment"

    def describe(self) -> str:
        return f"experiment {self.written}" + (f" ({', '.join(self.variables)})" if self.variables else "")


@dataclass(frozen=True, kw_only=True)
class PauseStep(Step):
    seconds: float

    kind: ClassVar[str] = "pause"

    def describe(self) -> str:
        return f"pause {self.seconds:g} s"


@dataclass(frozen=True, kw_only=True)
class ApproveStep(Step):
    what: str  # what the facilitator confirms
    timeout: float
    via: str = "terminal"
    config_map: ConfigMapRef | None = None  # with via: configmap

    kind: ClassVar[str] = "approve"

    def describe(self) -> str:
        return f"approve: {self.what}"


@dataclass(frozen=True)
class Plan:
    path: Path
    title: str
    steps: tuple[Step, ...]
    description: str = ""
    notes: str = ""
    window: Window | None = None
    control: ConfigMapRef | None = None  # annotation kilocard.io/abort: "true" on it aborts the rest
    sha256: str = ""
    data: dict[str, Any] = field(default_factory=dict, compare=False)  # as read (schedule rewrites it)

    @property
    def config_maps(self) -> tuple[ConfigMapRef, ...]:
        """Every ConfigMap the game day reads: the gates' and the control."""
        gates = [s.config_map for s in self.steps if isinstance(s, ApproveStep) and s.config_map is not None]
        return tuple(dict.fromkeys([*gates, *([self.control] if self.control else [])]))


def load(path: Path, variables: Sequence[str] = ()) -> Plan:
    """Read and check a plan, and every experiment it names (`variables`: the command line's
    --var strings, which the run passes after each step's own). Raises SpecError with every
    problem, one a line."""
    where = str(path)
    raw_bytes = input_file.raw(path)
    data = input_file.parse(raw_bytes, where, as_json=path.suffix == ".json")
    problems = Problems()
    top = problems.fields("", data, _TOP_OPTIONAL, _TOP)
    plan = None
    if top is not None:
        title = problems.text("title", top["title"]) if "title" in top else None
        texts = {k: problems.text(k, top[k]) or "" for k in ("description", "notes") if k in top}
        window = windows.parse(top["window"], "window", problems) if "window" in top else None
        control = problems.config_map("control", top["control"]) if "control" in top else None
        steps = _steps(top.get("steps"), path.parent, variables, problems) if "steps" in top else []
        plan = Plan(path, title or "", tuple(steps), window=window,
                    control=ConfigMapRef(*control) if control else None,
                    sha256=hashlib.sha256(raw_bytes).hexdigest(), data=top, **texts)
    if problems.lines or plan is None:
        raise SpecError("\n".join(f"{where}: {line}" for line in problems.lines))
    return plan


def _steps(value: Any, folder: Path, variables: Sequence[str], problems: Problems) -> list[Step]:
    if not isinstance(value, list) or not value:
        problems.add("steps", f"expected a list of steps (experiment, pause or approve), got {shown(value)}")
        return []
    found = [_step(i, raw, folder, variables, problems) for i, raw in enumerate(value)]
    return [s for s in found if s is not None]


def _step(index: int, value: Any, folder: Path, variables: Sequence[str], problems: Problems) -> Step | None:
    where = f"steps[{index}]"
    kinds = [k for k in KINDS if k in value] if isinstance(value, Mapping) else []
    if len(kinds) != 1:
        got = shown(value) if not isinstance(value, Mapping) else " and ".join(kinds) or "none"
        problems.add(where, f"expected a step with exactly one of {', '.join(KINDS)}; got {got}")
        return None
    kind = kinds[0]
    raw = dict(value)
    problems.fields(where, raw, _FIELDS[kind], _REQUIRED.get(kind))
    before = len(problems.lines)
    common = {k: problems.text(f"{where}.{k}", raw[k]) or "" for k in _STEP_OPTIONAL if k in raw}
    step: Step | None
    if kind == "experiment":
        step = _experiment(index, raw, where, folder, variables, problems, common)
    elif kind == "pause":
        seconds = problems.seconds(f"{where}.pause", raw["pause"])
        step = PauseStep(index=index, seconds=seconds, **common) if seconds is not None else None
    else:
        step = _approve(index, raw, where, problems, common)
    return step if len(problems.lines) == before else None


def _experiment(index: int, raw: dict[str, Any], where: str, folder: Path, variables: Sequence[str],
                problems: Problems, common: dict[str, str]) -> ExperimentStep | None:
    written = problems.text(f"{where}.experiment", raw["experiment"])
    given = raw.get("vars", {})
    own = _vars(given, f"{where}.vars", problems)
    keep_going = problems.boolean(f"{where}.continue_on_failure", raw["continue_on_failure"]) \
        if "continue_on_failure" in raw else False
    if written is None:
        return None
    path = folder / written
    if not path.is_file():
        problems.add(f"{where}.experiment", f"no such file: {path}")
        return None
    if own is None or keep_going is None:
        return None
    try:  # the strict runner's own checks, with the vars this step will run with
        run.load(path, [*own, *variables])
    except SpecError as exc:
        for line in str(exc).splitlines():
            problems.add(f"{where}.experiment", line)
        return None
    configuration = input_file.read(path).get("configuration") or {}
    keys = ", ".join(sorted(configuration)) or "(none: it has no configuration)"
    for key in given:
        if key not in configuration:
            problems.add(f"{where}.vars.{key}", f"not in the configuration of {path}; expected one of {keys}")
    return ExperimentStep(index=index, path=path, written=written, variables=tuple(own),
                          continue_on_failure=keep_going, **common)


def _vars(value: Any, where: str, problems: Problems) -> list[str] | None:
    """`{key: value}` as the runner's --var strings, typed so a number stays a number."""
    if not isinstance(value, Mapping):
        problems.add(where, f"expected a mapping of configuration keys to values, got {shown(value)}")
        return None
    found = []
    for key, v in value.items():
        if not isinstance(key, str) or not key or "=" in key or ":" in key:
            problems.add(f"{where}.{key}", "expected a configuration key (text without '=' or ':')")
        elif isinstance(v, bool) or not isinstance(v, str | int | float):
            problems.add(f"{where}.{key}", f"expected text or a number, got {shown(v)}")
        else:
            kind = "" if isinstance(v, str) else f":{type(v).__name__}"
            found.append(f"{key}{kind}={v}")
    return found if len(found) == len(value) else None


def _approve(index: int, raw: dict[str, Any], where: str, problems: Problems,
             common: dict[str, str]) -> ApproveStep | None:
    what = problems.text(f"{where}.approve", raw["approve"])
    timeout = problems.seconds(f"{where}.timeout", raw["timeout"]) if "timeout" in raw else None
    via = raw.get("via", "terminal")
    if via not in VIAS:
        problems.add(f"{where}.via", f"expected one of {', '.join(VIAS)}, got {shown(via)}")
        return None
    config_map = None
    if via == "configmap":
        if "configmap" not in raw:
            problems.add(f"{where}.configmap", "required with via: configmap: {namespace, name} of the ConfigMap "
                                               "whose annotation kilocard.io/approved approves the gate")
        else:
            found = problems.config_map(f"{where}.configmap", raw["configmap"])
            config_map = ConfigMapRef(*found) if found else None
    elif "configmap" in raw:
        problems.add(f"{where}.configmap", "only with via: configmap (this gate is answered at the terminal)")
    if what is None or timeout is None or (via == "configmap" and config_map is None):
        return None
    return ApproveStep(index=index, what=what, timeout=timeout, via=via, config_map=config_map, **common)
