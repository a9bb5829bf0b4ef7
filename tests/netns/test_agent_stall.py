"""rank-stall through the real node agent on real processes: a pod's cgroup made by the test,
frozen by the cgroup v2 freezer, the v1 freezer or SIGSTOP, and thawed on revert, on the agent's
SIGTERM, on TTL expiry and by the restart after a crash; the effect read back, and a thaw behind
the agent's back read back as a mismatch."""

from __future__ import annotations

import signal
import time

import pytest

from tests.netns.cgroup import pod_cgroup
from tests.netns.netns import start_agent


def stall(a, pod, ttl=60, method="freeze", container=True):
    return a.call("POST", "/v1/faults", {"kind": "rank-stall", "target": pod.target(container),
                                         "params": {"method": method}, "ttl_seconds": ttl, "run_id": "stall-test"})


def effect(a, fault):
    status, body = a.call("GET", f"/v1/faults/{fault['id']}/effect")
    assert status == 200, body
    return body


def settled(a, fault, want="confirmed", seconds=5.0):
    deadline = time.monotonic() + seconds
    while (body := effect(a, fault))["status"] != want and time.monotonic() < deadline:
        time.sleep(0.1)
    return body


@pytest.mark.parametrize("version", [2, 1])
def test_the_freezer_stops_the_process_and_a_revert_thaws_it(agent, tmp_path, version):
    a = agent()
    with pod_cgroup(tmp_path, version) as pod:
        status, fault = stall(a, pod)
        assert status == 201, fault
        body = settled(a, fault)
        assert body["status"] == "confirmed" and f"cgroup v{version}" in body["evidence"], body
        assert pod.frozen() and not pod.progressing()
        assert a.call("DELETE", f"/v1/faults/{fault['id']}")[0] == 200
        assert not pod.frozen() and pod.progressing()


def test_sigstop_stops_every_process_and_sigcont_resumes_them(agent, tmp_path):
    a = agent()
    with pod_cgroup(tmp_path) as pod:
        status, fault = stall(a, pod, method="sigstop")
        assert status == 201, fault
        assert settled(a, fault)["status"] == "confirmed"
        assert pod.state() == "T" and not pod.progressing()
        assert a.call("DELETE", f"/v1/faults/{fault['id']}")[0] == 200
        assert pod.state() != "T" and pod.progressing()


def test_the_whole_pod_is_frozen_when_no_container_is_named(agent, tmp_path):
    a = agent()
    with pod_cgroup(tmp_path) as pod:
        status, fault = stall(a, pod, container=False)
        assert status == 201, fault
        assert settled(a, fault)["status"] == "confirmed"
        assert pod.frozen() and not pod.progressing()  # frozen through its pod's cgroup


def test_ttl_expiry_thaws_with_no_client_alive(agent, tmp_path):
    a = agent()
    with pod_cgroup(tmp_path) as pod:
        assert stall(a, pod, ttl=2)[0] == 201
        assert not pod.progressing()
        deadline = time.monotonic() + 10
        while pod.frozen() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not pod.frozen() and pod.progressing()
        assert a.call("GET", "/v1/faults")[1] == {"faults": []}


@pytest.mark.parametrize("method", ["freeze", "sigstop"])
def test_sigterm_thaws_and_a_restart_thaws_what_a_killed_agent_left(agent, tmp_path, method):
    with pod_cgroup(tmp_path) as pod:
        a = agent()
        assert stall(a, pod, method=method)[0] == 201
        assert not pod.progressing()
        a.proc.send_signal(signal.SIGTERM)
        assert a.proc.wait(timeout=30) == 0
        assert pod.progressing()

        b = agent()
        assert stall(b, pod, method=method)[0] == 201
        b.proc.kill()  # SIGKILL: nothing thawed
        b.proc.wait()
        assert not pod.progressing()
        restarted = start_agent(b.argv)  # the same state file: it thaws what it finds there
        try:
            assert pod.progressing()
        finally:
            restarted.terminate()
            restarted.wait(timeout=30)


@pytest.mark.parametrize("method", ["freeze", "sigstop"])
def test_a_thaw_behind_the_agents_back_reads_back_as_a_mismatch(agent, tmp_path, method):
    a = agent()
    with pod_cgroup(tmp_path) as pod:
        status, fault = stall(a, pod, method=method)
        assert status == 201 and settled(a, fault)["status"] == "confirmed"
        if method == "freeze":
            (pod.leaf / "cgroup.freeze").write_text("0")  # someone thaws it by hand
        else:
            pod.proc.send_signal(signal.SIGCONT)
        body = settled(a, fault, "mismatch")
        assert body["status"] == "mismatch" and pod.progressing(), body


def test_a_pod_not_on_this_node_is_refused_and_its_revert_is_harmless(agent, tmp_path):
    a = agent()
    status, body = a.call("POST", "/v1/faults", {"kind": "rank-stall", "target": {
        "pod_uid": "00000000-0000-4000-8000-000000000000"}, "ttl_seconds": 30, "run_id": "stall-test"})
    assert status == 404 and "no cgroup for pod" in body["error"], body
    assert a.call("GET", "/v1/faults")[1] == {"faults": []}


@pytest.mark.parametrize("bad", [{"pod_uid": "../../etc"}, {"pod_uid": "00000000-0000-4000-8000-000000000000",
                                                          "container_id": "abc; rm -rf /"}])
def test_targets_that_are_not_ids_never_reach_the_filesystem(agent, bad):
    a = agent()
    status, body = a.call("POST", "/v1/faults", {"kind": "rank-stall", "target": bad, "ttl_seconds": 5})
    assert status == 400 and body["field"].startswith("target."), body
