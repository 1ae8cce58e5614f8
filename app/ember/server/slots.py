"""`--parallel N`: N contexts on one model, each worked by a thread that takes jobs from
one first-come queue; the contexts' decodes take turns at a DecodeGate so together they
never ask for more threads than the machine has cores."""
from __future__ import annotations

import queue
import threading

from ..engine import DecodeGate, Model, default_threads
from .jobs import Job, run_job


def plan_threads(n_slots: int, n_threads: int | None, cores: int) -> tuple[int | None, int]:
    """(threads per context, decodes at once). One slot gets every core. Several share
    them: a decode of one token on a small model gains little from a second thread (the
    threads wait for each other at every op), so several one-thread decodes at once give
    more tokens per second in all than one two-thread decode at a time."""
    if n_threads:
        return n_threads, max(1, cores // n_threads)
    if n_slots == 1:
        return None, 1
    per_context = max(1, cores // n_slots)
    return per_context, max(1, cores // per_context)


class SlotPool:
    def __init__(self, model: Model, n_slots: int, n_ctx: int | None = None,
                 n_threads: int | None = None):
        self.threads, self.width = plan_threads(n_slots, n_threads, default_threads())
        self.gate = DecodeGate(self.width)
        self.contexts = [model.new_context(n_ctx=n_ctx, n_threads=self.threads, gate=self.gate)
                         for _ in range(n_slots)]
        self.n_ctx = self.contexts[0].n_ctx
        self._queue: queue.Queue[Job | None] = queue.Queue()
        self._lock = threading.Lock()
        self._busy = 0
        self._finished = 0
        self._cancelled = 0
        self._threads = [threading.Thread(target=self._work, args=(ctx,), daemon=True,
                                          name=f"ember-slot-{i}")
                         for i, ctx in enumerate(self.contexts)]
        for t in self._threads:
            t.start()

    def submit(self, job: Job) -> None:
        self._queue.put(job)

    def status(self) -> dict:
        with self._lock:
            busy = self._busy
            finished, cancelled = self._finished, self._cancelled
        return {"slots_idle": len(self.contexts) - busy, "slots_processing": busy,
                "requests_waiting": self._queue.qsize(), "requests_finished": finished,
                "requests_cancelled": cancelled}

    def _work(self, ctx) -> None:
        while True:
            job = self._queue.get()
            if job is None:
                return
            if job.cancelled.is_set():  # its client left while it waited
                with self._lock:
                    self._cancelled += 1
                continue
            with self._lock:
                self._busy += 1
            try:
                run_job(ctx, job)
            except Exception as e:  # noqa: BLE001 (a bug must not take the slot down)
                job.emit("error", f"internal error: {type(e).__name__}: {e}")
            finally:
                with self._lock:
                    self._busy -= 1
                    if job.cancelled.is_set():
                        self._cancelled += 1
                    else:
                        self._finished += 1

    def close(self, timeout: float = 5.0) -> None:
        """Cancels what runs, stops the threads."""
        for ctx in self.contexts:
            ctx.cancel()
        for _ in self._threads:
            self._queue.put(None)
        for t in self._threads:
            t.join(timeout)
