"""Stop conditions: checks that run beside the method and end the run when the cluster goes past
a hard limit. The run is interrupted, its faults are reverted from the ledger, and `kilocard run`
exits 3. Missing data is a breach, never healthy: a condition that cannot look fires.

    zero-ready   a model left with no Ready replica (TP groups whole and Ready)
    unhealthy    more than `max` of a model's replica pods not Ready (Pending ones included)
    slo          a model's indicator (ttft_p95, itl_p95, error_ratio) past a hard `limit`, on its
                 worst replica; no series at all counts as past it, and so does a replica Ready
                 for twice the window whose lead exports none (it completes nothing)
    hung-group   a replica of the model Ready for `window` that finished nothing over it while the
                 model had demand, or whose lead exports no series (probes/hung.py); no series for
                 the model, or no demand, counts as hung

Declared as a Chaos Toolkit control (plain `chaos run` honours it too):

    controls:
    - name: stop-conditions
      provider:
        type: python
        module: chaos.stop
        arguments:
          every_seconds: 2
          conditions:
          - {kind: zero-ready, model: llama-3-70b, namespace: kilocard-fleet}
          - {kind: slo, model: llama-3-70b, indicator: ttft_p95, limit: 5.0}
          - {kind: hung-group, model: llama-3-70b, window: 30s}
"""

from __future__ import annotations

import linecache
import math
import os
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from chaoslib.exceptions import InvalidActivity
from chaoslib.exit import exit_gracefully

from chaos.errors import KilocardError, SpecError
from chaos.fields import (
    MODEL,
    MODEL_MEANING,
    NAMESPACE,
    Schema,
    choice,
    described,
    duration,
    filled,
    integer,
    mapping,
    number,
    optional,
    read,
    text,
    union,
)
from chaos.judgement import STOP_KEY
from chaos.settings import Settings as RunSettings
from chaos.vocabulary import quiet_thread
from probes import hung, slo
from probes import snapshot as snap
from probes.snapshot import ClusterSnapshot, whole_and_ready
from probes.verdict import Contract

MODULE = "chaos.stop"
EVERY_SECONDS = 2.0
INDICATORS = ("ttft_p95", "itl_p95", "error_ratio")
PER_REPLICA = ("ttft_p95", "itl_p95")  # error_ratio is the gateway's, per model
BLIND = "a stop condition treats that as a breach"  # how a condition that could not look says it fired


_EVERY = "the method's start: checked every `every_seconds` until the method ends"
_RAISED = ("any exception while checking (a bug, an odd label) fires, blind: a run is never left unguarded; a "
           "stop that fired blind never meets an expected abort")
CONTRACTS = (
    Contract("zero-ready", "stop condition",
             asserts="fires when the model has no Ready replica (a TP group whole and every member Ready)",
             time_zero=_EVERY, interval="one snapshot each check",
             missing="the cluster not read: fires, blind; the model's pods not found: fires",
             exceptions=_RAISED, outcomes=(("fired", "no Ready replica, or blind"), ("quiet", "one is Ready")),
             judge=("chaos.stop.breach",)),
    Contract("unhealthy", "stop condition",
             asserts="fires when more than `max` of the model's pods are not Ready (Pending ones included)",
             time_zero=_EVERY, interval="one snapshot each check",
             missing="the cluster not read: fires, blind", exceptions=_RAISED,
             outcomes=(("fired", "too many not Ready, or blind"), ("quiet", "within max")),
             judge=("chaos.stop.breach",)),
    Contract("slo", "stop condition",
             asserts="fires when the indicator's worst series is past the hard `limit`, or (per replica) a group "
                     "wholly Ready for twice the window has a lead exporting no series",
             time_zero=_EVERY, interval="one instant query over `window` each check",
             missing="no series at all, a failed query, or the cluster not read while under the limit: fires, "
                     "blind; a replica that vanished with its pod does not count",
             exceptions=_RAISED, outcomes=(("fired", "past the limit, silent, or blind"), ("quiet", "under it")),
             judge=("chaos.stop.breach", "chaos.stop._silent")),
    Contract("hung-group", "stop condition",
             asserts="fires when no_hung_groups would fail: a replica hung, or nothing to judge",
             time_zero=_EVERY, interval="the window W ending at each check",
             missing="no figures from Prometheus, the cluster not read, or the verdict unknown: fires, blind",
             exceptions=_RAISED, outcomes=(("fired", "hung, or blind"), ("quiet", "every replica progressing")),
             judge=("chaos.stop.breach", "probes.hung.judge")),
)


