"""The strict runner: Chaos Toolkit experiments on chaoslib's engine, with verdicts CI can trust.

chaoslib's own run semantics are traps (../shared/reference/chaostoolkit-notes.md), so here:
- a steady state not met before the method fails the run (chaoslib ends it "completed");
- a failed action fails the run (chaoslib goes on and may end "completed"), and so does a method
  probe out of its tolerance (chaoslib does not even look);
- an activity's `timeout` is enforced: a Python activity in the main thread is interrupted when
  it runs out (SIGALRM), and any activity that ran past it fails the run;
- every fault the run applied is reverted from its ledger at the end, whatever the rollback
  strategy did, on success, failure, Ctrl-C and SIGTERM alike;
- bad input is found before anything runs: chaoslib's validation, then every kilocard fault the
  method would apply, parsed, and resolved against the cluster, and the guards (chaos/guards.py:
  blast radius, Ready replicas left, room, namespace opt-in). All of a file's errors are
  reported at once, and nothing is applied.

Exit codes (chaos.errors.Exit): 0 passed, 1 deviated or failed, 2 invalid input, 3 aborted,
4 revert incomplete. An experiment whose finding IS a failure (S8: the fragile fleet's placement
fails) declares it, and then meeting it exits 0 and anything else exits 1:

    extensions:
    - name: kilocard
      expect: {exit: 1, reason: "probe 'replicas-kept-apart' failed: "}   # reason: its start

Invalid input and an incomplete revert are never expected: they keep their codes.

The same extension may bring its own traffic (chaos.load), for a cluster no production traffic
reaches: offered from before the steady-state hypothesis until after the revert, and recorded in
the journal under `kilocard.load` (its summary and a series per second):

    - name: kilocard
      load: {url: "http://vllm.inference:8000", model: llama-3-70b, qps: 10, prompt_tokens: 1024,
             output_tokens: 128}
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.util
import json
import logging
import math
import re
import signal
import threading
import time
from collections.abc import Callable, Iterator
from copy import deepcopy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chaoslib import convert_vars, merge_vars, substitute
from chaoslib.configuration import load_configuration
from chaoslib.exceptions import ChaosException
from chaoslib.experiment import ensure_experiment_is_valid, run_experiment
from chaoslib.hypothesis import run_steady_state_hypothesis
from chaoslib.run import EventHandlerRegistry, RunEventHandler
from chaoslib.secret import load_secrets

from chaos import (
    __version__,
    actions,
    fault_events,
    fields,
    grafana,
    guards,
    input_file,
    kube,
    landed,
    ledger,
    plan,
    release,
    revert,
    schemas,
    settle,
    stop,
    timezero,
)
from chaos import load as traffic
from chaos.errors import Exit, KilocardError, SpecError
from chaos.follower import Follower
from chaos.judgement import (
    EXPECTABLE,
    STEADY_NOT_MET,
    UNKNOWN,
    Expectation,
    KilocardSection,
    judged,
    refused,
    unseen,
    verdict,
    why,
)
from chaos.settings import Settings, key
from chaos.vocabulary import EXPERIMENT_SUFFIXES
from probes import capacity, placement, recovery, slo, snapshot
from probes.errors import ProbeError

_LOG = logging.getLogger(__name__)

ACTIONS_MODULE = "chaos.actions"
_SECRET_KEY = re.compile(r"(token|password|passwd|secret|api[-_]?key|credential)", re.IGNORECASE)
REDACTED = "***"


@dataclass
class Experiment:
    path: Path
    data: dict[str, Any]
    config_vars: dict[str, Any]
    secret_vars: dict[str, Any]
    sha256: str
    limits: guards.Limits = field(default_factory=guards.Limits)
    faults: list[tuple[Any, str]] = field(default_factory=list)  # (fault mapping, where)
    spans: list[plan.Span] = field(default_factory=list)  # each fault's window in the method (_spans)
    expect: Expectation | None = None
    load: traffic.LoadSpec | None = None


@dataclass
class Result:
    path: Path
    run_id: str
    exit: Exit
    reason: str
    journal: dict[str, Any]


def _activities(data: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(where, activity) of the steady state's probes, the method and the rollbacks."""
    for i, probe in enumerate((data.get("steady-state-hypothesis") or {}).get("probes") or []):
        yield f"steady-state-hypothesis.probes[{i}]", probe
    for section in ("method", "rollbacks"):
        for i, activity in enumerate(data.get(section) or []):
            yield f"{section}[{i}]", activity


