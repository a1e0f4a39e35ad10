"""Every bad input is a typed SafepointError that quotes no value, and changes nothing stored.

Each hostile call below is made on the memory, SQLite and PostgreSQL stores
(and the async twin), with a recognisable string planted in the argument or
value; the error and every exception chained to it must be a
``SafepointError`` without that string, and the run saved beforehand must
load exactly as it was.
"""

from __future__ import annotations

import asyncio
import base64
import math
import time
from collections import OrderedDict, UserString, defaultdict
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from enum import Enum, IntEnum, StrEnum
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import pytest

import safepoint
from safepoint import Checkpoint, SafepointError, Status, Store, codec
from safepoint.errors import (
    InvalidArgument,
    InvalidCheckpoint,
    InvalidURL,
    LeaseLost,
    NotJSONCompatible,
    StoreError,
)
from safepoint.messagelist import freeze
from safepoint.model import ParentRef
from safepoint.records import Lease, Retention
from safepoint.refs import BlobLink, ScrubbedText, SecretRef
from safepoint.store.postgres.async_driver import open_postgres_async_driver
from safepoint.store.postgres.config import PostgresConfig
from safepoint.store.postgres.driver import PostgresDriver

E = TypeVar("E", bound=SafepointError)
PLANT = "SP-PLANTED-7f3a91"  # in every hostile value: must appear in no error text
PASSWORD = "pw-PLANTED-0c55e2"


class Color(IntEnum):
    RED = 1


class Mode(StrEnum):
    PLANTED = PLANT


class Kind(Enum):
    PLANTED = PLANT


class Float64(float):
    """What numpy.float64 is to Python: a float subclass."""


class MyInt(int):
    pass


class MyStr(str):
    pass


class MyList(list[Any]):
    pass


def deep(levels: int, leaf: Any = PLANT) -> Any:
    """``levels`` lists nested inside one another around ``leaf``."""
    value = leaf
    for _ in range(levels):
        value = [value]
    return value


def chain_text(exc: BaseException) -> str:
    """The text of ``exc`` and of everything chained to it (cause and context)."""
    texts, seen = [], set()
    current: BaseException | None = exc
    pending = [exc]
    while pending:
        current = pending.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        texts.append(f"{type(current).__name__}: {current} {current.args!r}")
        pending.extend(e for e in (current.__cause__, current.__context__) if e is not None)
    return "\n".join(texts)


def check_refused(call: Callable[[], Any], *, kind: type[E] = SafepointError) -> E:  # type: ignore[assignment]
    """``call()`` raises ``kind``, and nothing in its chain names PLANT or PASSWORD."""
    with pytest.raises(SafepointError) as caught:
        call()
    error = caught.value
    assert isinstance(error, kind), chain_text(error)
    text = chain_text(error)
    assert PLANT not in text, text
    assert PASSWORD not in text, text
    return error


# -- stores -------------------------------------------------------------------