@dataclass(frozen=True)
class Condition:
    kind: str
    model: str
    namespace: str | None = None
    max: int = 0  # unhealthy
    indicator: str = "ttft_p95"  # slo
    limit: float = 0.0
    window: str = "30s"  # slo, hung-group

    def describe(self) -> str:
        scope = f"{self.model}{' in ' + self.namespace if self.namespace else ''}"
        return {"zero-ready": f"zero-ready {scope}", "unhealthy": f"unhealthy {scope} > {self.max}",
                "slo": f"slo {self.indicator} {scope} > {self.limit:g}",
                "hung-group": f"hung-group {scope} over {self.window}"}[self.kind]


@dataclass(frozen=True)
class Settings:
    every_seconds: float
    conditions: tuple[Condition, ...]


def _condition(kind: str, description: str, properties: dict[str, Schema], required: list[str],
               example: dict[str, Any]) -> Schema:
    return mapping(kind, description, {"kind": {"const": kind, "description": "the condition's kind"},
                                       "model": text(MODEL_MEANING, example=MODEL),
                                       "namespace": optional(text("the model's namespace (default: every namespace)",
                                                                  example=NAMESPACE)), **properties},
                   ["kind", "model", *required], example={"kind": kind, "model": MODEL, **example})


CONDITIONS: dict[str, Schema] = {
    "zero-ready": _condition("zero-ready", "The model is left with no Ready replica (TP groups whole and Ready).",
                             {}, [], {"namespace": NAMESPACE}),
    "unhealthy": _condition("unhealthy", "More than max of the model's replica pods are not Ready (Pending "
                            "included).", {"max": integer(0, 100_000, "pods not Ready the run tolerates", example=2)},
                            ["max"], {"max": 2}),
    "slo": _condition("slo", "The model's indicator is past a hard limit on its worst replica; no series at all "
                      "counts as past it.",
                      {"indicator": choice(INDICATORS, "what is measured", Condition.indicator),
                       "limit": number(0, math.inf, "the hard limit (seconds, or a ratio for error_ratio)",
                                       example=5.0, above=True),
                       "window": duration("the rate window (PromQL duration)", Condition.window)},
                      ["limit"], {"limit": 5.0}),
    "hung-group": _condition("hung-group", "A replica of the model, all its pods Ready for the window, finished no "
                             "request over it while requests wait in its queue, or its lead exports no series (a "
                             "stalled rank); no series for the model, or no demand at all, counts as hung.",
                             {"window": duration("the window progress is judged over (PromQL duration)",
                                                 Condition.window)}, [], {"window": "30s"}),
}
SCHEMA = mapping(MODULE, "Stop conditions: checks beside the method that end the run (exit 3, faults reverted) when "
                 "the cluster goes past a hard limit; missing data is a breach.", {
                     "every_seconds": number(0.2, 600, "how often the conditions are checked", EVERY_SECONDS),
                     "conditions": described({"type": "array", "minItems": 1,
                                              "items": union("stop condition", "", CONDITIONS)},
                                             "the conditions, any of which stops the run", None,
                                             [CONDITIONS["zero-ready"]["examples"][0]]),
                 }, ["conditions"], example={"every_seconds": 2, "conditions": [
                     CONDITIONS["zero-ready"]["examples"][0], CONDITIONS["slo"]["examples"][0]]})


def settings(arguments: Any, where: str) -> Settings:
    values = read(SCHEMA, arguments if arguments is not None else {}, where)
    return Settings(values["every_seconds"], tuple(
        Condition(**{k: v for k, v in filled(CONDITIONS[c["kind"]], c).items() if v is not None})
        for c in values["conditions"]))