def _named(where: str, activity: dict[str, Any]) -> str:
    return f"{where} ({activity['name']!r})" if isinstance(activity, dict) and activity.get("name") else where


def load(path: Path, variables: list[str] | None = None, var_files: list[str] | None = None) -> Experiment:
    """Read, validate and check an experiment without a cluster; SpecError lists every problem."""
    where = str(path)
    raw = input_file.raw(path)
    if path.suffix not in EXPERIMENT_SUFFIXES:
        raise SpecError(f"{where}: expected an experiment file ({', '.join(EXPERIMENT_SUFFIXES)}), "
                        f"got {path.suffix or 'no suffix'}")
    data = input_file.parse(raw, where, as_json=path.suffix == ".json")
    if not isinstance(data, dict):
        raise SpecError(f"{where}: expected an experiment (a mapping), got {type(data).__name__}")
    malformed = schemas.shape(data)  # what chaoslib would read without checking (and crash on)
    if malformed:
        raise SpecError("\n".join(f"{where}: {p}" for p in malformed))
    config_vars, secret_vars = _vars(variables or [], var_files or [], data.get("configuration") or {})
    if config_vars:
        data["configuration"] = {**(data.get("configuration") or {}), **config_vars}
    experiment = Experiment(path, data, config_vars, secret_vars, hashlib.sha256(raw).hexdigest())
    problems: list[str] = []
    timeouts = _timeouts(data)
    try:
        # A bad timeout is said once, naming its activity (chaoslib's "activity timeout must be a
        # number" names none), and pauses are checked here (after substitution): chaoslib checks
        # the rest without them.
        with _refused_here(_CONTROL_MISSING):
            ensure_experiment_is_valid(_for_chaoslib(data))
        configuration = load_configuration(data.get("configuration") or {}, experiment.config_vars)
        secrets = load_secrets(data.get("secrets") or {}, configuration, experiment.secret_vars)
    except (ChaosException, TypeError, ValueError, KeyError) as exc:
        problems.extend([_first_line(exc), *_missing_controls(data), *timeouts, *_pauses(data)])
    else:
        # The schemas first (every argument of every kilocard activity and control, in one pass),
        # then, when those hold, the parsers' own checks across fields.
        texts = _texts(variables or [], configuration)
        undefined = _undefined(data, configuration, secrets)
        problems.extend(undefined)
        # A field holding an undefined ${var} is not blamed for it again.
        argued = [p for p in schemas.problems(data, configuration, secrets, texts) if not undefined or "${" not in p]
        problems.extend(argued or ([] if undefined else _kilocard_faults(experiment, configuration, secrets)))
        problems.extend(_missing_controls(data))
        problems.extend(timeouts)
        problems.extend(_pauses(data, configuration, secrets, texts))
        try:  # the controls' arguments are input too, and so are the expected verdict, the load, the settings
            Settings.given(configuration)
            experiment.expect = _expectation(data)
            experiment.load = _load(data, configuration, secrets)
            if not argued:
                experiment.limits = guards.declared(data, where)
                stop.declared(data, where)
        except SpecError as exc:
            problems.append(str(exc).removeprefix(f"{where}: "))
    if problems:
        raise SpecError("\n".join(f"{where}: {p}" for p in problems))
    return experiment


# chaoslib warns that a control's module is missing and that the experiment "will carry on running
# nonetheless"; kilocard refuses it instead (`_missing_controls`), so the warning would contradict
# the error printed after it.
_CONTROL_MISSING = "Could not find Python module"
# A stop condition ends the method through chaoslib's exit_gracefully, which logs "Received the exit
# signal: 20": the verdict line names the condition that fired instead.
_EXIT_SIGNAL = "Received the exit signal"


