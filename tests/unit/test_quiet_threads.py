"""Ctrl-C and SIGTERM go to the main thread: a thread kilocard starts blocks them, since a signal
the kernel hands to a worker never wakes a main thread blocked in a wait (a `kilocard fault`
holding its faults for ten minutes would revert only when the hold ended)."""

from __future__ import annotations

import signal
import threading

from chaos.vocabulary import quiet_thread


def test_a_quiet_thread_blocks_the_stop_signals_and_the_main_thread_keeps_them():
    masks = []

    def body() -> None:
        quiet_thread()
        masks.append(signal.pthread_sigmask(signal.SIG_BLOCK, []))

    worker = threading.Thread(target=body)
    worker.start()
    worker.join()
    assert {signal.SIGINT, signal.SIGTERM} <= masks[0]
    assert not {signal.SIGINT, signal.SIGTERM} & signal.pthread_sigmask(signal.SIG_BLOCK, [])
