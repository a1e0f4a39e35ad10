"""``safepoint watch``: follow a live run until it stops running.

It polls (every ``--interval``, 1 s by default): the run's row, its queue
state and, when the head moved, the headers of the new steps. It prints
each new step, each status change and each change of holder (a worker's
or an exclusive ``Run``'s lease, or back in the queue), and exits 0 once
the run is no longer running (done, failed, cancelled, or waiting for a
human), 3 when the run is deleted (or was never there).

It opens the store read-only and writes nothing. On PostgreSQL it never
prepares statements, so it works through PgBouncer in transaction mode
(whose older releases lose prepared statements between transactions).
With ``--json`` each event is one JSON object on its own line.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from collections.abc import Iterator
from datetime import datetime
from typing import Any, NamedTuple

import click

from safepoint.cli.gc import parse_duration
from safepoint.cli.output import (
    ID_LEN,
    ExitCode,
    error_object,
    handle_errors,
    holding,
    numbers,
    open_store_at,
    say,
    store_options,
    when,
)
from safepoint.errors import InvalidArgument, NotFound
from safepoint.model import Status
from safepoint.records import RunInfo
from safepoint.store import Store
from safepoint.store.admin import scheme_of
from safepoint.visible import visible, visible_json


@click.command()
@store_options
@click.argument("run_id")
@click.option(
    "--interval", default="1s", show_default=True, metavar="DURATION", help="How often to look (500ms… 1m)."
)
@handle_errors
def watch(*, store_url: str, as_json: bool, run_id: str, interval: str) -> None:
    """Follow a run: print each new step, status change and holder change until it stops running.

    Exits 0 when the run is no longer running (done, failed, cancelled or
    waiting; at once if it already is), 3 when it is deleted. Read-only.
    """
    every = _interval(interval)
    # No prepared statements: a poll repeats the same few queries, which psycopg would prepare after
    # five uses, and PgBouncer in transaction mode may hand the next one another server connection.
    options = {"prepare_threshold": None} if scheme_of(store_url) == "postgresql" else {}
    out = _Printer(run_id, as_json)
    with open_store_at(store_url, read_only=True, **options) as store, _interruptible():
        info = store.run(run_id)  # NotFound: exit 3 before anything is printed
        holder = _holder(store, run_id)
        out.started(info, holder)
        while info.status is Status.RUNNING:
            time.sleep(every)
            try:
                now, now_holder = store.run(run_id), _holder(store, run_id)
            except NotFound:
                out.deleted()
                sys.exit(ExitCode.NOT_FOUND)
            if now.head_step != info.head_step:
                out.steps(store, run_id, info.head_step, now)
            if now.status is not info.status:
                out.status(now)
            if (now_holder.owner, now_holder.queued) != (holder.owner, holder.queued):
                out.holder(now_holder)  # a heartbeat moves the expiry only: not a change of holder
            info, holder = now, now_holder
        out.ended(info)


@contextlib.contextmanager
def _interruptible() -> Iterator[None]:
    """Ctrl-C ends a watch quietly, with the shell's code for it (130), not click's "Aborted!"."""
    try:
        yield
    except KeyboardInterrupt:
        sys.exit(130)


def _interval(text: str) -> float:
    if text.endswith("ms") and text[:-2].isdigit():
        seconds = int(text[:-2]) / 1000
    else:
        duration = parse_duration(text, "interval")
        seconds = 0.0 if duration is None else duration.total_seconds()
    if not 0.05 <= seconds <= 3600:
        raise InvalidArgument("--interval must be between 50ms and 1h")
    return seconds


def _holder(store: Store, run_id: str) -> _Holding:
    """Who holds the run now (a live lease's owner and expiry), and whether it is queued."""
    state = store.queue_state(run_id)
    live = state.owner is not None and state.leased()
    return _Holding(
        state.owner if live else None, state.expires_at if live else None, state.queued, holding(state)
    )


class _Holding(NamedTuple):
    owner: str | None
    expires_at: datetime | None
    queued: bool
    text: str  # the same in words: held by OWNER until …, queued, not queued

    def json(self) -> dict[str, Any]:
        return {"holder": self.owner, "lease_expires_at": _iso(self.expires_at), "queued": self.queued}


class _Printer:
    """The watch's lines: for people, or one JSON object per event (``--json``)."""

    def __init__(self, run_id: str, as_json: bool) -> None:
        self.run_id, self.as_json = run_id, as_json
        self.shown_id = visible(run_id, max_len=ID_LEN)

    def _event(self, event: str, line: str, **data: Any) -> None:
        if self.as_json:
            obj = {"event": event, "run_id": self.run_id, **data}
            click.echo(visible_json(json.dumps(obj, ensure_ascii=False, default=str)))
        else:
            say(line)
        sys.stdout.flush()  # a pipe sees each event as it happens

    def started(self, info: RunInfo, holder: _Holding) -> None:
        self._event(
            "watching",
            f"watching run {self.shown_id}: step {info.head_step}, {info.status.value}, {holder.text}",
            step=info.head_step,
            status=info.status.value,
            **holder.json(),
        )

    def steps(self, store: Store, run_id: str, after: int, now: RunInfo) -> None:
        try:
            # Up to the head the run row gave: a step saved since is the next poll's, with its counters.
            new = [i for i in store.history(run_id) if after < i.step <= now.head_step]
        except NotFound:
            return  # deleted in between: the next poll says so
        if now.head_step < after:  # pruned or rewritten below what was seen: say where it stands
            new = [i for i in store.history(run_id) if i.step == now.head_step]
        for i in new:
            counters = numbers(now.counters, max_len=120) if i.step == now.head_step else ""
            self._event(
                "step",
                f"step {i.step}: {i.status.value}, {i.message_count} messages, saved {when(i.created_at)}"
                + (f" · {counters}" if counters and counters != "-" else ""),
                step=i.step,
                status=i.status.value,
                messages=i.message_count,
                saved_at=_iso(i.created_at),
                counters=now.counters if i.step == now.head_step else None,
            )

    def status(self, info: RunInfo) -> None:
        self._event("status", f"status: {info.status.value}", status=info.status.value)

    def holder(self, holder: _Holding) -> None:
        self._event("holder", f"now {holder.text}", **holder.json())

    def ended(self, info: RunInfo) -> None:
        self._event(
            "end",
            f"run {self.shown_id} is {info.status.value} at step {info.head_step}",
            step=info.head_step,
            status=info.status.value,
        )

    def deleted(self) -> None:
        message = f"run {self.shown_id} was deleted"
        if self.as_json:
            click.echo(error_object(f"run {self.run_id!r} was deleted", "NotFound", self.run_id), err=True)
        else:
            click.echo(f"error: {message}", err=True)


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()