@contextlib.contextmanager
def _refused_here(prefix: str) -> Iterator[None]:
    """Drop chaoslib's log lines that start with `prefix` while the block runs: kilocard says it."""
    def keep(record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(prefix)

    log = logging.getLogger("chaostoolkit")
    log.addFilter(keep)
    try:
        yield
    finally:
        log.removeFilter(keep)


def _extension(data: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """(where, the experiment's kilocard extension), if it has one."""
    found = [(i, e) for i, e in enumerate(data.get("extensions") or [])
             if isinstance(e, dict) and e.get("name") == "kilocard"]
    if not found:
        return None
    if len(found) > 1:
        raise SpecError(f"extensions[{found[1][0]}]: one kilocard extension per experiment")
    i, extension = found[0]
    where = f"extensions[{i}]"
    unknown = sorted(set(extension) - {"name", "expect", "load"})
    if unknown:
        raise SpecError(f"{where}.{unknown[0]}: unknown field; expected 'expect' or 'load'")
    return where, extension


def _expectation(data: dict[str, Any]) -> Expectation | None:
    """The `expect` of the experiment's kilocard extension, if it declares one."""
    found = _extension(data)
    if found is None or "expect" not in found[1]:
        return None
    where, extension = found
    expect = extension["expect"]
    if not isinstance(expect, dict) or set(expect) - {"exit", "reason"} or "exit" not in expect:
        raise SpecError(f"{where}.expect: expected a mapping with 'exit' and optionally 'reason', got {expect!r}")
    code, reason = expect["exit"], expect.get("reason", "")
    if isinstance(code, bool) or code not in [int(e) for e in EXPECTABLE]:
        raise SpecError(f"{where}.expect.exit: expected one of {', '.join(str(int(e)) for e in EXPECTABLE)} "
                        f"(passed, failed, aborted), got {code!r}")
    if not isinstance(reason, str):
        raise SpecError(f"{where}.expect.reason: expected text (how the verdict's reason starts), got {reason!r}")
    return Expectation(Exit(code), reason)


def _load(data: dict[str, Any], configuration: dict[str, Any], secrets: dict[str, Any]) -> traffic.LoadSpec | None:
    """The `load` of the experiment's kilocard extension, if it brings one (`${var}`s substituted)."""
    found = _extension(data)
    if found is None or "load" not in found[1]:
        return None
    where, extension = found
    return traffic.parse(substitute(extension["load"], configuration, secrets), f"{where}.load")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


def _kilocard_faults(experiment: Experiment, configuration: dict[str, Any], secrets: dict[str, Any]) -> list[str]:
    """Collect the faults kilocard's actions would apply, and parse each one (no cluster)."""
    problems: list[str] = []
    reverts = 0  # the run's reverts (revert_faults) before the activity: each ends every fault before it
    for k, (where, activity) in enumerate(_activities(experiment.data)):
        provider = activity.get("provider") or {} if isinstance(activity, dict) else {}
        if provider.get("type") != "python" or provider.get("module") != ACTIONS_MODULE:
            continue
        named = _named(where, activity)
        func = getattr(importlib.import_module(ACTIONS_MODULE), provider["func"])
        arguments = substitute(dict(provider.get("arguments") or {}), configuration, secrets)
        background = bool(activity.get("background"))
        if func is actions.revert_faults and not background:
            reverts += 1
        try:
            found = actions.faults_of(func, arguments)
        except TypeError as exc:
            problems.append(f"{named}: {exc}")
            continue
        spans = _spans(reverts, k, background, arguments.get("timeline") if func is actions.replay_timeline else None,
                       len(found))
        for i, fault in enumerate(found):
            fault_where = f"{named}: fault" + (f"[{i}]" if len(found) > 1 else "")
            try:
                plan.parse(fault, fault_where)
            except SpecError as exc:
                problems.append(str(exc))
            else:
                experiment.faults.append((fault, fault_where))
                experiment.spans.append(spans[i])
    return problems


def _spans(reverts: int, k: int, background: bool, timeline: Any, count: int) -> list[plan.Span]:
    """The window of each of an activity's `count` faults, in the method's order: from the
    activity (`k`, after `reverts` reverts of the run's faults) to the next revert; a replayed
    timeline's entry from its `at` to its `at + for` (the replay reverts it then, before it
    returns); an activity in the background, from its start to the end of the run (it runs
    beside whatever comes after it, reverts included)."""
    end = (math.inf,) if background else (reverts + 1,)
    if not isinstance(timeline, list) or len(timeline) != count:
        return [plan.Span((reverts, k, 0.0), end)] * count
    spans = []
    for entry in timeline:
        at, hold = entry.get("at"), entry.get("for")
        if not isinstance(at, int | float) or isinstance(at, bool):
            spans.append(plan.Span((reverts, k, 0.0), end))
            continue
        closed = isinstance(hold, int | float) and not isinstance(hold, bool) and not background
        spans.append(plan.Span((reverts, k, float(at)), (reverts, k, float(at) + float(hold)) if closed else end))
    return spans


def _bad_timeout(timeout: Any) -> bool:
    return timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0)


def _for_chaoslib(data: dict[str, Any]) -> dict[str, Any]:
    """The experiment without what load() checks itself: bad timeouts, and every activity's pauses."""
    checked = [a for _w, a in _activities(data) if isinstance(a, dict)
               and (_bad_timeout(a.get("timeout")) or "pauses" in a)]
    if not checked:
        return data
    copy = deepcopy(data)
    for _where, activity in _activities(copy):
        if isinstance(activity, dict):
            if _bad_timeout(activity.get("timeout")):
                del activity["timeout"]
            activity.pop("pauses", None)
    return copy


def _finite(value: str) -> float:
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(value)
    return number


_TYPES = {"int": (int, "an integer"), "float": (_finite, "a finite number"), "str": (str, "text"),
          "bytes": (str, "bytes")}


def _vars(variables: list[str], var_files: list[str], declared: dict[str, Any]
          ) -> tuple[dict[str, Any], dict[str, Any]]:
    """(configuration, secrets) from --var and --var-file. `--var KEY:TYPE=VALUE` is typed (int,
    float, str, bytes); an untyped one takes the type of the value the experiment declares for KEY
    (`budget_seconds: 60` makes `--var budget_seconds=90` the number 90), else it is text."""
    problems = [f"--var-file {f}: no such file" for f in var_files if not Path(f).is_file()]
    for f in var_files:  # read as every input is (chaoslib reads them again, to merge them)
        if Path(f).is_file() and Path(f).suffix in EXPERIMENT_SUFFIXES:
            try:
                input_file.read(Path(f))
            except SpecError as exc:
                problems.append(f"--var-file {exc}")
    typed: list[str] = []
    for given in variables:
        key, sep, value = given.partition("=")
        name, _, kind = key.partition(":")
        if not sep or not name:
            problems.append(f"--var: expected KEY[:TYPE]=VALUE, got {given!r}")
            continue
        default = declared.get(name)
        if not kind and isinstance(default, (int, float)) and not isinstance(default, bool):
            kind = "int" if isinstance(default, int) else "float"
        if kind and kind not in _TYPES:
            problems.append(f"--var {given}: expected a type of {', '.join(_TYPES)}, got {kind!r}")
            continue
        parse, words = _TYPES[kind or "str"]
        try:
            parse(value)
        except ValueError:
            said = "" if ":" in key else f" (the experiment declares {name}: {default!r})"
            problems.append(f"--var {given}: expected {words}{said}, got {value!r}")
            continue
        typed.append(f"{name}:{kind}={value}" if kind else given)
    if problems:
        raise SpecError("\n".join(problems))
    try:
        found: tuple[dict[str, Any], dict[str, Any]] = merge_vars(convert_vars(typed), var_files)
    except (ValueError, ChaosException) as exc:
        raise SpecError(f"--var-file: {_first_line(exc)}") from None
    return found


def _missing_controls(data: dict[str, Any]) -> list[str]:
    """A control whose module is not installed: chaoslib only warns and runs on without it, and
    a run that was to be guarded, stopped or reported by it would not be."""
    controls = [(f"controls[{i}]", c) for i, c in enumerate(data.get("controls") or [])]
    controls += [(f"{where}.controls[{i}]", c) for where, a in _activities(data)
                 for i, c in enumerate(a.get("controls") or [])]
    found = []
    for where, control in controls:
        module = (control.get("provider") or {}).get("module")
        try:
            present = isinstance(module, str) and importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            present = False
        if not present:
            found.append(f"{_named(where, control)}: no Python module {module!r}: install it, or remove the control")
    return found


_PLACEHOLDER = re.compile(r"\$\{([^}]*)\}|\$\{")


def _undefined(data: dict[str, Any], configuration: dict[str, Any], secrets: dict[str, Any]) -> list[str]:
    """Every `${name}` in an activity or a control that no configuration key or secret defines
    (chaoslib would leave it as text, and the field would be blamed for it)."""
    known = set(configuration) | {k for scope in secrets.values() if isinstance(scope, dict) for k in scope}
    found = []
    places = [(where, a) for where, a in _activities(data)]
    places += [(f"controls[{i}]", c) for i, c in enumerate(data.get("controls") or [])]
    for where, item in places:
        for place, text in _strings((item.get("provider") or {}).get("arguments") if isinstance(item, dict) else None):
            for match in _PLACEHOLDER.finditer(text):
                name = match.group(1)
                if name is None:
                    found.append(f"{_named(where, item)}: {place}: '${{' without its closing '}}' in {text!r}")
                elif name not in known:
                    found.append(f"{_named(where, item)}: {place}: ${{{name}}} is not defined: the configuration has "
                                 f"{', '.join(sorted(configuration)) or 'nothing'} (or give --var {name}=...)")
    return found


def _strings(value: Any, path: str = "") -> Iterator[tuple[str, str]]:
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(v, f"{path}.{k}" if path else str(k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _strings(v, f"{path}[{i}]")


def _texts(variables: list[str], configuration: dict[str, Any]) -> dict[str, str]:
    """Text value -> the key of the untyped --var that gave it (--var KEY=VALUE is text)."""
    keys = [v.split("=", 1)[0] for v in variables]
    return {configuration[k]: k for k in reversed(keys) if ":" not in k and isinstance(configuration.get(k), str)}


def _pauses(data: dict[str, Any], configuration: dict[str, Any] | None = None, secrets: dict[str, Any] | None = None,
            texts: dict[str, str] | None = None) -> list[str]:
    """Each activity's pauses: a mapping of `before` and `after`, seconds from 0 once `${var}`s are
    substituted (without a configuration, a `${var}` is left to be checked with one)."""
    problems = []
    for where, activity in _activities(data):
        pauses = activity.get("pauses") if isinstance(activity, dict) else None
        if pauses is None:
            continue
        named = _named(where, activity)
        if not isinstance(pauses, dict):
            problems.append(f"{named}: pauses: expected a mapping of before and/or after (seconds), got {pauses!r}")
            continue
        problems += [f"{named}: pauses: unknown field {k!r}; expected before or after"
                     for k in pauses if k not in ("before", "after")]
        for when in ("before", "after"):
            given = pauses.get(when)
            if given is None or (configuration is None and isinstance(given, str) and given.startswith("${")):
                continue
            value = substitute(given, configuration or {}, secrets or {}) if isinstance(given, str) else given
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < math.inf:
                problems.append(f"{named}: pauses.{when}: expected seconds from 0, got {value!r}"
                                + fields.as_text(value, texts=texts))
    return problems


def _timeouts(data: dict[str, Any]) -> list[str]:
    problems = []
    for where, activity in _activities(data):
        timeout = activity.get("timeout") if isinstance(activity, dict) else None
        if _bad_timeout(timeout):
            problems.append(f"{_named(where, activity)}: timeout: expected seconds above 0, got {timeout!r}")
    return problems


def check(ctx: Any, experiment: Experiment, s: snapshot.ClusterSnapshot | None = None,
          prom: Any = None) -> dict[str, Any]:
    """Resolve the experiment's faults against the cluster (no change): selectors that match
    nothing, cards a node does not have, conflicts with other runs and the guards' limits (on
    `s` if given) are found before the run. Returns what it would do: each fault's targets, the
    blast radius, and warnings: the experiment's load against the KV cache the faults leave
    (with `prom`, where the model's request time is read)."""
    s = s or snapshot.fetch(ctx.kube, ctx.card_resource)
    planned = plan.plan(ctx, experiment.faults, experiment.spans)
    taken = guards.radius(planned, s)  # once: the guards judge it, and the KV check reads its pods
    found = {"faults": planned.describe(),
             "blast_radius": guards.check(ctx, planned, experiment.limits, str(experiment.path), s, taken)}
    if experiment.load is not None and prom is not None:
        found["warnings"] = kv_left(experiment.load, s, frozenset(taken.pods), prom)
    return found


def kv_left(load: traffic.LoadSpec, s: snapshot.ClusterSnapshot, gone: frozenset[tuple[str, str]],
            prom: Any) -> list[str]:
    """Warnings, where the load at its peak would exhaust the KV cache of the replicas the faults
    leave (probes.capacity.fits with the field account's 25 % headroom; a request's time from the
    model's own latency now). The load alone: the cluster's own traffic is not counted."""
    namespace = traffic.namespace_of(load.url)
    if not s.replicas(load.model, namespace):
        return [f"load: no replica of {load.model} in the cluster: its KV cache is not checked against the load"]
    try:
        seconds = slo.request_seconds(prom, load.model, namespace, load.output_tokens)
    except ProbeError as exc:
        return [f"load: {load.model}'s KV cache not checked against the load: {exc}"]
    if seconds is None:
        return [f"load: {load.model}'s KV cache not checked against the load: it serves nothing now, so no request "
                "time sizes the load"]
    demand = capacity.Demand(load.peak_qps, load.prompt_tokens, load.output_tokens, seconds,
                             round(load.prompt_tokens * load.prefix_share))
    verdict = capacity.fits(s, load.model, demand, namespace=namespace, without=gone)
    if verdict.ok:
        return []
    return [f"load: at its peak ({load.peak_qps:g} QPS of {load.prompt_tokens} + {load.output_tokens} tokens, "
            f"{seconds:.2f} s a request), once the faults land: {verdict.reason}; expect preemptions"]


class ActivityTimeout(Exception):
    """An activity ran out of its `timeout`."""


class _Timeouts(RunEventHandler):  # type: ignore[misc]
    """Arms SIGALRM for an activity with a `timeout` that runs in the main thread (chaoslib runs
    background activities in threads, which no signal can interrupt: their overrun is judged
    from the journal)."""

    def __init__(self) -> None:
        self.previous: Any = None

    def start_activity(self, activity: dict[str, Any]) -> None:
        timeout = activity.get("timeout")
        if timeout and not activity.get("background") and _main_thread():
            def expired(_signum: int, _frame: Any) -> None:
                raise ActivityTimeout(f"timed out after {timeout} s")

            self.previous = signal.signal(signal.SIGALRM, expired)
            signal.setitimer(signal.ITIMER_REAL, float(timeout))

    def activity_completed(self, activity: dict[str, Any], run: Any) -> None:
        if activity.get("timeout") and not activity.get("background") and _main_thread():
            signal.setitimer(signal.ITIMER_REAL, 0)
            if self.previous is not None:
                signal.signal(signal.SIGALRM, self.previous)
                self.previous = None


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def redact(value: Any, secret: bool = False) -> Any:
    """A copy with secret-looking values (by key, or anything under `secrets`) replaced."""
    if isinstance(value, dict):
        return {k: redact(v, secret or k == "secrets" or bool(_SECRET_KEY.search(str(k)))) for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v, secret) for v in value]
    return REDACTED if secret and value is not None else value


def execute(experiment: Experiment, session: Callable[[dict[str, Any]], tuple[Any, ledger.Ledger]],
            run_id: str | None = None, view: Any = None) -> Result:
    """Run a loaded experiment: resolve its faults (exit 2 on a problem, nothing applied), run it
    on chaoslib, revert what the ledger still holds, and judge. `view` (a chaos.timeline.Timeline)
    watches it live; it is stopped after the revert, so the reverts show too."""
    data = experiment.data
    run_id = run_id or ledger.new_run_id()
    data["configuration"] = {**(data.get("configuration") or {}), key("run_id"): run_id}
    spent = _Stopwatch()  # the runner's own time, per phase, beside chaoslib's
    retried_before = kube.retries()  # the process's count: several runs may share one process
    ctx, book = spent("connect", session, data["configuration"])
    follower = spent("follow", _follow, ctx.kube)
    try:
        # One snapshot serves the guards and the placement before the method.
        before = spent("placement", snapshot.fetch, ctx.kube, ctx.card_resource)
        prom = Settings.of(data["configuration"]).prometheus() if experiment.load else None
        planned = spent("plan_and_guards", check, ctx, experiment, before, prom)
        for warning in planned.get("warnings", []):
            _LOG.warning("%s", warning)
        touched = _by_namespace(planned["blast_radius"]["models"])
        released = spent("release", release.fetch, ctx.kube, touched)
        journal: dict[str, Any] = {}
        recorders = spent("follow", lambda: [recovery.Recorder(ctx.kube, ns, m.split(",")).start()
                                             for ns, m in touched])
        offered = traffic.Load(experiment.load).start() if experiment.load else None
        offered_record = None
        annotator = _annotator(data, run_id)
        told = fault_events.FaultEvents(ctx.kube, run_id).start()
        try:
            settling = spent("settle", _settle, data, experiment, ctx)
            if view is not None:
                view.start()
            with _refused_here(_EXIT_SIGNAL):
                journal = run_experiment(data, settings={}, experiment_vars=(experiment.config_vars,
                                                                             experiment.secret_vars),
                                         event_handlers=[_Timeouts(), timezero.Clock(run_id),
                                                         *([view] if view is not None else [])])
        finally:  # whatever chaoslib did (or if it raised), the ledger's faults are undone
            signal.setitimer(signal.ITIMER_REAL, 0)
            events = [e for r in recorders for e in r.detach()]
            try:
                reverted, left = spent("revert", revert.recover, ctx, book.dir, run_id)
            finally:
                if offered is not None:  # the load covers the revert, and what the fleet did after it
                    offered_record = spent("load", offered.stop)
                if view is not None:
                    view.stop()
                annotations = annotator.stop() if annotator is not None else None
                events_told = told.stop()
        after = spent("placement", snapshot.fetch, ctx.kube, ctx.card_resource)
        records = spent("ledger", ledger.records, ctx.kube, book.dir, run_id)
        outcome, reason, basis = verdict(journal)
        blind = unseen([r.landed for r in records if r.applied_at], journal) if outcome == Exit.PASSED else None
        if blind is not None:
            outcome, reason, basis = Exit.FAILED, blind, UNKNOWN
        if reason.startswith(STEADY_NOT_MET) and settling.said():
            reason = f"{reason} ({settling.said()})"
        code, reason = judged(experiment.expect, outcome, reason, basis)
        if left:
            outcome = code = Exit.REVERT_INCOMPLETE
            reason = (f"{reason}; revert incomplete: {len(left)} fault(s) still in place: "
                      f"run 'kilocard recover --run {run_id}'")
    finally:
        if isinstance(follower, Follower):
            follower.stop()
        ctx.kube.close()
    applied = [r.applied_at for r in records if r.applied_at]
    history = ledger.transitions(book.path) if book.on_disk else {}
    journal = redact(journal)
    journal["kilocard"] = KilocardSection(
        run_id=run_id, exit_code=int(code), verdict=outcome.name.lower(), reason=reason, basis=basis,
        expected=experiment.expect.to_json() if experiment.expect else None,
        experiment_file=str(experiment.path), experiment_sha256=experiment.sha256,
        kilocard_version=__version__, finished_at=time.time(), cluster=ctx.kube.target(), plan=planned,
        release=redact(released),
        faults=[{**json.loads(r.to_json()), "transitions": history.get(r.fault_id, [])} for r in records],
        # Each target's effect read back after its apply (chaos.landed), counted by what it said.
        landed=landed.summary([r.landed for r in records if r.landed]),
        reverted=[{"kind": r.kind, "target": r.target} for r in reverted],
        left=[{"kind": r.kind, "target": r.target, "error": r.error} for r in left],
        recovery=recovery.timeline(events, min(applied))["replicas"] if applied else [],
        placement=_placement(before, after, touched, records),
        load=offered_record,
        runner_seconds=spent.phases,
        # The run's follower (its LISTs: 2, more after a 410), or LISTs each time, and why.
        snapshots=({"from": "follower", "lists": follower.lists,
                    "stopped_by": str(follower.error) if follower.error else None}
                   if isinstance(follower, Follower) else {"from": "lists", "why": follower}),
        # 429 (Retry-After honoured), 5xx, connection (a lower bound: urllib3 reconnects at once
        # without telling; kilocard's retries and re-watches are counted).
        api_retries={k: n - retried_before.get(k, 0) for k, n in kube.retries().items()
                     if n > retried_before.get(k, 0)},
        # How often this process parsed each of the run's faults: once (chaos.plan keeps what it
        # parsed; loading, the check, the guards and the action all meet the same spec).
        parsed={where: plan.parses(raw) for raw, where in experiment.faults},
        grafana=annotations,
        events=events_told,
        settle=settling.to_json(),
    )
    return Result(experiment.path, run_id, code, reason, journal)


def _settle(data: dict[str, Any], experiment: Experiment, ctx: Any) -> settle.Settling:
    """The steady state looked at before the method, again while a model it names is still
    starting (chaos.settle.before); chaoslib then judges it as always."""
    configuration = load_configuration(data.get("configuration") or {}, experiment.config_vars)
    secrets = load_secrets(data.get("secrets") or {}, configuration, experiment.secret_vars)
    timeout = Settings.of(configuration).settle_seconds
    if not data.get("steady-state-hypothesis") or timeout <= 0:
        return settle.Settling(True, 0.0, 0, (), "")
    # The hypothesis alone: the experiment's controls (guards, stop conditions) act on its run.
    hypothesis = {k: v for k, v in data.items() if k != "controls"}

    def look() -> settle.Look:
        chaoslib_log = logging.getLogger("chaostoolkit")
        was, chaoslib_log.disabled = chaoslib_log.disabled, True  # its lines are the judged look's to say
        try:
            state = run_steady_state_hypothesis(hypothesis, configuration, secrets, None, EventHandlerRegistry())
        finally:
            chaoslib_log.disabled = was
        if state is None or state.get("steady_state_met"):
            return settle.Look(True)
        failing = [r for r in state.get("probes") or [] if not r.get("tolerance_met")]
        models = set()
        for r in failing:
            provider = (r.get("activity") or {}).get("provider") or {}
            arguments = substitute(dict(provider.get("arguments") or {}), configuration, secrets)
            if isinstance(arguments.get("model"), str):
                namespace = arguments.get("namespace")
                models.add((namespace if isinstance(namespace, str) else None, arguments["model"]))
        said = "; ".join(f"{(r.get('activity') or {}).get('name', '?')}: {why(r) or 'out of tolerance'}"
                         for r in failing)
        return settle.Look(False, tuple(sorted(models, key=lambda m: (m[0] or "", m[1]))),
                           any(r.get("status") == "failed" for r in failing), said)

    return settle.before(look, lambda: snapshot.fetch(ctx.kube, ctx.card_resource), timeout,
                         say=lambda message: _LOG.warning("%s", message))


def _annotator(data: dict[str, Any], run_id: str) -> grafana.Annotator | None:
    """The run's faults as Grafana annotations, when the configuration names a Grafana."""
    url = Settings.of(data["configuration"]).grafana_url
    if not isinstance(url, str) or not url:  # a configuration value chaoslib resolves later: not read here
        return None
    return grafana.Annotator(url, run_id, str(data.get("title") or ""), grafana.session(url)).start()


def _follow(client: kube.Kube) -> Follower | str:
    """The run's follower of every pod and node, or why there is none (its snapshots are listed
    each time then, as they can be: a watch the RBAC does not allow is not a failed run)."""
    try:
        return Follower(client).start()
    except KilocardError as exc:
        return str(exc)


class _Stopwatch:
    """Seconds the runner spends in each of its own phases (journal: kilocard.runner_seconds)."""

    def __init__(self) -> None:
        self.phases: dict[str, float] = {}

    def __call__(self, phase: str, fn: Callable[..., Any], *args: Any) -> Any:
        started = time.monotonic()
        try:
            return fn(*args)
        finally:
            self.phases[phase] = round(self.phases.get(phase, 0.0) + time.monotonic() - started, 3)


def _placement(before: snapshot.ClusterSnapshot, after: snapshot.ClusterSnapshot, touched: list[tuple[str, str]],
               records: list[ledger.Record]) -> dict[str, Any]:
    """The touched models' nodes and the faulted nodes, before the method and after the revert."""
    models = {(ns, m) for ns, names in touched for m in names.split(",")}
    nodes = {str(r.target["node"]) for r in records if r.target.get("node")}
    for s in (before, after):
        nodes |= {p.node for p in s.pods if p.node and (p.namespace, p.model) in models}
    return {"before": placement.layout(before, nodes), "after": placement.layout(after, nodes),
            "card_resource": before.card_resource}


def _by_namespace(models: list[str]) -> list[tuple[str, str]]:
    """"namespace/model" names as (namespace, "model-a,model-b"): one LIST, one watch per namespace."""
    found: dict[str, set[str]] = {}
    for name in models:
        namespace, model = name.split("/", 1)
        found.setdefault(namespace, set()).add(model)
    return [(ns, ",".join(sorted(names))) for ns, names in sorted(found.items())]


def run_file(path: Path, variables: list[str] | None, var_files: list[str] | None,
             session: Callable[[dict[str, Any]], tuple[Any, ledger.Ledger]], view: Any = None) -> Result:
    """Load, check, run and judge one experiment file. Invalid input gives exit 2 and a journal
    that says so; nothing was applied."""
    started = time.monotonic()
    try:
        experiment = load(path, variables, var_files)
        loaded = time.monotonic() - started
        result = execute(experiment, session, view=view)
        result.journal["kilocard"]["runner_seconds"]["load"] = round(loaded, 3)
        return result
    except SpecError as exc:
        return Result(path, "", Exit.INVALID, str(exc), {"kilocard": refused(path, Exit.INVALID, str(exc))})
    except KilocardError as exc:
        return Result(path, "", Exit.FAILED, str(exc), {"kilocard": refused(path, Exit.FAILED, str(exc))})
