"""Faults that come and go: a plan's stacking check reasons over each fault's window. The same
fault on the same target in windows that do not overlap is one plan (a flapping link); windows
that may overlap are still checked against each other, and a window the plan cannot bound
(a fault in the background, one with no end) overlaps everything after it."""

from pathlib import Path
from types import SimpleNamespace

import yaml
from hypothesis import given
from hypothesis import strategies as st

from chaos import landed, plan, run
from chaos.faults import Context

PARTITION = {"kind": "network-partition", "nodes": ["n1"], "ttl_seconds": 60}


def action(name: str, func: str, **arguments) -> dict:
    return {"type": "action", "name": name, "provider": {"type": "python", "module": "chaos.actions", "func": func,
                                                         "arguments": arguments}}


def spans(tmp_path: Path, *method: dict, rollbacks: tuple[dict, ...] = ()) -> list[plan.Span]:
    path = tmp_path / "e.yaml"
    path.write_text(yaml.safe_dump({"title": "t", "description": "d", "method": list(method),
                                    "rollbacks": list(rollbacks)}))
    experiment = run.load(path)
    assert len(experiment.spans) == len(experiment.faults)
    return experiment.spans


def pairs(found: list[plan.Span]) -> set[tuple[int, int]]:
    """The pairs of faults whose windows overlap."""
    return {(i, j) for i in range(len(found)) for j in range(i + 1, len(found)) if found[i].overlaps(found[j])}


def test_a_timelines_windows_overlap_only_where_their_times_do(tmp_path):
    timeline = [{"at": 0, "for": 3, "fault": PARTITION}, {"at": 5, "for": 3, "fault": PARTITION},
                {"at": 7, "for": 1, "fault": PARTITION}, {"at": 8, "fault": PARTITION}]
    found = spans(tmp_path, action("flap", "replay_timeline", timeline=timeline))
    # [0,3) [5,8) [7,8) [8,end): the second and third overlap, the last touches the second's end only.
    assert pairs(found) == {(1, 2)}


def test_a_revert_of_the_runs_faults_ends_every_window_before_it(tmp_path):
    apply = action("down", "apply_fault", fault=PARTITION)
    heal = action("heal", "revert_faults")
    assert pairs(spans(tmp_path, apply, heal, apply, heal, apply)) == set()
    assert pairs(spans(tmp_path, apply, apply)) == {(0, 1)}  # nothing in between ends the first
    # A timeline's open window lasts until the revert after it; a closed one ends with the replay.
    open_ = action("flap", "replay_timeline", timeline=[{"at": 0, "fault": PARTITION}])
    closed = action("flap", "replay_timeline", timeline=[{"at": 0, "for": 2, "fault": PARTITION}])
    assert pairs(spans(tmp_path, open_, apply)) == {(0, 1)}
    assert pairs(spans(tmp_path, closed, apply)) == set()
    assert pairs(spans(tmp_path, open_, heal, apply)) == set()


def test_a_fault_in_the_background_overlaps_whatever_comes_after_it_reverts_included(tmp_path):
    background = {**action("flap", "replay_timeline", timeline=[{"at": 0, "for": 1, "fault": PARTITION}]),
                  "background": True}
    assert pairs(spans(tmp_path, background, action("heal", "revert_faults"),
                       action("down", "apply_fault", fault=PARTITION))) == {(0, 1)}
    # A revert in the background ends nothing for certain: it runs beside what follows it.
    assert pairs(spans(tmp_path, action("down", "apply_fault", fault=PARTITION),
                       {**action("heal", "revert_faults"), "background": True},
                       action("down", "apply_fault", fault=PARTITION))) == {(0, 1)}


def test_a_rollbacks_fault_comes_after_the_methods_revert(tmp_path):
    found = spans(tmp_path, action("down", "apply_fault", fault=PARTITION), action("heal", "revert_faults"),
                  rollbacks=(action("again", "apply_fault", fault=PARTITION),))
    assert pairs(found) == set()


points = st.tuples(st.integers(0, 3), st.integers(0, 3), st.floats(0, 100))


def within(point: tuple, span: plan.Span) -> bool:
    return span.start <= point < span.end


@given(points, points, points, points)
def test_two_spans_overlap_exactly_when_some_moment_is_in_both(a, b, c, d):
    x, y = plan.Span(min(a, b), max(a, b)), plan.Span(min(c, d), max(c, d))
    # If two windows share a moment, they share the later of their starts.
    assert x.overlaps(y) == y.overlaps(x) == any(within(p, x) and within(p, y) for p in (x.start, y.start))
    assert plan.ALWAYS.overlaps(x) == (x.start < x.end)  # a window the plan cannot bound: every other one


def test_resolve_checks_each_fault_against_the_earlier_ones_its_window_overlaps():
    seen: dict[str, list[str]] = {}

    def check(_ctx, spec, _found, where, earlier):
        seen[where] = [entry for entry, _record in earlier]

    kind = SimpleNamespace(targets=lambda _ctx, _spec, _where: [{"node": "n1"}], check=check,
                           prepare=lambda _ctx, _spec, _target, _id: {})
    ctx = Context(SimpleNamespace(batch=lambda fn, items: [fn(x) for x in items]), None, "run-w",
                  say=lambda _m: None)
    parsed = [(f"f[{i}]", kind, SimpleNamespace(kind="network-partition", allow_empty=False), landed.Options())
              for i in range(4)]
    windows = [plan.Span((0.0,), (3.0,)), plan.Span((5.0,), (8.0,)), plan.Span((7.0,), (9.0,)),
               plan.Span((9.0,), (float("inf"),))]
    plan.resolve(ctx, parsed, windows)
    assert seen == {"f[0]": [], "f[1]": [], "f[2]": ["f[1]"], "f[3]": []}
    plan.resolve(ctx, parsed)  # without windows, every fault of a plan is in place at once
    assert seen == {"f[0]": [], "f[1]": ["f[0]"], "f[2]": ["f[0]", "f[1]"], "f[3]": ["f[0]", "f[1]", "f[2]"]}
