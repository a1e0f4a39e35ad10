"""``Worker``: claim queued runs, keep their leases alive, hand them to a handler.

A worker loops: ``claim`` a run (one statement; ``SKIP LOCKED`` on
PostgreSQL), load its latest checkpoint, call ``handler(job)`` while a
background thread heartbeats the lease, then release the run. Any number of
workers in any number of processes and machines can share one store: the
lease epoch fences off a worker that stalled past its lease (GC pause,
SIGSTOP, network partition) — its next save raises ``LeaseLost`` and changes
nothing. The way to write a handler is a ``Run`` under the job's lease,
from the checkpoint the worker loaded (``job.open_run()``: no second load)::

    def handler(job: Job) -> Status | None:
        run = job.open_run()
        while run.active:
            if job.stopping:
                return None          # back to the queue; the next worker resumes it
            ...                      # one step
            run.commit()
        return run.status

Its return value decides what happens to the run: a ``Status`` releases it
with that status; ``None`` puts it back in the queue.

Faults are not failures. ``StoreUnavailable`` (a restart, a dropped
connection, a full disk, a lock timeout) is retried by the one policy in
``safepoint.retrying`` — in claims, heartbeats, releases, ``job.save`` and
``Run`` under a lease — and if it outlasts the policy the run goes back to
the queue (or its lease simply expires): never ``failed``.

Poison runs are quarantined. Every claim counts an attempt. A handler that
raises, or a run that cannot be loaded (a migration that raises), is put
back with ``retry_at = now + backoff * 2**(attempts - 1)``; at
``max_attempts`` it is released as ``failed`` with ``last_error`` — the
exception's type and its own message, scrubbed and truncated — visible in
``store.run(id)`` and ``runs()``, until ``store.requeue(id)``. A run whose
stored rows fail their digest (``CorruptCheckpoint``) is quarantined at
once: reading it again reads the same bytes.

Runs this worker cannot read are not the runs' fault. A run saved by newer
code is never claimed (the claim skips heads above the store's
``schema_version``), and ``stop_when_idle`` does not wait for it; an old
worker's gauge ``safepoint.queue.too_new`` counts them. A run sealed under
a key the worker's keyring lacks (``MissingKey``, ``InvalidKey``,
``EncryptedStore``) goes back with its attempt uncounted and held back for
two lease periods, for a worker that holds the key. Nothing about one run
ends the worker's loop.

The package: ``loop.py`` is the ``Worker`` (claim, load, heartbeat, handler,
release), ``job.py`` the ``Job`` a handler gets, ``attempts.py`` the attempt
policy (backoff, quarantine, the recorded error). It is a client of the
public store like the CLI: every transaction it makes is a store method
(``claim``, ``load``, ``heartbeat``, ``release`` with what the attempt
policy records, ``claimable_in`` and ``queue_too_new`` when idle), reported,
sealed and retried as any caller's.
"""

from __future__ import annotations

from .job import Handler, Job
from .loop import Worker

__all__ = ["Handler", "Job", "Worker"]
