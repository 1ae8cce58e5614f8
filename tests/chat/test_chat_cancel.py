"""CancelToken, the one cancel type: a Stop reaches whatever the request runs on, also
when that is attached only after the Stop (an endpoint's stream opening, a server slot
picking the job up)."""
from __future__ import annotations

import threading

from ember.chat import CancelToken


class Target:
    def __init__(self):
        self.calls = 0

    def cancel(self):
        self.calls += 1


def test_cancel_reaches_the_attached_target():
    t, target = CancelToken(), Target()
    t.attach(target)
    assert not t.cancelled and target.calls == 0
    t.cancel()
    assert t.cancelled and target.calls == 1


def test_a_target_attached_after_a_stop_is_cancelled_at_once():
    t, target = CancelToken(), Target()
    t.cancel()
    t.attach(target)
    assert target.calls == 1


def test_a_detached_target_is_left_alone():
    t, target = CancelToken(), Target()
    t.attach(target)
    t.attach(None)  # the request is over: its context serves the next one
    t.cancel()
    assert t.cancelled and target.calls == 0


def test_cancel_and_attach_race_cancel_the_target_exactly_once():
    for _ in range(200):
        t, target = CancelToken(), Target()
        go = threading.Barrier(2)

        def stop():
            go.wait()
            t.cancel()
        th = threading.Thread(target=stop)
        th.start()
        go.wait()
        t.attach(target)
        th.join()
        assert target.calls == 1
