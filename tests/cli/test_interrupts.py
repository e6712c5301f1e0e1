"""Ctrl-C and SIGTERM reach a ``catdask`` command even when they land in a gc callback."""

import gc
import os
import signal

import pytest

from catdask.cli.interrupts import interrupt_handling, interrupted


def test_an_interrupt_raised_inside_a_gc_callback_is_not_lost():
    # distributed registers a gc callback; a SIGINT (or serve's SIGTERM, which it turns into
    # one) handled while it runs raises there, where Python prints the exception and drops it.
    fired = []

    def callback(phase, info):
        if phase == "start" and not fired:
            fired.append(True)
            os.kill(os.getpid(), signal.SIGINT)
            for _ in range(1000):  # the handler runs here, inside the callback
                pass

    gc.callbacks.append(callback)
    try:
        with pytest.raises(KeyboardInterrupt):
            with interrupt_handling(verbose=True):
                gc.collect()
                for _ in range(10_000_000):  # the interrupt, delivered again, stops this loop
                    pass
    finally:
        gc.callbacks.remove(callback)
    assert fired and interrupted()
