"""The one decision of the apply-hold-revert loop (`next_step`, checked against a direct reading
of the schedule's rules), and where exit codes and connections come from."""

import pytest

from chaos.errors import Aborted, Exit, KilocardError, KubeError, SpecError, TargetConflict, exit_code
from chaos.kube import Kube
from chaos.lifecycle import Step, Window, next_step


def windows(*spans):
    return [Window(at, until, lambda: None) for at, until in spans]


def test_kilocard_fault_holds_its_faults_for_the_duration_once_all_are_in_place():
    held = windows((0, None), (0, None))  # `kilocard fault`: every fault at 0, held to the end
    assert next_step(0.0, held, set(), set(), 0.0, 30, stopping=False) == Step("apply", 0)
    assert next_step(4.0, held, {0}, set(), 4.0, 30, stopping=False) == Step("apply", 1)  # still applying
    assert next_step(10.0, held, {0, 1}, set(), 9.0, 30, stopping=False) == Step("wait", seconds=29.0)
    assert next_step(39.0, held, {0, 1}, set(), 9.0, 30, stopping=False) == Step("end")  # 30 s after the last apply
    assert next_step(10.0, held, {0, 1}, set(), 9.0, 0, stopping=False) == Step("end")  # no hold
    assert next_step(1.0, held, {0}, set(), 1.0, 30, stopping=True) == Step("end")  # Ctrl-C, SIGTERM: skip the rest


def test_a_replay_reverts_each_window_when_it_ends_and_watches_after_the_last():
    timeline = windows((0.6, None), (0, 0.4), (0.2, 0.4))
    assert next_step(0.0, timeline, set(), set(), 0.0, 5, False) == Step("apply", 1)
    assert next_step(0.1, timeline, {1}, set(), 0.1, 5, False) == Step("wait", seconds=0.1)
    assert next_step(0.4, timeline, {1, 2}, set(), 0.2, 5, False) == Step("revert", 1)  # earliest end, then position
    assert next_step(0.4, timeline, {1, 2}, {1}, 0.2, 5, False) == Step("revert", 2)
    assert next_step(0.7, timeline, {0, 1, 2}, {1, 2}, 0.65, 5, False) == Step("wait", seconds=4.95)
    # An apply that returned after its window ended: reverted at once, and watched from its return.
    late = windows((0, 0.1))
    assert next_step(0.3, late, {0}, set(), 0.3, 0.5, False) == Step("revert", 0)
    assert next_step(0.3, late, {0}, {0}, 0.3, 0.5, False) == Step("wait", seconds=0.5)


def test_no_step_is_ever_skipped_or_repeated():
    """Followed step by step on a random schedule, every window is applied once, in (at, position)
    order, each one with an end reverted once, never before its end, and the schedule ends `observe`
    after the last window's end or apply."""
    import random

    for seed in range(200):
        rng = random.Random(seed)
        spans = [(at, None if rng.random() < 0.3 else at + rng.choice([0.5, 1.0, 3.0]))
                 for at in (rng.choice([0.0, 1.0, 2.0, 4.0]) for _ in range(rng.randint(1, 5)))]
        timeline, now, applied, reverted, last, log = windows(*spans), 0.0, [], [], 0.0, []
        observe = rng.choice([0.0, 2.0])
        while True:
            step = next_step(now, timeline, applied, reverted, last, observe, False)
            if step.what == "end":
                break
            log.append((step.what, step.window, now))
            if step.what == "apply":
                applied.append(step.window)
                now += rng.choice([0.0, 0.2, 2.5])  # an apply takes time
                last = now
            elif step.what == "revert":
                reverted.append(step.window)
            else:
                assert step.seconds > 0
                now += step.seconds
        assert applied == sorted(range(len(spans)), key=lambda i: (spans[i][0], i)), (seed, log)
        assert sorted(reverted) == [i for i, (_, until) in enumerate(spans) if until is not None], (seed, log)
        assert all(at >= spans[i][1] for what, i, at in log if what == "revert"), (seed, log)
        assert all(at >= spans[i][0] for what, i, at in log if what == "apply"), (seed, log)
        assert now >= max([last, *(u if u is not None else a for a, u in spans)]) + observe - 1e-9, (seed, log)


def test_one_definition_of_the_exit_codes():
    assert [exit_code(e("x")) for e in (SpecError, TargetConflict, KilocardError, KubeError, Aborted)] == [
        Exit.INVALID, Exit.INVALID, Exit.FAILED, Exit.FAILED, Exit.ABORTED]
    assert [int(e) for e in Exit] == [0, 1, 2, 3, 4]


def test_no_cluster_is_a_clear_error(tmp_path, monkeypatch):
    for var in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(SpecError, match="no cluster: pass --kubeconfig"):
        Kube.connect(fallback=None)
    with pytest.raises(SpecError, match="kubeconfig /nonexistent"):
        Kube.connect("/nonexistent")


def test_in_cluster_reads_the_service_account(tmp_path, monkeypatch):
    (tmp_path / "token").write_text("abc")
    (tmp_path / "ca.crt").write_text("-----BEGIN CERTIFICATE-----\n")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    kube = Kube.in_cluster(tmp_path)
    try:
        configuration = kube.api_client.configuration
        assert configuration.host == "https://127.0.0.1:443"
        assert configuration.get_api_key_with_prefix("BearerToken").lower() == "bearer abc"  # no request made
    finally:
        kube.close()
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST")
    with pytest.raises(SpecError, match="in-cluster configuration"):
        Kube.in_cluster(tmp_path)
