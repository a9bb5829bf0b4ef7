"""Kube.batch: the one bounded pool every batched call goes through."""

import threading
import time

from kubernetes import client

from chaos.kube import MAX_IN_FLIGHT, Kube


def make() -> Kube:
    return Kube(client.ApiClient(client.Configuration()))


def test_results_in_order_and_never_more_than_the_bound_in_flight():
    kube, lock = make(), threading.Lock()
    now, peak = [0], [0]

    def call(x: int) -> int:
        with lock:
            now[0] += 1
            peak[0] = max(peak[0], now[0])
        time.sleep(0.01)
        with lock:
            now[0] -= 1
        return x * x

    try:
        assert kube.batch(call, range(3 * MAX_IN_FLIGHT)) == [x * x for x in range(3 * MAX_IN_FLIGHT)]
        assert 1 < peak[0] <= MAX_IN_FLIGHT
    finally:
        kube.close()


def test_workers_are_kept_between_batches():
    kube = make()

    # Every round of MAX_IN_FLIGHT items meets at a barrier: the pool must grow to its bound, on
    # a busy machine too (a sleep only makes that likely).
    meet = threading.Barrier(MAX_IN_FLIGHT, timeout=30)

    def worker(_x: int) -> int:
        meet.wait()
        return threading.get_ident()

    try:
        first = set(kube.batch(worker, range(3 * MAX_IN_FLIGHT)))
        second = set(kube.batch(worker, range(3 * MAX_IN_FLIGHT)))
        assert len(first) == MAX_IN_FLIGHT and second <= first and threading.get_ident() not in first
    finally:
        kube.close()


def test_a_batch_inside_a_batch_runs_in_its_worker_rather_than_deadlocking():
    kube = make()
    try:
        nested = kube.batch(lambda x: sum(kube.batch(lambda y: y, range(x))), range(2 * MAX_IN_FLIGHT))
        assert nested == [x * (x - 1) // 2 for x in range(2 * MAX_IN_FLIGHT)]
    finally:
        kube.close()
