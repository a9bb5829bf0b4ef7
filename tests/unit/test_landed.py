"""Fault-landed verification's loop (chaos.landed), with kinds made up for it: every target
decided on its own, looked at again only while undecided, and what an error or a stop means."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

import pytest

from chaos import landed
from chaos.errors import KubeError

SOON = landed.Options(within_seconds=1.0)


def ctx(stop: threading.Event | None = None) -> Any:
    return SimpleNamespace(kube=SimpleNamespace(batch=lambda fn, items: [fn(x) for x in items]),
                           stop=stop or threading.Event())


def kind(**looks: Any) -> Any:
    return SimpleNamespace(**looks)


SPEC = SimpleNamespace(kind="made-up", ttl_seconds=0.0)
TARGETS = [({"name": "a"}, {}), ({"name": "b"}, {})]


def test_each_target_is_decided_on_its_own_and_only_the_undecided_are_looked_at_again() -> None:
    asked: list[list[str]] = []

    def verify_all(_ctx, _spec, targets):
        asked.append([t["name"] for t, _u in targets])
        return [("confirmed", f"{t['name']} landed") if t["name"] == "a" or len(asked) >= 3
                else ("mismatch", f"{t['name']} not yet") for t, _u in targets]

    a, b = landed.verify_all(ctx(), kind(verify_all=verify_all), SPEC, TARGETS, SOON)
    assert asked == [["a", "b"], ["b"], ["b"]]
    assert (a["status"], b["status"]) == ("confirmed", "confirmed") and a["seconds"] < b["seconds"]


def test_once_its_time_is_out_the_last_look_stands() -> None:
    a, b = landed.verify_all(ctx(), kind(verify_all=lambda _c, _s, ts: [("mismatch", "still there")] * len(ts)),
                             SPEC, TARGETS, landed.Options(within_seconds=0.3))
    assert a["status"] == b["status"] == "mismatch" and a["seconds"] >= 0.3


def test_a_look_that_could_not_be_made_is_looked_at_again_and_a_broken_one_is_final() -> None:
    calls = []

    def api_down(_ctx, _spec, targets):
        calls.append(1)
        if len(calls) == 1:
            raise KubeError("get pods: 503")
        return [KubeError("get pod b: 503") if t["name"] == "b" else ("confirmed", "gone") for t, _u in targets]

    a, b = landed.verify_all(ctx(), kind(verify_all=api_down), SPEC, TARGETS, landed.Options(within_seconds=0.5))
    assert a["status"] == "confirmed" and b == {**b, "status": "inconclusive",
                                                "evidence": "could not read the effect back: get pod b: 503"}
    (bug,) = landed.verify_all(ctx(), kind(verify_all=lambda *_a: 1 / 0), SPEC, TARGETS[:1], SOON)
    assert bug["status"] == "inconclusive" and bug["evidence"].startswith("the read-back failed: ZeroDivisionError")
    assert bug["seconds"] < 0.2  # final: not looked at again


def test_stopped_before_it_showed_is_inconclusive_and_an_unknown_status_never_confirms() -> None:
    stop = threading.Event()
    stop.set()
    (stopped,) = landed.verify_all(ctx(stop), kind(verify=lambda *_a: ("mismatch", "not yet")), SPEC, TARGETS[:1],
                                   SOON)
    assert stopped["evidence"] == "stopped before the effect could be read back (mismatch: not yet)"
    (odd,) = landed.verify_all(ctx(), kind(verify=lambda *_a: ("maybe", "who knows")), SPEC, TARGETS[:1],
                               landed.Options(within_seconds=0.2))
    assert (odd["status"], odd["evidence"]) == ("inconclusive", "an unknown read-back status 'maybe': who knows")


@pytest.mark.parametrize("looks", [{"verify": lambda *_a: ("mismatch", "none", True)},
                                   {"verify_all": lambda _c, _s, ts: [("mismatch", "none", True)] * len(ts)}])
def test_a_final_look_is_not_repeated_whichever_way_the_kind_looks(looks: dict[str, Any]) -> None:
    said = landed.verify_all(ctx(), kind(**looks), SPEC, TARGETS, SOON)
    assert [s["status"] for s in said] == ["mismatch", "mismatch"] and all(s["seconds"] < 0.2 for s in said)


def test_a_kind_with_no_read_back_is_inconclusive_and_a_fault_near_its_ttl_is_not_waited_on() -> None:
    assert [s["evidence"] for s in landed.verify_all(ctx(), kind(), SPEC, TARGETS, SOON)] == [
        "made-up has no read-back"] * 2
    short = SimpleNamespace(kind="made-up", ttl_seconds=1.0)  # within ends a second before the TTL would
    (said,) = landed.verify_all(ctx(), kind(verify=lambda *_a: ("mismatch", "not yet")), short, TARGETS[:1], SOON)
    assert said["status"] == "mismatch" and said["seconds"] < 0.2
