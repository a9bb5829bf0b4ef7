"""Image pulls under a registry outage, as the simulator plays the kubelet (testbed/simulator/pulls.py),
and the registry an image pulls from (chaos.agent.kinds.pull_block)."""

import pytest

from chaos.agent.kinds.pull_block import endpoint, registry_of
from testbed.simulator.pulls import Pulls, retry_at


@pytest.mark.parametrize("image, registry, host", [
    ("vllm/vllm-openai:v0.11.0", "docker.io", ("registry-1.docker.io", 443)),
    ("ubuntu", "docker.io", ("registry-1.docker.io", 443)),
    ("docker.io/library/ubuntu:24.04", "docker.io", ("registry-1.docker.io", 443)),
    ("index.docker.io/vllm/vllm-openai", "docker.io", ("registry-1.docker.io", 443)),
    ("nvcr.io/nvidia/tritonserver:24.08", "nvcr.io", ("nvcr.io", 443)),
    ("harbor.internal:5000/llm/vllm@sha256:abc", "harbor.internal:5000", ("harbor.internal", 5000)),
    ("localhost/engine", "localhost", ("localhost", 443)),
    ("lmsysorg/sglang:latest", "docker.io", ("registry-1.docker.io", 443)),
])
def test_the_registry_of_an_image_by_the_references_rules(image, registry, host):
    assert registry_of(image) == registry and endpoint(registry) == host


def test_retries_follow_the_kubelets_back_off_doubling_to_thirty_times_the_first():
    # Failed at 0 with a 1 s back-off: retries at 1, 3, 7, 15, 31, then every 30 s.
    assert [retry_at(0, 1, t) for t in (0, 1, 1.5, 8, 16, 31.5, 62, 70)] == [1, 1, 3, 15, 31, 61, 91, 91]
    assert retry_at(5, 0, 12.5) == 12.5  # no back-off written (the fast timing): at once


def seen(pulls, uid="u1", node="n1", image="vllm/vllm-openai:v1", waits=True, marked=False, backoff=1.0, now=0.0):
    return pulls.seen(uid, "ns", f"pod-{uid}", node, image, waits, marked, backoff, now)


def test_a_pod_waiting_for_its_image_on_a_blocked_node_is_marked_and_unmarked_at_the_retry_after_the_outage():
    pulls = Pulls()
    assert seen(pulls) is None  # no outage: pulls as usual
    pulls.block("n1", "f1", ["docker.io"])
    assert seen(pulls, uid="u2", image="nvcr.io/x") is None  # another registry: not refused
    assert seen(pulls, uid="u3", node="n2") is None  # another node: not refused
    assert seen(pulls, uid="u4", waits=False) is None  # running: its image is on disk
    assert seen(pulls, uid="u5", now=10.0) is True
    assert seen(pulls, uid="u5", marked=True, now=10.5) is None
    assert pulls.due(20.0) == []  # the outage goes on
    pulls.unblock("n1", "f1")
    assert pulls.due(20.0) == []  # over at 20: the retries after a failure at 10 come at 11, 13, 17, 25
    assert [w.name for w in pulls.due(25.0)] == ["pod-u5"]
    assert pulls.due(26.0) == []


def test_an_outage_back_before_the_retry_keeps_the_pod_failing():
    pulls = Pulls()
    pulls.block("n1", "f1", ["registry-1.docker.io"])  # Docker Hub by its host's name
    assert seen(pulls, now=0.0) is True
    pulls.unblock("n1", "f1")
    assert pulls.due(2.0) == []
    pulls.block("n1", "f2", ["docker.io"])
    assert pulls.due(3.5) == []  # the retry at 3 found the registry down again
    pulls.unblock("n1", "f2")
    assert pulls.due(5.0) == [] and [w.name for w in pulls.due(7.0)] == ["pod-u1"]


def test_a_mark_with_no_record_is_retried_and_a_started_pods_mark_is_taken_off():
    pulls = Pulls()
    assert seen(pulls, marked=True, now=100.0) is None  # the simulator restarted: the mark stays until a retry
    assert [w.name for w in pulls.due(101.0)] == ["pod-u1"]
    assert seen(pulls, uid="u9", waits=False, marked=True) is False
    pulls.block("n1", "f1", ["docker.io"])
    assert seen(pulls, uid="u7") is True
    pulls.gone("u7")
    pulls.unblock("n1", "f1")
    assert pulls.due(1000.0) == []
