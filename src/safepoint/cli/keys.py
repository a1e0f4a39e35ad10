"""``safepoint encrypt`` and ``safepoint rekey``: encryption at rest for a whole store (docs/encryption.md).

Both take the keyring as every command does (``--key-file``,
``SAFEPOINT_KEY_FILE`` or ``SAFEPOINT_KEYS``), work a run per transaction
while agents keep saving, and can be stopped and run again to finish. A run
they cannot seal (damaged, or under a key that does not open it) is listed
by id, with why, and the others are done all the same; the command then
exits with the code of the first one's error (4 for a corrupt run).
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import click
from rich.progress import Progress

from safepoint.cli.output import (
    console,
    emit,
    exit_code,
    given_keyring,
    handle_errors,
    open_existing,
    open_store_at,
    say,
    store_options,
)
from safepoint.errors import InvalidArgument, SafepointError
from safepoint.store.admin import KeyProgress, Resealing, ToEncrypt, encrypt_store, key_status, rekey_store
from safepoint.visible import ID_LEN, visible

_NEEDS_KEYS = "give the keyring with --key-file PATH (or SAFEPOINT_KEY_FILE, or the keys in SAFEPOINT_KEYS)"


@click.command()
@store_options
@handle_errors
def encrypt(*, store_url: str, as_json: bool) -> None:
    """Convert a plaintext store to an encrypted one under the keyring, in place and online.

    Every opener with the keyring reads the store while it converts; run it
    again after an interruption to finish. On SQLite it then overwrites and
    drops the pages the plaintext was in (secure_delete, VACUUM, the WAL cut
    to nothing); on PostgreSQL see docs/encryption.md for old row versions
    and backups.
    """
    keyring = given_keyring()
    if keyring is None:
        raise InvalidArgument(f"safepoint encrypt needs the keys: {_NEEDS_KEYS}")
    # ToEncrypt: a store an interrupted encrypt left converting reopens to finish (a keyless open
    # of it is refused, as any writer's without the keys is).
    with open_existing(store_url, encryption=ToEncrypt(keyring)) as store:
        done = _with_progress(
            as_json, "encrypting runs", lambda report: encrypt_store(store, keyring, progress=report)
        )
    _report(done, as_json, "encrypted")


@click.command()
@store_options
@click.option(
    "--status", "status_only", is_flag=True, help="Count what each key id protects; change nothing."
)
@handle_errors
def rekey(*, store_url: str, as_json: bool, status_only: bool) -> None:
    """Move everything to the keyring's writing key (the last one in it), online and resumable.

    Rewraps every data key under the writing key, then re-seals every row
    and blob under the newest data key. ``--status`` counts the values each
    key id protects: a key that protects nothing may leave the keyring.
    """
    if given_keyring() is None:
        raise InvalidArgument(f"safepoint rekey needs the keys: {_NEEDS_KEYS}")
    if status_only:
        with open_store_at(store_url, read_only=True) as store:
            status = key_status(store)
        keys = status.by_keyring_key()
        data = {"keys": keys, "data_keys": dict(status.by_data_key), "plaintext": status.plaintext}

        def render() -> None:
            for key_id, count in sorted(keys.items()):
                say(f"key {key_id}: protects {count} values")
            say(f"plaintext values: {status.plaintext}")

        emit(data, as_json, render)
        return
    with open_existing(store_url) as store:
        done = _with_progress(as_json, "re-sealing runs", lambda report: rekey_store(store, progress=report))
    _report(done, as_json, "re-sealed")


def _with_progress(as_json: bool, label: str, work: Callable[[KeyProgress], Resealing]) -> Resealing:
    with Progress(console=console, disable=as_json) as bar:
        task = bar.add_task(label, total=None)

        def progress(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        return work(progress)


def _report(done: Resealing, as_json: bool, verb: str) -> None:
    left = [
        *(("run", name, exc) for name, exc in done.failed),
        *(("blob", name, exc) for name, exc in done.failed_blobs),
        *(("data key", name, exc) for name, exc in done.failed_keys),
    ]
    data = {
        "runs": done.runs,
        "rows": done.rows,
        "blobs": done.blobs,
        "data_keys_rewrapped": done.rewrapped,
        "failed": [_failure(kind, name, exc) for kind, name, exc in left],
    }

    def render() -> None:
        say(
            f"{verb} {done.rows} rows in {done.runs} runs and {done.blobs} blobs"
            + (f"; rewrapped {done.rewrapped} data keys" if done.rewrapped else "")
        )
        if left:
            say(f"could not seal {len(left)}: repair or delete them, then run the command again")
        for kind, name, exc in left:
            say(f"  {kind} {visible(name, max_len=ID_LEN)}: {visible(str(exc))}")

    emit(data, as_json, render)
    sys.stdout.flush()
    if left:
        sys.exit(exit_code(left[0][2]))


def _failure(kind: str, name: str, exc: SafepointError) -> dict[str, str]:
    # The run id, digest or key id as text (json_text escapes it); the message quotes no stored value.
    return {"kind": kind, "id": name, "type": type(exc).__name__, "error": str(exc)}