@pytest.fixture(params=["memory", "sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """A store of each backend holding one run, ``base``, at step 1."""
    if request.param == "memory":
        opened = safepoint.open_store("memory://")
    elif request.param == "sqlite":
        opened = safepoint.open_store(f"sqlite:///{tmp_path}/s.db")
    else:
        dsn = request.getfixturevalue("postgres_dsn")
        opened = safepoint.open_store(dsn, schema=request.getfixturevalue("pg_schema"), max_size=2)
    cp = Checkpoint(run_id="base", messages=[{"role": "user", "content": "hi"}], state={"n": 1})
    opened.save(cp)
    cp.step += 1
    opened.save(cp)
    yield opened
    opened.close()


def snapshot(store: Store) -> tuple[Any, ...]:
    """What a failed call must leave alone: the run's checkpoints and the set of runs."""
    head = store.load("base")
    return (
        head.step,
        head.digest,
        head.to_dict()["state"],
        [info.digest for info in store.history("base")],
        sorted(run.run_id for run in store.runs(limit=100)),
    )


# -- hostile values inside a checkpoint ----------------------------------------

HOSTILE_VALUES: list[tuple[str, Any, str]] = [
    ("int-enum", {"k": Color.RED}, "Color (an enum member)"),
    ("str-enum", {"k": Mode.PLANTED}, "Mode (an enum member)"),
    ("enum", {"k": Kind.PLANTED}, "Kind (an enum member)"),
    ("float-subclass", {"k": Float64(1.5)}, "Float64 (a subclass of float)"),
    ("int-subclass", {"k": MyInt(3)}, "MyInt (a subclass of int)"),
    ("str-subclass", {"k": MyStr(PLANT)}, "MyStr (a subclass of str)"),
    ("list-subclass", {"k": MyList([PLANT])}, "MyList (a subclass of list)"),
    ("ordered-dict", {"k": OrderedDict(a=PLANT)}, "OrderedDict (a subclass of dict)"),
    ("defaultdict", {"k": defaultdict(list, a=[PLANT])}, "defaultdict (a subclass of dict)"),
    ("user-string", {"k": UserString(PLANT)}, "UserString is not JSON-compatible"),
    ("tuple", {"k": (PLANT,)}, "tuple is not JSON-compatible"),
    ("set", {"k": {PLANT}}, "set is not JSON-compatible"),
    ("nan", {"k": math.nan}, "float nan"),
    ("huge-int", {"k": 2**64}, "does not fit in 64 bits"),
    ("surrogate", {"k": PLANT + "\ud800"}, "lone surrogate"),
    ("deep-300", {"k": deep(300)}, "nested deeper than 200 levels"),
    ("deep-5000", {"k": deep(5000)}, "nested deeper than 200 levels"),
    ("long-key", {"k": {PLANT * 4: {1}}}, "[<key #0>]: set"),
    ("non-str-key", {"k": {(PLANT * 4,): 1}}, "[<key #0>]: dict key of type tuple"),
]


def hostile_checkpoints() -> Iterator[tuple[str, Callable[[Checkpoint], None], str]]:
    """(name, how to plant the value in a checkpoint, what the error must say)."""
    for name, value, expected in HOSTILE_VALUES:
        for field in ("state", "cursors", "pending_action"):

            def plant(cp: Checkpoint, field: str = field, value: Any = value) -> None:
                setattr(cp, field, value)

            yield f"{field}-{name}", plant, expected

        def plant_message(cp: Checkpoint, value: Any = value) -> None:
            cp.messages.append({"role": "tool", **value})

        yield f"message-{name}", plant_message, expected
    field_cases: list[tuple[str, str, Any, str]] = [
        ("step-huge", "step", 2**31, "step must be an int from 0 to 2147483647"),
        ("step-2**70", "step", 2**70, "step must be"),
        ("step-bool", "step", True, "step must be"),
        ("step-enum", "step", Color.RED, "step must be"),
        ("schema-zero", "schema_version", 0, "schema_version must be an int from 1"),
        ("schema-huge", "schema_version", 2**31, "schema_version must be"),
        ("schema-float", "schema_version", 1.0, "schema_version must be"),
        ("counter-enum", "counters", {"tokens": Color.RED}, "counters.tokens: Color"),
        ("counter-bool", "counters", {"tokens": True}, "counters.tokens: bool is not a number"),
        ("counter-str", "counters", {"tokens": PLANT}, "counters.tokens: str is not a number"),
        ("label-enum", "labels", {"team": Mode.PLANTED}, "labels.team: Mode"),
        ("label-nul", "labels", {"team" + PLANT * 3: "a\x00"}, "labels[<key #0>]: NUL"),
        ("labels-ordered", "labels", OrderedDict(team="a"), "labels: OrderedDict"),
        ("parent", "parent", (PLANT, 1), "parent must be None or a ParentRef"),
        ("parent-step", "parent", ParentRef("x", 2**40), "parent must be None or a ParentRef"),
    ]
    for name, field, value, expected in field_cases:

        def plant_field(cp: Checkpoint, field: str = field, value: Any = value) -> None:
            object.__setattr__(cp, field, value)  # past Checkpoint's own conversions

        yield name, plant_field, expected


def test_hostile_values_are_refused_typed_without_the_value(store: Store) -> None:
    """Subclasses, deep nesting, huge ints, bad keys, bad fields: typed, unquoted, nothing written."""
    before = snapshot(store)
    failures = []
    for name, plant, expected in hostile_checkpoints():
        cp = store.load("base").next()
        plant(cp)
        try:
            error = check_refused(partial(store.save, cp), kind=InvalidCheckpoint)
            assert expected in str(error), (expected, str(error))
            assert snapshot(store) == before
        except AssertionError as exc:
            failures.append(f"{name}: {exc}")
    assert not failures, "\n".join(failures)


def test_a_fresh_run_with_a_hostile_value_is_not_created(store: Store) -> None:
    """A refused first checkpoint leaves no run behind (the run list is unchanged)."""
    before = snapshot(store)
    for value in (Color.RED, deep(260), OrderedDict(a=1), Float64(2.0)):
        cp = Checkpoint(run_id="fresh", state={"v": value})
        check_refused(partial(store.save, cp), kind=NotJSONCompatible)
        check_refused(lambda: store.load("fresh"))
    assert snapshot(store) == before


def test_keys_in_paths_are_escaped_and_long_ones_named_by_position() -> None:
    """Control and format characters in a key are escaped in the path; a long key becomes its position."""
    store = safepoint.open_store("memory://")
    hostile = "\x1b]0;title\x07\u202e\u200b"
    error = check_refused(lambda: store.save(Checkpoint(state={"a": {hostile: {1}}})), kind=NotJSONCompatible)
    text = str(error)
    assert not any(ch in text for ch in "\x1b\x07\u202e\u200b"), repr(text)
    assert "\\x1b" in text
    assert "\\u202e" in text
    second = {"ok": 1, PLANT * 100: {1}}
    error = check_refused(lambda: store.save(Checkpoint(state=second)), kind=NotJSONCompatible)
    assert str(error).startswith("state[<key #1>]: set")
    # A 1 MB key costs no more than its position in the message.
    error = check_refused(lambda: store.save(Checkpoint(state={"x" * 1_000_000: {1}})))
    assert len(str(error)) < 100


def test_deep_paths_are_truncated_and_the_limit_is_exact() -> None:
    """200 nested containers in a field are stored and load back; 201 are refused with a short path."""
    store = safepoint.open_store("memory://")
    cp = Checkpoint(run_id="deep", state={"k": deep(199, "leaf")}, messages=[{"c": deep(199, "x")}])
    store.save(cp)
    loaded = store.load("deep")
    assert loaded.state == cp.state
    assert loaded.messages[0] == {"c": deep(199, "x")}
    named: dict[str, Any] = {}
    inner = named
    for level in range(250):
        inner[f"level{level}"] = {}
        inner = inner[f"level{level}"]
    error = check_refused(lambda: store.save(Checkpoint(run_id="x", state=named)), kind=NotJSONCompatible)
    assert "nested deeper than 200 levels" in str(error)
    assert "…" in error.path
    assert len(error.path) <= 210
    assert error.path.startswith("state.level0.level1")
    assert error.path.endswith("level199")
    check_refused(lambda: store.save(Checkpoint(run_id="x", state={"k": deep(200)})), kind=NotJSONCompatible)
    check_refused(
        lambda: store.save(Checkpoint(run_id="x", messages=[{"c": deep(200)}])), kind=NotJSONCompatible
    )


def test_the_store_own_types_are_accepted() -> None:
    """Frozen messages, secret and blob references and scrubbed text pass validation: they are the store's."""
    value = {
        "ref": SecretRef("API_KEY"),
        "blob": BlobLink("0" * 64, 3, "text/plain"),
        "text": ScrubbedText("key [SECRET:API_KEY]", [(4, 20)]),
        "frozen": freeze({"a": [1, {"b": 2}]}),
    }
    codec.check_json(value, "state")


def test_status_and_messages_are_checked_when_set() -> None:
    """A bad status or messages value is an InvalidCheckpoint at once, naming the kinds, not the value."""
    check_refused(lambda: Checkpoint(status=PLANT), kind=InvalidCheckpoint)  # type: ignore[arg-type]
    check_refused(lambda: Checkpoint(status=3), kind=InvalidCheckpoint)  # type: ignore[arg-type]
    cp = Checkpoint()
    check_refused(lambda: setattr(cp, "status", MyStr("done")), kind=InvalidCheckpoint)
    check_refused(lambda: setattr(cp, "messages", PLANT), kind=InvalidCheckpoint)
    check_refused(lambda: setattr(cp, "messages", {"role": PLANT}), kind=InvalidCheckpoint)
    assert Checkpoint(status="done").status is Status.DONE  # type: ignore[arg-type]


# -- hostile arguments to every public method -----------------------------------


def _b64(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def hostile_calls(lease: Lease) -> list[tuple[str, Callable[[Any], Any]]]:
    """(name, call on a store): each must raise a typed error. ``lease`` is a live one on ``base``."""
    stale = Lease("base", "w-" + PLANT, 2**70, datetime.now(UTC), 30)
    huge_id = PLANT * 20
    return [
        ("load-step-2**31", lambda s: s.load("base", 2**31)),
        ("load-step-2**70", lambda s: s.load("base", 2**70)),
        ("load-step-negative", lambda s: s.load("base", -1)),
        ("load-step-bool", lambda s: s.load("base", True)),
        ("load-step-str", lambda s: s.load("base", PLANT)),
        ("load-step-float", lambda s: s.load("base", 1.0)),
        ("load-run-id-long", lambda s: s.load(huge_id)),
        ("load-run-id-int", lambda s: s.load(7)),
        ("load-run-id-enum", lambda s: s.load(Mode.PLANTED)),
        ("load-run-id-nul", lambda s: s.load(PLANT + "\x00")),
        ("load-resolve", lambda s: s.load("base", resolve_secrets=PLANT)),
        ("load-migrate", lambda s: s.load("base", migrate=PLANT)),
        ("load-fetch-blobs", lambda s: s.load("base", fetch_blobs=PLANT)),
        ("runs-limit-zero", lambda s: s.runs(limit=0)),
        ("runs-limit-huge", lambda s: s.runs(limit=10**20)),
        ("runs-limit-bool", lambda s: s.runs(limit=True)),
        ("runs-limit-str", lambda s: s.runs(limit=PLANT)),
        ("runs-cursor-garbage", lambda s: s.runs(cursor=PLANT)),
        ("runs-cursor-int", lambda s: s.runs(cursor=5)),
        ("runs-cursor-empty", lambda s: s.runs(cursor="")),
        ("runs-cursor-overflow", lambda s: s.runs(cursor=_b64("9" * 30))),
        ("runs-cursor-negative", lambda s: s.runs(cursor=_b64("-5"))),
        ("runs-cursor-spaces", lambda s: s.runs(cursor=_b64(" 7"))),
        ("runs-cursor-non-ascii", lambda s: s.runs(cursor="é" + PLANT)),
        ("runs-cursor-huge", lambda s: s.runs(cursor=PLANT * 100_000)),
        ("runs-status-str", lambda s: s.runs(status=PLANT)),
        ("runs-status-int", lambda s: s.runs(status=5)),
        ("runs-status-list", lambda s: s.runs(status=["done", PLANT])),
        ("runs-status-bytes", lambda s: s.runs(status=b"done")),
        ("runs-labels-list", lambda s: s.runs(labels=[PLANT])),
        ("runs-labels-int-value", lambda s: s.runs(labels={"a": 1})),
        ("runs-labels-nul", lambda s: s.runs(labels={"a": PLANT + "\x00"})),
        ("runs-labels-surrogate", lambda s: s.runs(labels={"a": PLANT + "\ud800"})),
        ("runs-labels-enum", lambda s: s.runs(labels={"a": Mode.PLANTED})),
        ("runs-updated-since", lambda s: s.runs(updated_since=PLANT)),
        ("history-id", lambda s: s.history(huge_id)),
        ("run-id", lambda s: s.run(b"base")),
        ("delete-id", lambda s: s.delete_run(None)),
        ("enqueue-id", lambda s: s.enqueue(huge_id)),
        ("fork-step", lambda s: s.fork("base", 2**40)),
        ("fork-new-id", lambda s: s.fork("base", new_run_id=huge_id)),
        ("fork-labels", lambda s: s.fork("base", new_run_id="f", labels={"a": Mode.PLANTED})),
        ("fork-labels-int", lambda s: s.fork("base", new_run_id="f", labels=0)),
        ("save-not-checkpoint", lambda s: s.save({"run_id": PLANT})),
        ("save-lease-str", lambda s: s.save(s.load("base").next(), lease=PLANT)),
        ("save-stale-lease", lambda s: s.save(s.load("base").next(), lease=stale)),
        ("claim-worker-long", lambda s: s.claim(huge_id)),
        ("claim-worker-int", lambda s: s.claim(5)),
        ("claim-lease-zero", lambda s: s.claim("w", lease=0)),
        ("claim-lease-negative", lambda s: s.claim("w", lease=-1)),
        ("claim-lease-nan", lambda s: s.claim("w", lease=math.nan)),
        ("claim-lease-inf", lambda s: s.claim("w", lease=math.inf)),
        ("claim-lease-1e300", lambda s: s.claim("w", lease=1e300)),
        ("claim-lease-timedelta-max", lambda s: s.claim("w", lease=timedelta.max)),
        ("claim-lease-str", lambda s: s.claim("w", lease=PLANT)),
        ("heartbeat-not-lease", lambda s: s.heartbeat(PLANT)),
        ("heartbeat-epoch", lambda s: s.heartbeat(stale)),
        ("heartbeat-extend", lambda s: s.heartbeat(lease, extend=1e300)),
        ("heartbeat-extend-nan", lambda s: s.heartbeat(lease, extend=math.nan)),
        ("release-status", lambda s: s.release(lease, status=PLANT)),
        ("release-status-list", lambda s: s.release(lease, status=["done"])),
        ("release-requeue", lambda s: s.release(lease, requeue=PLANT)),
        ("gc-grace-negative", lambda s: s.collect_garbage(grace=-1)),
        ("gc-grace-nan", lambda s: s.collect_garbage(grace=math.nan)),
        ("gc-grace-1e300", lambda s: s.collect_garbage(grace=1e300)),
        ("gc-grace-timedelta-max", lambda s: s.collect_garbage(grace=timedelta.max)),
        ("gc-grace-str", lambda s: s.collect_garbage(grace=PLANT)),
        ("gc-dry-run", lambda s: s.collect_garbage(dry_run=PLANT)),
        ("prune-policy", lambda s: s.prune_run("base", PLANT)),
        ("prune-dry-run", lambda s: s.prune_run("base", dry_run=PLANT)),
        ("set-retention", lambda s: s.set_retention("base", PLANT)),
        ("migrate-runs-str", lambda s: s.migrate_runs(PLANT)),
        ("fetch-blob-str", lambda s: s.fetch_blob(PLANT)),
        ("fetch-blob-shape", lambda s: s.fetch_blob({"$blob": PLANT})),
    ]


def test_hostile_arguments_raise_typed_errors(store: Store) -> None:
    """Every public Store method, given out-of-range or ill-typed arguments: typed, unquoted, harmless."""
    store.enqueue("base")
    lease = store.claim("w1", lease=30)
    assert lease is not None
    before = snapshot(store)
    failures = []
    for name, call in hostile_calls(lease):
        try:
            check_refused(partial(call, store))
            assert snapshot(store) == before
        except (AssertionError, pytest.fail.Exception) as exc:
            failures.append(f"{name}: {exc}")
        except Exception as exc:  # a raw error escaped: that is the bug this test is for
            failures.append(f"{name}: raw {type(exc).__name__}")
    assert not failures, "\n".join(failures)
    store.heartbeat(lease)  # the live lease was never disturbed


def test_async_store_raises_the_same_typed_errors() -> None:
    """The async twin refuses the same hostile arguments with the same typed errors."""

    async def main() -> list[str]:
        store = await safepoint.open_async_store("memory://")
        await store.save(Checkpoint(run_id="base"))
        await store.save(Checkpoint(run_id="base", step=1))
        await store.enqueue("base")
        lease = await store.claim("w1", lease=30)
        assert lease is not None
        failures = []
        for name, call in hostile_calls(lease):
            if name.startswith("save-"):
                continue  # these load first, synchronously: covered on the sync store
            try:
                with pytest.raises(SafepointError) as caught:
                    await call(store)
                assert PLANT not in chain_text(caught.value)
            except (AssertionError, pytest.fail.Exception) as exc:
                failures.append(f"{name}: {exc}")
            except Exception as exc:
                failures.append(f"{name}: raw {type(exc).__name__}")
        assert (await store.load("base")).step == 1
        await store.close()
        return failures

    failures = asyncio.run(main())
    assert not failures, "\n".join(failures)


def test_retention_bounds_are_typed() -> None:
    """Retention refuses out-of-range counts and durations without quoting them."""
    check_refused(lambda: Retention(keep_last=2**80), kind=InvalidArgument)
    check_refused(lambda: Retention(keep_last=True), kind=InvalidArgument)
    check_refused(lambda: Retention(keep_for=timedelta.max), kind=InvalidArgument)
    check_refused(lambda: Retention(delete_finished_after=timedelta(seconds=-1)), kind=InvalidArgument)


def test_lease_errors_do_not_name_the_worker(memory_store: Store) -> None:
    """A lease lost to another worker says so without quoting either worker id."""
    memory_store.save(Checkpoint(run_id="r"))
    memory_store.enqueue("r")
    old = memory_store.claim("w-" + PLANT, lease=0.01)
    assert old is not None
    time.sleep(0.05)
    assert memory_store.claim("other-" + PLANT, lease=30) is not None
    error = check_refused(lambda: memory_store.heartbeat(old), kind=LeaseLost)
    assert "another worker holds epoch" in str(error)


# -- store URLs and connection errors -------------------------------------------


@pytest.mark.parametrize(
    ("url", "options"),
    [
        (f"mysql://user:{PASSWORD}@host/db", {}),
        (f"{PASSWORD}", {}),
        (f"sqlite://user:{PASSWORD}@host/x.db", {}),
        ("sqlite:///{tmp}/x.db", {"busy_timeout": 1e300}),
        ("sqlite:///{tmp}/x.db", {"busy_timeout": PASSWORD}),
        ("sqlite:///{tmp}/x.db", {"wal_autocheckpoint": 2**70}),
        ("sqlite:///{tmp}/x.db", {"trace": PASSWORD}),
        (f"postgresql://user:{PASSWORD}@127.0.0.1:1/db", {"pool_size": 3}),
        (f"postgresql://user:{PASSWORD}@127.0.0.1:1/db", {"connect_timeout": math.inf}),
        (f"postgresql://user:{PASSWORD}@127.0.0.1:1/db", {"timeout": math.nan}),
        (f"postgresql://user:{PASSWORD}@127.0.0.1:1/db", {"max_size": 10**9}),
        (f"postgresql://user:{PASSWORD}@[::1/db", {}),
    ],
)
def test_bad_urls_and_options_are_invalid_url_without_the_password(
    url: str, options: dict[str, Any], tmp_path: Path
) -> None:
    """A URL or option open_store can't serve is an InvalidURL that quotes neither URL nor password."""
    check_refused(lambda: safepoint.open_store(url.format(tmp=tmp_path), **options), kind=InvalidURL)


@pytest.mark.parametrize(
    "url",
    [
        f"postgresql://someone:{PASSWORD}@127.0.0.1:1/test",
        f"postgresql://someone:p@{PASSWORD}@127.0.0.1:1/test",  # libpq takes "pw-…@127.0.0.1" as the host
        f"postgresql://someone:p/{PASSWORD}@127.0.0.1:1/test",  # … or "p" as the port and the rest as the db
        f"postgresql://someone:p#{PASSWORD}@127.0.0.1:1/test",
        f"host=127.0.0.1 port=1 user=someone password={PASSWORD} dbname=test",
        f"postgresql://127.0.0.1:1/test?password={PASSWORD}",
    ],
)
def test_postgres_connection_errors_carry_no_password(url: str) -> None:
    """A failed connection is a StoreError whose message and whole chain hold no password, sync and async."""
    # open_store takes URLs only (a key/value DSN is an InvalidURL there); the drivers take both.
    check_refused(lambda: safepoint.open_store(url, connect_timeout=2))
    config = PostgresConfig.from_options(url, {"connect_timeout": 2})
    error = check_refused(lambda: PostgresDriver.open(config), kind=StoreError)
    assert "PostgreSQL connection failed while connecting to" in str(error)
    assert error.__context__ is None
    assert PASSWORD not in repr(config)

    async def main() -> None:
        await open_postgres_async_driver(url, connect_timeout=2)

    error = check_refused(lambda: asyncio.run(main()), kind=StoreError)
    assert error.__context__ is None