def declared(experiment: dict[str, Any], source: str) -> Settings | None:
    """The stop conditions an experiment declares as this module's control (checked as input)."""
    for i, c in enumerate(experiment.get("controls") or []):
        if isinstance(c, dict) and (c.get("provider") or {}).get("module") == MODULE:
            return settings((c.get("provider") or {}).get("arguments"), f"{source}: controls[{i}].provider.arguments")
    return None


# --- judging (pure) -----------------------------------------------------------------------------
def breach(c: Condition, s: ClusterSnapshot | None,
           found: dict[str, float] | hung.Figures | None | Exception = None, at: float | None = None) -> str | None:
    """Why `c` fires, or None. `s` None: the cluster could not be read; `found`, what the
    condition's query found: (slo) its series and their values, by replica for a per-replica
    indicator; (hung-group) the model's figures; or the error that stopped the query. `at`: now."""
    if isinstance(found, Exception):
        return f"{c.describe()}: no data ({found}): {BLIND}"
    if c.kind == "slo" and isinstance(found, dict) and found:
        name, value = max(found.items(), key=lambda kv: kv[1])
        if value > c.limit:
            return f"{c.describe()}: {name} at {value:.3f}"
    elif c.kind == "slo":
        return f"{c.describe()}: no series: {BLIND}"
    if s is None:
        return f"{c.describe()}: the cluster could not be read: {BLIND}"
    if c.kind == "slo":
        return _silent(c, s, found, at)
    if c.kind == "hung-group":
        if not isinstance(found, hung.Figures):
            return f"{c.describe()}: no figures from Prometheus: {BLIND}"
        verdict = hung.judge(s, found, c.model, c.window, c.namespace)
        if verdict.ok:
            return None
        return f"{c.describe()}: {verdict.reason}" + (f": {BLIND}" if verdict.details["outcome"] == "unknown" else "")
    pods = s.replicas(c.model, c.namespace)
    if c.kind == "unhealthy":
        unready = sorted(p.name for p in pods if not p.ready)
        return f"{c.describe()}: {len(unready)} not Ready ({', '.join(unready[:5])})" if len(unready) > c.max else None
    groups: dict[str, list[Any]] = defaultdict(list)
    for p in pods:
        groups[p.group].append(p)
    whole = any(whole_and_ready(m) for m in groups.values())
    return None if whole else f"{c.describe()}: no Ready replica left"


def _silent(c: Condition, s: ClusterSnapshot, found: Any, at: float | None) -> str | None:
    """A per-replica indicator (`found` keyed by pod) missing the lead of a group wholly Ready for
    twice the window: that replica completes nothing, and the worst of the rest cannot speak for it."""
    if c.indicator not in PER_REPLICA:
        return None
    settled_by = (time.time() if at is None else at) - 2 * slo.seconds(c.window)
    groups: dict[str, list[Any]] = defaultdict(list)
    for p in s.replicas(c.model, c.namespace):
        groups[p.group].append(p)
    silent = sorted(lead.name for members in groups.values()
                    if all(p.ready and (p.ready_since is None or p.ready_since <= settled_by) for p in members)
                    and (lead := min(members, key=lambda p: p.rank)).name not in found)
    return f"{c.describe()}: {', '.join(silent)} Ready, exporting no series: {BLIND}" if silent else None


