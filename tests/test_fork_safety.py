"""A store used in a forked child reconnects or refuses clearly; nothing hangs and the parent saves on."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import safepoint
from safepoint import Checkpoint, Store
from safepoint.errors import StoreClosed

sys.path.insert(0, str(Path(__file__).parent))
from conftest_postgres import fresh_schema, require_postgres

CHILD_DEADLINE = 30.0  # seconds; a child still running then is taken for hung, killed, and fails the test
FORKS = 3


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """A store on a real backend, opened in the parent."""
    if request.param == "sqlite":
        with safepoint.open_store(f"sqlite:///{tmp_path / 'state.db'}") as opened:
            yield opened
        return
    dsn = require_postgres()
    with fresh_schema(dsn) as schema, safepoint.open_store(dsn, schema=schema) as opened:
        yield opened


class Saver(threading.Thread):
    """Saves step after step of one run until stopped (the parent's work going on during forks)."""

    def __init__(self, store: Store, run_id: str = "parent") -> None:
        super().__init__(daemon=True)
        self.store, self.run_id = store, run_id
        self.stop = threading.Event()
        self.saved = 0
        self.error: BaseException | None = None
        self.cp = Checkpoint(run_id=run_id)

    def run(self) -> None:
        try:
            self.store.save(self.cp)
            self.saved = 1
            while not self.stop.is_set():
                self.cp = self.cp.next()
                self.cp.messages.append({"role": "user", "content": f"turn {self.saved}"})
                self.store.save(self.cp)
                self.saved += 1
        except BaseException as exc:  # reported by the test
            self.error = exc

    def finish(self) -> None:
        self.stop.set()
        self.join(CHILD_DEADLINE)
        assert not self.is_alive(), "the parent's saving thread hung"
        assert self.error is None, f"the parent's saving thread failed: {self.error!r}"


def in_child(body: Callable[[], str]) -> str:
    """Fork; the child runs ``body`` and reports its outcome; the parent waits with a deadline."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report, then leave without running the parent's cleanup
        os.close(read_end)
        try:
            outcome = body()
        except BaseException as exc:
            outcome = f"error {type(exc).__name__}: {exc}"
        os.write(write_end, outcome.encode())
        os._exit(0)
    os.close(write_end)
    deadline = time.monotonic() + CHILD_DEADLINE
    while not os.waitpid(pid, os.WNOHANG)[0]:
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            os.close(read_end)
            pytest.fail("a forked child hung")
        time.sleep(0.01)
    with os.fdopen(read_end, "rb") as reader:
        return reader.read().decode()


def child_saves_and_loads(store: Store, run_id: str) -> Callable[[], str]:
    def body() -> str:
        cp = Checkpoint(run_id=run_id, state={"pid": os.getpid()})
        store.save(cp)
        assert store.load(run_id).state == {"pid": os.getpid()}
        store.load("parent")  # the parent's run, read on the child's own connection
        return "ok"

    return body


def wait_for_saves(saver: Saver, count: int) -> None:
    while saver.saved < count and saver.error is None and saver.is_alive():
        time.sleep(0.005)


def test_a_child_forked_while_a_thread_saves_gets_its_own_connection(store: Store) -> None:
    """Forked while another thread saves in a loop, the child saves and loads; the parent saves on."""
    saver = Saver(store)
    saver.start()
    for fork in range(FORKS):
        wait_for_saves(saver, 2 + 3 * fork)
        assert in_child(child_saves_and_loads(store, f"child-{fork}")) == "ok"
    saver.finish()
    assert saver.saved > 2 + 3 * (FORKS - 1)
    for fork in range(FORKS):  # the children's saves are durable and visible to the parent
        assert store.load(f"child-{fork}").step == 0
    nxt = saver.cp.next()
    store.save(nxt)
    assert store.load("parent").step == saver.saved


def test_a_memory_store_refuses_in_a_forked_child() -> None:
    """A memory:// store's database stays in the parent: the child gets StoreClosed, never a hang."""
    with safepoint.open_store("memory://") as store:
        saver = Saver(store)
        saver.start()
        wait_for_saves(saver, 3)

        def body() -> str:
            try:
                store.save(Checkpoint(run_id="child"))
            except StoreClosed as exc:
                return f"refused: {exc}"
            return "saved"

        outcome = in_child(body)
        assert outcome.startswith("refused: a memory:// store"), outcome
        saver.finish()
        assert store.load("parent").step == saver.saved - 1


def _multiprocessing_child(store: Store, run_id: str) -> None:
    child_saves_and_loads(store, run_id)()


def test_multiprocessing_fork_children_use_the_parents_store(store: Store) -> None:
    """multiprocessing with the fork start method: children save through the store they inherited."""
    saver = Saver(store)
    saver.start()
    wait_for_saves(saver, 2)
    context = multiprocessing.get_context("fork")
    children = [context.Process(target=_multiprocessing_child, args=(store, f"mp-{n}")) for n in range(2)]
    for child in children:
        child.start()
    for child in children:
        child.join(CHILD_DEADLINE)
        if child.is_alive():
            child.kill()
            child.join()
            pytest.fail("a multiprocessing child hung")
        assert child.exitcode == 0
    saver.finish()
    assert [store.load(f"mp-{n}").step for n in range(2)] == [0, 0]
    store.save(saver.cp.next())


def test_an_async_postgres_store_reconnects_in_a_forked_child() -> None:
    """An async PostgreSQL store saving on an event loop thread: the forked child saves on a new loop."""
    dsn = require_postgres()
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()

    def on_loop(coro: object) -> object:
        return asyncio.run_coroutine_threadsafe(coro, loop).result(CHILD_DEADLINE)  # type: ignore[arg-type]

    with fresh_schema(dsn) as schema:
        store = on_loop(safepoint.open_async_store(dsn, schema=schema))
        stop = False

        async def save_loop() -> int:
            cp = Checkpoint(run_id="parent")
            await store.save(cp)  # type: ignore[attr-defined]
            saved = 1
            while not stop:
                cp = cp.next()
                await store.save(cp)  # type: ignore[attr-defined]
                saved += 1
            return saved

        running = asyncio.run_coroutine_threadsafe(save_loop(), loop)
        time.sleep(0.05)  # let some saves go; the fork lands in the middle of one or between two

        def body() -> str:
            async def child() -> str:
                await store.save(Checkpoint(run_id="child"))  # type: ignore[attr-defined]
                return "ok" if (await store.load("child")).step == 0 else "wrong step"  # type: ignore[attr-defined]

            return asyncio.run(child())

        assert in_child(body) == "ok"
        stop = True
        saved = running.result(CHILD_DEADLINE)
        assert on_loop(store.load("parent")).step == saved - 1  # type: ignore[attr-defined]
        assert on_loop(store.load("child")).step == 0  # type: ignore[attr-defined]
        on_loop(store.close())  # type: ignore[attr-defined]
    loop.call_soon_threadsafe(loop.stop)
    thread.join(CHILD_DEADLINE)


def test_a_child_forked_while_the_secrets_registry_builds_saves(tmp_path: Path) -> None:
    """A fork while another thread holds the secrets registry's lock (building an automaton
    takes a while, on a store's first save): the child registers a secret and saves."""
    secrets = safepoint.Secrets({"API_KEY": "sk-live-0123456789abcdef"})
    store = safepoint.open_store(
        f"sqlite:///{tmp_path / 'state.db'}", scrubber=safepoint.Scrubber(secrets=secrets)
    )
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with secrets._lock:  # as a build in progress holds it
            held.set()
            release.wait(CHILD_DEADLINE)

    holder = threading.Thread(target=hold)
    holder.start()
    held.wait(CHILD_DEADLINE)
    try:

        def body() -> str:
            secrets.add("OTHER", "another-secret-value-42")
            cp = Checkpoint(run_id="child")
            cp.messages.append({"role": "user", "content": "key another-secret-value-42"})
            store.save(cp)
            return "ok" if "another-secret-value-42" not in str(store.load("child").messages) else "leaked"

        assert in_child(body) == "ok"
    finally:
        release.set()
        holder.join()
        store.close()


def test_a_child_forked_while_the_sealer_and_keyring_locks_are_held_saves_and_loads(tmp_path: Path) -> None:
    """An encrypted store's sealer and its keyring each guard their keys with a lock; a fork
    while other threads hold them (a data key being unwrapped, a key being fetched): the child
    saves and loads through the same store without hanging."""
    from test_encryption import keyring  # noqa: PLC0415  # the test keys live there

    ring = keyring()
    store = safepoint.open_store(f"sqlite:///{tmp_path / 'sealed.db'}", encryption=ring)
    store.save(Checkpoint(run_id="parent"))
    sealer = store.settings.sealer
    assert sealer is not None
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with sealer._lock, ring._lock:  # as an unwrap and a fetch in progress hold them
            held.set()
            release.wait(CHILD_DEADLINE)

    holder = threading.Thread(target=hold)
    holder.start()
    held.wait(CHILD_DEADLINE)
    try:

        def body() -> str:
            sealer.learn([])  # takes the sealer's lock
            with ring._lock:  # and the keyring's
                pass
            cp = Checkpoint(run_id="child")
            cp.messages.append({"role": "user", "content": "hello from the child"})
            store.save(cp)
            return "ok" if store.load("child").messages[0]["content"] == "hello from the child" else "wrong"

        assert in_child(body) == "ok"
    finally:
        release.set()
        holder.join()
        store.close()
