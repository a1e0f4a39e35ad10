"""The application-state migration chain: pure ``dict -> dict`` functions, no I/O.

A checkpoint's ``schema_version`` is the version of the *application's*
checkpoint shape. When the shape changes, the application registers a
migration lifting a stored checkpoint from version v to v + 1, and the chain
runs a stored checkpoint through every step up to ``current``::

    chain = MigrationChain(current=3)

    @chain.migration(from_version=1)
    def add_budget(cp: dict) -> dict:
        cp["counters"].setdefault("budget_usd", 0)
        return cp

Versions start at 1 and every version from ``oldest`` (default 1) up to
``current`` must be loadable, so a forgotten migration is a build error —
when the chain is given to the store — not a surprise when an old run
resumes. Checkpoints older than ``oldest`` are refused with a ``MigrationError``
saying so; newer than ``current`` with ``SchemaTooNew``.

Errors never quote stored values: a migration that raises is reported by its
name and its exception's *type*; the exception itself is chained as
``__cause__`` (its message may well hold stored data, e.g. a ``KeyError``'s
key or ``int()``'s "invalid literal …", so it stays out of ours).

This module is the chain: what is registered and which versions load.
Running the functions on one checkpoint and checking each result is
``lifting``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, TypeVar

from safepoint.errors import InvalidArgument, InvalidMigrationChain, MigrationError, SchemaTooNew

from .lifting import Migration, identity, is_int, lift, migration_name

M = TypeVar("M", bound=Migration)


class MigrationChain:
    """Migrations lifting stored checkpoints to ``current``, one version at a time.

    ``migrations[v]`` lifts a checkpoint from version v to v + 1; register
    more with the ``migration`` decorator. ``oldest`` is the oldest version
    still loadable (default 1: every version ever written). Raise it once no
    stored checkpoint is older, and delete the migrations below it.

    Given a ``migrations`` mapping, the chain is checked whole at once. Built
    with decorators, each registration is checked as it happens and the whole
    chain (gaps included) by ``validate()``, which the store and ``migrate``
    call. Every problem raises ``InvalidMigrationChain`` naming the versions.
    """

    def __init__(
        self, current: int, migrations: Mapping[int, Migration] | None = None, *, oldest: int = 1
    ) -> None:
        if not is_int(current) or current < 1:
            raise InvalidMigrationChain(f"current must be an int of at least 1, not {current!r}")
        if not is_int(oldest) or not 1 <= oldest <= current:
            raise InvalidMigrationChain(
                f"oldest must be an int from 1 to current ({current}), not {oldest!r}"
            )
        self._current = current
        self._oldest = oldest
        self._functions: dict[int, Migration] = {}
        self._validated = False
        if migrations is not None:
            if not isinstance(migrations, Mapping):
                raise InvalidMigrationChain(
                    f"migrations must be a mapping of version to function, not {type(migrations).__name__}"
                )
            for version, function in migrations.items():
                self._register(version, function)
            self.validate()

    @property
    def current(self) -> int:
        """The schema_version this code writes, and every load is lifted to."""
        return self._current

    @property
    def oldest(self) -> int:
        """The oldest schema_version this chain can lift; older ones are refused."""
        return self._oldest

    @property
    def versions(self) -> range:
        """Every schema_version a checkpoint may have and still load: ``oldest`` … ``current``."""
        return range(self._oldest, self._current + 1)

    @property
    def migrations(self) -> Mapping[int, Migration]:
        """The registered functions by the version they lift from (read-only, in order)."""
        return MappingProxyType(dict(sorted(self._functions.items())))

    def migration(self, *, from_version: int) -> Callable[[M], M]:
        """Decorator registering a function lifting ``from_version`` to ``from_version + 1``.

        The function gets a private copy of the whole checkpoint as plain
        data (the shape of ``Checkpoint.to_dict()``) and returns it changed —
        in place or as a new dict. It must keep ``run_id`` and ``step``; the
        chain sets ``schema_version`` itself.
        """

        def register(function: M) -> M:
            self._register(from_version, function)
            return function

        return register

    def _register(self, version: Any, function: Any) -> None:
        if not is_int(version):
            raise InvalidMigrationChain(f"migration versions must be ints, not {type(version).__name__}")
        if version < 1:
            raise InvalidMigrationChain(f"migration from version {version}: versions start at 1")
        if version >= self._current:
            raise InvalidMigrationChain(
                f"migration from version {version} to {version + 1} goes beyond the current version "
                f"{self._current}; raise current to {version + 1} to add it"
            )
        if version < self._oldest:
            raise InvalidMigrationChain(
                f"migration from version {version} is below the oldest supported version "
                f"{self._oldest}; remove it or lower oldest"
            )
        if not callable(function):
            raise InvalidMigrationChain(
                f"migration from version {version} is a {type(function).__name__}, not a function"
            )
        if version in self._functions:
            raise InvalidMigrationChain(
                f"migration from version {version} to {version + 1} is registered twice "
                f"({migration_name(self._functions[version])} and {migration_name(function)})"
            )
        self._functions[version] = function
        self._validated = False

    def validate(self) -> None:
        """Raise ``InvalidMigrationChain`` unless every version from ``oldest`` to
        ``current - 1`` has its migration (registrations are checked as they come)."""
        if self._validated:
            return
        missing = [v for v in range(self._oldest, self._current) if v not in self._functions]
        if missing:
            steps = ", ".join(f"{v} to {v + 1}" for v in missing)
            raise InvalidMigrationChain(
                f"no migration from version {steps}: a chain at current version {self._current} needs "
                f"one from every version from {self._oldest} to {self._current - 1}"
            )
        self._validated = True

    def needs_migration(self, version: int) -> bool:
        """True unless ``version`` is ``current``.

        A checkpoint that needs migration goes through ``migrate``, which lifts
        it — or refuses it when it is newer than ``current`` (``SchemaTooNew``)
        or older than ``oldest``. Newer versions answer True on purpose, so a
        caller that skips ``migrate`` when this is False never loads a shape it
        does not know.
        """
        if not is_int(version) or version < 1:
            raise InvalidArgument(f"schema_version must be an int of at least 1, not {version!r}")
        return version != self._current

    def check_version(self, version: Any, *, run_id: str, step: int) -> None:
        """Raise unless a checkpoint at ``version`` can be lifted to ``current``.

        ``SchemaTooNew`` when it is newer; ``MigrationError`` when it is older
        than ``oldest`` (its migrations were retired); ``InvalidArgument``
        when it is not an int of at least 1. Cheap: the store may call it on a
        header before loading the rest.
        """
        if not is_int(version):
            raise InvalidArgument(
                f"run {run_id!r} step {step}: schema_version must be an int, not {type(version).__name__}"
            )
        if version < 1:
            raise InvalidArgument(f"run {run_id!r} step {step}: schema_version must be at least 1")
        if version > self._current:
            raise SchemaTooNew(run_id, step, version, self._current)
        if version < self._oldest:
            raise MigrationError(
                run_id,
                step,
                version,
                self._current,
                f"schema_version {version} is older than the oldest this chain supports "
                f"({self._oldest}); its migrations were retired",
            )

    def migrate(
        self, data: Mapping[str, Any], *, run_id: str | None = None, step: int | None = None
    ) -> dict[str, Any]:
        """The checkpoint ``data`` lifted to ``current``, as a new dict.

        ``data`` is the whole checkpoint as plain JSON data (the shape of
        ``Checkpoint.to_dict()``) and is never changed: the functions run on a
        deep copy, and a checkpoint already at ``current`` comes back as a
        copy too. ``run_id`` and ``step`` name the checkpoint in errors when
        ``data`` lacks them.

        Raises ``SchemaTooNew`` for a newer version, ``MigrationError`` when a
        function raises (chained as ``__cause__``), returns something other
        than a dict, changes ``run_id`` or ``step``, removes or retypes a
        checkpoint field, or returns data that is not JSON-compatible (naming
        the path) — and for a version older than ``oldest``.
        """
        self.validate()
        if not isinstance(data, Mapping):
            raise InvalidArgument(f"migrate needs the checkpoint as a dict, not {type(data).__name__}")
        run_id, step = identity(data, run_id, step)
        version = data.get("schema_version")
        self.check_version(version, run_id=run_id, step=step)
        assert is_int(version)  # check_version refused anything else
        steps = [(v, self._functions[v]) for v in range(version, self._current)]
        return lift(data, steps, run_id=run_id, step=step)

    def __repr__(self) -> str:
        functions = ", ".join(f"{v}: {migration_name(f)}" for v, f in sorted(self._functions.items()))
        return f"MigrationChain(current={self._current}, oldest={self._oldest}, migrations={{{functions}}})"


def current_version(chain: MigrationChain | None, schema_version: Any = None) -> int:
    """The schema_version a store opened with ``migrations=chain`` and ``schema_version=`` writes and loads.

    The chain's ``current``; without a chain ``schema_version``, default 1.
    Both given, they must agree (``InvalidArgument`` otherwise): one store
    cannot have two current versions.
    """
    if schema_version is not None and (not is_int(schema_version) or not 1 <= schema_version <= _MAX_VERSION):
        raise InvalidArgument(f"schema_version must be an int from 1 to {_MAX_VERSION}")
    if chain is None:
        return 1 if schema_version is None else schema_version
    if schema_version is not None and schema_version != chain.current:
        raise InvalidArgument(
            f"schema_version={schema_version} disagrees with the migration chain's current version "
            f"{chain.current}; give one of them, or both equal"
        )
    return chain.current


# The largest schema_version a store holds (store.validate.MAX_SCHEMA_VERSION, a 32-bit column).
_MAX_VERSION = 2**31 - 1