# --- watching (the control) -----------------------------------------------------------------------
class Watcher:
    """Evaluates the conditions every `every_seconds` in a thread; the first breach is kept and
    `fire` is called (by default: interrupt the run the way chaoslib's own safeguards do). Once
    more each time the run is found asleep in a pause of one of `method`'s activities: chaoslib
    takes an activity's pause after it in a `finally`, so an interruption that lands while the
    activity runs would otherwise wait out its whole pause (never one of the rollbacks')."""

    def __init__(self, cfg: dict[str, Any], conditions: Settings, fire: Callable[[], None] = exit_gracefully,
                 method: list[dict[str, Any]] | None = None) -> None:
        self.cfg, self.settings, self.fire, self.method = cfg, conditions, fire, method or []
        self.fired: dict[str, str] | None = None
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="kilocard-stop-conditions", daemon=True)

    def start(self) -> Watcher:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        if self.thread.is_alive() and self.thread is not threading.current_thread():
            self.thread.join(timeout=30)

    def _loop(self) -> None:
        quiet_thread()
        while not self.stopping.is_set():
            try:
                reason = self.check()
            except Exception as exc:  # noqa: BLE001 - a check that cannot run cannot look: the run is not left unguarded
                reason = f"the stop conditions could not be checked ({type(exc).__name__}: {exc}): {BLIND}"
            if reason is not None and not self.stopping.is_set():
                self.fired = {"reason": reason, "blind": BLIND in reason}
                self.fire()
                while self.method and not self.stopping.wait(PAUSE_LOOK_SECONDS):
                    if in_a_pause(threading.main_thread(), self.method):
                        self.fire()
                return
            self.stopping.wait(self.settings.every_seconds)

    def check(self) -> str | None:
        s = self._snapshot()
        for c in self.settings.conditions:
            reason = breach(c, s, self._look(c), time.time())
            if reason is not None:
                return reason
        return None

    def _snapshot(self) -> ClusterSnapshot | None:
        try:
            run = RunSettings.of(self.cfg)
            kube = run.kube()
        except KilocardError:
            return None
        try:
            return snap.fetch(kube, run.card_resource)
        except KilocardError:
            return None
        finally:
            kube.close()

    def _look(self, c: Condition) -> dict[str, float] | hung.Figures | None | Exception:
        """What the condition's own query finds (slo, hung-group); the others read the snapshot alone."""
        if c.kind == "slo":
            return self._values(c)
        return self._figures(c) if c.kind == "hung-group" else None

    def _prom(self) -> Any:
        return RunSettings.of(self.cfg).prometheus()

    def _values(self, c: Condition) -> dict[str, float] | Exception:
        try:
            prom = self._prom()
            return slo.values(prom, slo.indicator(prom, c.indicator, c.model, c.namespace, c.window))
        except Exception as exc:  # noqa: BLE001 - whatever stopped the query, the data is missing
            return exc

    def _figures(self, c: Condition) -> hung.Figures | Exception:
        try:
            return hung.fetch(self._prom(), c.model, c.namespace, c.window)
        except Exception as exc:  # noqa: BLE001 - as _worst
            return exc


PAUSE_LOOK_SECONDS = 0.25


def in_a_pause(thread: threading.Thread, method: list[dict[str, Any]]) -> bool:
    """Is `thread` asleep in chaoslib's pause before or after one of `method`'s activities?"""
    frame = sys._current_frames().get(thread.ident or -1)
    if frame is None or frame.f_code.co_name != "execute_activity" or not frame.f_code.co_filename.endswith(
            os.path.join("chaoslib", "activity.py")):
        return False
    return "time.sleep(pause_" in linecache.getline(frame.f_code.co_filename, frame.f_lineno) and any(
        frame.f_locals.get("activity") is a for a in method)


_watchers: list[Watcher] = []  # chaoslib's controls are module functions: the run's watcher lives here


def validate_control(control: dict[str, Any]) -> None:
    try:
        settings((control.get("provider") or {}).get("arguments"), f"control {control.get('name', MODULE)!r}")
    except SpecError as exc:
        raise InvalidActivity(str(exc)) from None


def before_method_control(context: Any, configuration: dict[str, Any] | None = None, **arguments: Any) -> None:
    method = context.get("method") if isinstance(context, dict) else None
    _watchers.append(Watcher(configuration or {}, settings(arguments, f"control {MODULE}"), method=method).start())


def after_method_control(context: Any, **_arguments: Any) -> None:
    for w in _watchers:
        w.stop()


def after_experiment_control(context: Any, state: dict[str, Any] | None = None, **_arguments: Any) -> None:
    """Write what fired into the journal (the strict runner's verdict reads it), and clear up."""
    fired = next((w.fired for w in _watchers if w.fired), None)
    for w in _watchers:
        w.stop()
    _watchers.clear()
    if fired is not None and state is not None:
        state[STOP_KEY] = fired
