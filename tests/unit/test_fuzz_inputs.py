"""R2, bad input as a property: the catalog's experiments, each broken one way at random (a fault's
field given the wrong type, a required field dropped, a field nobody knows, an unknown kind, a TTL
out of range, a probe argument of the wrong type, a timeout below zero, a document that is not a
mapping, YAML that does not parse). Every one is refused by `chaos.run.load` with a SpecError that
names the file, the activity and the field, and never with any other exception: nothing of it
reaches a cluster (the testbed leg checks the audit log)."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from chaos import run
from chaos.errors import SpecError
from chaos.faults import registry
from tests import figures

CATALOG = sorted((Path(__file__).parents[2] / "experiments").glob("s[0-9]*-*.yaml"))  # every scenario in the catalog
EXPERIMENTS = {p.name: yaml.safe_load(p.read_text()) for p in CATALOG}
# Values of another type than a field's own (null is "not given", which an optional field allows).
NEGATIVE = st.integers(-10**9, -1)
TEXT = st.text(min_size=1, max_size=12).filter(lambda t: not t.strip().lstrip("-").replace(".", "", 1).isdigit())
BOXED = st.one_of(st.lists(st.integers(), min_size=1, max_size=3), st.dictionaries(TEXT, st.integers(), min_size=1,
                                                                                    max_size=2))
WRONG = {str: st.one_of(NEGATIVE, st.booleans(), BOXED), int: st.one_of(TEXT, st.booleans(), BOXED, NEGATIVE),
         float: st.one_of(TEXT, st.booleans(), BOXED, NEGATIVE), dict: st.one_of(TEXT, NEGATIVE, st.lists(
             st.integers(), min_size=1, max_size=3)), list: st.one_of(NEGATIVE, st.dictionaries(
                 TEXT, st.integers(), min_size=1, max_size=2))}
KNOWN = {"kind", "namespace", "label_selector", "field_selector", "count", "percent", "seed", "mode", "grace_seconds",
         "nodes", "node_selector", "nodes_of", "card", "cards", "params", "ttl_seconds", "interface", "netns",
         "effect", "drain", "rank", "allow_empty", "pod_selector", "to", "eviction_deadline_seconds", "cidrs",
         "ports", "direction", "device_name", "driver", "xid"}


def faults(data: dict) -> list[tuple[str, dict]]:
    """(where, fault mapping) of each apply_fault action."""
    return [(f"method[{i}]", a["provider"]["arguments"]["fault"]) for i, a in enumerate(data.get("method") or [])
            if a.get("provider", {}).get("func") == "apply_fault"]


def probes(data: dict) -> list[tuple[str, dict]]:
    found = [(f"steady-state-hypothesis.probes[{i}]", p) for i, p in
             enumerate((data.get("steady-state-hypothesis") or {}).get("probes") or [])]
    return found + [(f"method[{i}]", a) for i, a in enumerate(data.get("method") or []) if a["type"] == "probe"]


@st.composite
def broken(draw: st.DrawFn) -> tuple[str, dict | str, str]:
    """(file name, the broken document, what the error must name)."""
    how = draw(st.sampled_from(("fault-type", "fault-drop", "fault-unknown", "fault-kind", "fault-ttl",
                                "probe-type", "timeout", "not-a-mapping", "not-yaml")))
    # A fault's breakage (a probe's falls back to one) needs an experiment with an apply_fault
    # action: S9's stall is an action of its own.
    whole = how in ("timeout", "not-a-mapping", "not-yaml")
    name = draw(st.sampled_from(sorted(n for n, d in EXPERIMENTS.items() if whole or faults(d))))
    data = copy.deepcopy(EXPERIMENTS[name])
    if how == "not-a-mapping":
        return name, yaml.safe_dump([data]), "expected an experiment"
    if how == "not-yaml":
        return name, "title: [unclosed\n", ""
    if how == "timeout":
        where, activity = draw(st.sampled_from(probes(data) or [("method[0]", data["method"][0])]))
        activity["timeout"] = draw(st.one_of(st.just(0), NEGATIVE, TEXT))
        return name, data, f"{where}"
    if how == "probe-type":
        typed = [(w, p, k) for w, p in probes(data) for k, v in (p["provider"].get("arguments") or {}).items()
                 if k in ("threshold", "budget", "deadline", "hold", "max_skew") and not str(v).startswith("${")]
        typed += [(w, p, "budget") for w, p in probes(data) if p["provider"]["func"].endswith("_within")
                  and "budget" in (p["provider"].get("arguments") or {})]
        if typed:
            where, probe, key = draw(st.sampled_from(typed))
            probe["provider"]["arguments"][key] = draw(st.one_of(TEXT, BOXED))
            return name, data, key
    found = faults(data)
    where, fault = draw(st.sampled_from(found))
    if how == "fault-drop":
        fault.pop("kind")
        return name, data, "kind"
    if how == "fault-unknown":
        fault[draw(st.from_regex(r"[a-z_]{2,12}", fullmatch=True).filter(lambda k: k not in KNOWN))] = draw(
            st.integers())
        return name, data, where
    if how == "fault-kind":
        fault["kind"] = draw(st.one_of(TEXT, st.sampled_from(["pod-kil", "gpu", "", "NODE-ISOLATE"])).filter(
            lambda k: k not in plan_kinds()))
        return name, data, "kind"
    if how == "fault-ttl" and "ttl_seconds" in fault:
        fault["ttl_seconds"] = draw(st.one_of(st.just(0), NEGATIVE, st.integers(10**6, 10**12), TEXT))
        return name, data, "ttl_seconds"
    key = draw(st.sampled_from(sorted(k for k in fault if k != "kind" and type(fault[k]) in WRONG)))
    fault[key] = draw(WRONG[type(fault[key])])
    return name, data, key


def refused(path: Path, data: dict | str) -> tuple[Path, str]:
    """The file written and loaded: refused with a SpecError that names the file on every line,
    in words (no traceback, no Python internals). Returns (path, message)."""
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False))
    try:
        run.load(path)
    except SpecError as exc:
        message = str(exc)
    else:
        raise AssertionError(f"accepted: {path.read_text()[:400]}")
    assert all(line.startswith(f"{path}: ") for line in message.splitlines()), message  # the file, on every line
    assert not re.search(r"Traceback|Error\(|object at 0x|indices must be", message), message
    return path, message


def plan_kinds() -> set[str]:
    return set(registry())


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.function_scoped_fixture])
@given(broken())
def test_every_broken_experiment_is_refused_with_its_file_and_field(tmp_path_factory, case) -> None:
    name, data, field = case
    path, message = refused(tmp_path_factory.mktemp("fuzz") / name, data)
    assert field in message, (field, message)
    figures.record("fuzz-files", {"experiment": name, "field": field or "(not YAML)"})


SECTIONS = {"configuration": dict, "secrets": dict, "steady-state-hypothesis": dict, "method": list, "rollbacks": list,
            "controls": list, "extensions": list, "tags": list, "title": str, "description": str}
ODD = st.one_of(TEXT, NEGATIVE, st.booleans(), BOXED, st.floats(allow_nan=False))


@st.composite
def misshapen(draw: st.DrawFn) -> tuple[str, dict, str]:
    """(file name, a document whose shape is wrong in one place, the place)."""
    name = draw(st.sampled_from(sorted(EXPERIMENTS)))
    data = copy.deepcopy(EXPERIMENTS[name])
    how = draw(st.sampled_from(("section", "activity", "provider", "arguments", "probes")))
    i = draw(st.integers(0, len(data["method"]) - 1))
    if how == "section":
        key = draw(st.sampled_from(sorted(SECTIONS)))
        data[key] = draw(ODD.filter(lambda v: not isinstance(v, SECTIONS[key])))
        return name, data, key
    if how == "activity":
        data["method"][i] = draw(st.one_of(TEXT, NEGATIVE, st.lists(st.integers(), min_size=1, max_size=2)))
        return name, data, f"method[{i}]"
    if how == "provider":
        data["method"][i]["provider"] = draw(st.one_of(TEXT, NEGATIVE, st.lists(TEXT, min_size=1, max_size=2)))
        return name, data, f"method[{i}].provider"
    if how == "arguments" and data["method"][i]["provider"].get("type") == "python":
        data["method"][i]["provider"]["arguments"] = draw(st.one_of(NEGATIVE, st.lists(TEXT, min_size=1, max_size=2)))
        return name, data, f"method[{i}].provider.arguments"
    data["steady-state-hypothesis"] = {"title": "h", "probes": draw(st.one_of(TEXT, st.dictionaries(
        TEXT, st.integers(), min_size=1, max_size=2)))}
    return name, data, "steady-state-hypothesis.probes"


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.function_scoped_fixture])
@given(misshapen())
def test_a_document_of_the_wrong_shape_anywhere_is_refused_naming_the_place_never_a_traceback(tmp_path_factory,
                                                                                            case) -> None:
    name, data, place = case
    _path, message = refused(tmp_path_factory.mktemp("shape") / name, data)
    assert place in message or place in ("title", "description"), (place, message)
    figures.record("fuzz-shapes", {"experiment": name, "place": place})


def test_a_bad_failpoint_in_the_environment_is_input_refused_by_the_command_not_a_traceback(monkeypatch, capsys):
    from chaos import cli, failpoints

    monkeypatch.setenv("KILOCARD_FAILPOINT", "bogus@0")
    armed, problem = failpoints._arm()
    assert armed is None and problem.startswith("KILOCARD_FAILPOINT: expected one of fault-recorded")
    monkeypatch.setattr(failpoints, "PROBLEM", problem)
    assert cli.main(["validate", str(CATALOG[0])]) == 2
    assert capsys.readouterr().err == f"kilocard: {problem}\n"


# The environment kilocard reads, and values a shell or a CI system can leave in it.
ENVIRONMENT = ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KILOCARD_SERVICE_ACCOUNT_DIR", "KILOCARD_STATE",
               "KILOCARD_LEDGER", "KILOCARD_REPORTS", "KILOCARD_PROMETHEUS_URL", "KILOCARD_RUN_ID",
               "KILOCARD_AGENT_TOKEN", "KILOCARD_AGENT_CA", "KILOCARD_PORT_BASE", "HOME", "CI")
ODD_ENV = ("", " ", "~", "-1", "http://", "::::", "relative/nope", "/nonexistent/deep", "x" * 5000,
       "/" + "/".join(["y" * 255] * 20), "é\u2028", "FILE", "FOLDER", "FILE:FOLDER")
VALUES = st.one_of(st.sampled_from(ODD_ENV), st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"),
                                                 max_size=40))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.dictionaries(st.sampled_from(ENVIRONMENT), VALUES, min_size=1, max_size=3),
       st.sampled_from(("validate", "catalog", "run", "plan", "recover")))
@example({"HOME": "~"}, "validate")  # Path.home() raised RuntimeError while the parser was built
@example({"HOME": "~"}, "recover")
@example({"KILOCARD_PORT_BASE": "-1"}, "validate")  # read only where a testbed's port is needed
@example({"KILOCARD_PORT_BASE": "-1"}, "run")
@example({"KILOCARD_STATE": "x" * 5000}, "plan")  # a name too long to look up: OSError from is_file()
@example({"KILOCARD_LEDGER": "x" * 5000}, "run")
@example({"KILOCARD_REPORTS": "x" * 5000}, "run")
@example({"HOME": "x" * 5000}, "run")  # ~/.kube/config too long to look up
@example({"KUBECONFIG": "/nonexistent/deep", "KUBERNETES_SERVICE_HOST": "1"}, "plan")
def test_no_environment_makes_a_command_crash_or_reach_a_cluster_nobody_named(tmp_path_factory, environment,
                                                                             command) -> None:
    """Whatever the environment holds, an offline command still works (validate, catalog) and a
    command that needs a cluster, with none named and CI set, is refused with exit 2 and a message:
    never a traceback, never a run."""
    import contextlib
    import io
    import os
    from unittest import mock

    from chaos import cli

    tmp = tmp_path_factory.mktemp("env")
    (tmp / "file").write_text("garbage: [\n")
    (tmp / "folder").mkdir()
    places = {"file": tmp / "file", "folder": tmp / "folder"}
    experiment = str(CATALOG[0])
    argv = {"validate": ["validate", experiment], "catalog": ["catalog"], "run": ["run", experiment, "-q", "--no-report",
                                                                                "--journal", str(tmp / "j.json")],
            "plan": ["plan", "-e", experiment], "recover": ["recover", "--all", "--dry-run"]}[command]
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp / "home"), "CI": "true",
           **{k: v.replace("FILE", str(places["file"])).replace("FOLDER", str(places["folder"]))
              for k, v in environment.items()}}
    out, err = io.StringIO(), io.StringIO()
    with mock.patch.dict(os.environ, env, clear=True), contextlib.redirect_stdout(out), \
            contextlib.redirect_stderr(err):
        code = cli.main(argv)
    said = out.getvalue() + err.getvalue()
    if command in ("validate", "catalog"):
        assert code == 0, said
    else:
        assert code == 2 and said.strip() and "Traceback" not in said, (code, said)
        assert "passed" not in said and "failed (exit 1)" not in said
    figures.record("fuzz-environment", {"command": command, "variables": sorted(environment), "exit": code})
