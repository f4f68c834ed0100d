"""llama.cpp's engine starts its threads with SIGTERM and SIGINT blocked: a signal that lands
while the engine starts is delivered to the main thread once it has started (where the
harness's handler ends the build), never to an engine thread nor into the start-up wait (a
build killed between two answer chunks used to hang in the engine's constructor)."""

from __future__ import annotations

import os
import signal
import threading

from harness.generation.backends import _start_with_signals_held


def test_threads_started_inside_hold_the_signals_and_a_signal_meanwhile_is_delivered_after():
    got: list[int] = []
    old = signal.signal(signal.SIGTERM, lambda signum, frame: got.append(signum))
    try:
        masks: dict[str, set] = {}

        def start():
            def engine_thread():
                masks["engine"] = signal.pthread_sigmask(signal.SIG_BLOCK, [])

            t = threading.Thread(target=engine_thread)
            t.start()
            t.join()
            os.kill(os.getpid(), signal.SIGTERM)  # lands during the start
            masks["during"] = signal.pthread_sigmask(signal.SIG_BLOCK, [])
            return "started"

        assert _start_with_signals_held(start) == "started"
        assert {signal.SIGTERM, signal.SIGINT} <= masks["engine"] and {signal.SIGTERM, signal.SIGINT} <= masks["during"]
        assert got == [signal.SIGTERM]  # pending until the mask was restored, then handled here
        assert signal.SIGTERM not in signal.pthread_sigmask(signal.SIG_BLOCK, [])  # restored
    finally:
        signal.signal(signal.SIGTERM, old)
