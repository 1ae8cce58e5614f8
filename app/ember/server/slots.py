"""`--parallel N`: N contexts on one model, each worked by a thread; requests beyond them
wait first come, first served; the contexts' decodes take turns at a DecodeGate so together
they never ask for more threads than the machine has cores."""
from __future__ import annotations

import queue
import threading
from collections import deque

from ..engine import DecodeGate, Model, Session, SpeculativeParams, default_threads
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


def common_prefix(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


class _Slot:
    """One context and the thread that works it; a job is handed over through `inbox`."""

    def __init__(self, ctx, speculative=None):
        self.ctx = ctx
        self.session = Session(ctx, speculative=speculative)  # its drafts' context, kept
        self.inbox: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        self.last_used = 0

    def reuse(self, ids: list[int]) -> int:
        """Tokens of ids this slot's cache would spare evaluating, counted only when they
        are most of what it holds: a shared system prompt alone is no reason to overwrite
        another conversation."""
        cached = self.ctx.cached
        common = common_prefix(cached, ids)
        return common if 2 * common >= len(cached) else 0


class SlotPool:
    """A new job goes to the idle slot whose KV cache holds the beginning of its prompt (a
    chat's next turn finds its history still evaluated), else to the one least recently
    used; with no slot idle it waits, and a slot that comes free takes the oldest job."""

    def __init__(self, model: Model, n_slots: int, n_ctx: int | None = None,
                 n_threads: int | None = None, speculative: SpeculativeParams | None = None):
        self.threads, self.width = plan_threads(n_slots, n_threads, default_threads())
        self.gate = DecodeGate(self.width)
        self.contexts = [model.new_context(n_ctx=n_ctx, n_threads=self.threads, gate=self.gate)
                         for _ in range(n_slots)]
        self.n_ctx = self.contexts[0].n_ctx
        self._slots = [_Slot(ctx, speculative) for ctx in self.contexts]
        self._idle = list(self._slots)
        self._waiting: deque[Job] = deque()
        self._lock = threading.Lock()
        self._finished = 0
        self._cancelled = 0
        self._uses = 0
        # what every generation so far added up to (/metrics)
        self.totals = {"prompt_tokens": 0, "prompt_tokens_evaluated": 0, "prompt_seconds": 0.0,
                       "generated_tokens": 0, "generation_seconds": 0.0,
                       "draft_tokens": 0, "draft_tokens_accepted": 0}
        self._threads = [threading.Thread(target=self._work, args=(slot,), daemon=True,
                                          name=f"ember-slot-{i}")
                         for i, slot in enumerate(self._slots)]
        for t in self._threads:
            t.start()

    def submit(self, job: Job) -> None:
        with self._lock:
            if not self._idle:
                self._waiting.append(job)
                return
            slot = max(self._idle, key=lambda s: (s.reuse(job.ids), -s.last_used))
            self._idle.remove(slot)
            self._uses += 1
            slot.last_used = self._uses
        slot.inbox.put(job)

    def status(self) -> dict:
        with self._lock:
            idle = len(self._idle)
            waiting = len(self._waiting)
            finished, cancelled = self._finished, self._cancelled
        return {"slots_idle": idle, "slots_processing": len(self._slots) - idle,
                "requests_waiting": waiting, "requests_finished": finished,
                "requests_cancelled": cancelled}

    def slots(self) -> list[dict]:
        """Each slot as llama-server's /slots lists it (the tokens its cache holds too)."""
        with self._lock:
            idle = set(map(id, self._idle))
        return [{"id": i, "n_ctx": slot.ctx.n_ctx, "is_processing": id(slot) not in idle,
                 "n_cached_tokens": len(slot.ctx.cached)}
                for i, slot in enumerate(self._slots)]

    def metrics(self) -> dict:
        """status() and the totals, read at one moment."""
        out = self.status()
        with self._lock:
            out.update(self.totals)
        return out

    def _next(self, slot: _Slot) -> Job | None:
        """The oldest waiting job whose client is still there, or None (the slot is idle)."""
        with self._lock:
            while self._waiting:
                job = self._waiting.popleft()
                if not job.cancelled:
                    return job
                self._cancelled += 1  # its client left while it waited
            self._idle.append(slot)
            return None

    def _run(self, slot: _Slot, job: Job) -> None:
        stats = None
        try:
            stats = run_job(slot.ctx, job, slot.session)
        except Exception as e:  # noqa: BLE001 (a bug must not take the slot down)
            job.emit("error", f"internal error: {type(e).__name__}: {e}")
        with self._lock:
            if job.cancelled:
                self._cancelled += 1
            else:
                self._finished += 1
            if stats is not None:
                t = self.totals
                t["prompt_tokens"] += stats.prompt_tokens
                t["prompt_tokens_evaluated"] += stats.prompt_evaluated
                t["prompt_seconds"] += stats.prompt_seconds
                t["generated_tokens"] += stats.generated_tokens
                t["generation_seconds"] += stats.generation_seconds
                t["draft_tokens"] += stats.draft_tokens
                t["draft_tokens_accepted"] += stats.draft_accepted

    def _work(self, slot: _Slot) -> None:
        while True:
            job = slot.inbox.get()
            if job is None:  # close()
                return
            while job is not None:
                self._run(slot, job)
                job = self._next(slot)

    def close(self, timeout: float = 5.0) -> None:
        """Cancels what runs and what waits, stops the threads."""
        with self._lock:
            for job in self._waiting:
                job.cancel()  # skipped by _next
        for ctx in self.contexts:
            ctx.cancel()
        for slot in self._slots:
            slot.inbox.put(None)
        for t in self._threads:
            t.join(timeout)
