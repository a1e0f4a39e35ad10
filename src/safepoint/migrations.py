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
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, TypeGuard, TypeVar

from safepoint import codec
from safepoint.errors import (
    InvalidArgument,
    InvalidMigrationChain,
    MigrationError,
    NotJSONCompatible,
    SchemaTooNew,
)
from safepoint.messagelist import thaw

Migration = Callable[[dict[str, Any]], dict[str, Any]]
M = TypeVar("M", bound=Migration)

# The fields of Checkpoint.to_dict() a migration may change but not remove or
# retype: the store rebuilds a Checkpoint from the result, and a wrong shape
# caught here names the migration instead of failing later in the store.
_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "messages": (list,),
    "counters": (dict,),
    "cursors": (dict,),
    "state": (dict,),
    "labels": (dict,),
    "pending_action": (dict, type(None)),
    "status": (str,),
}
_IDENTITY = ("run_id", "step")


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _name(function: object) -> str:
    """How errors name a migration: its qualified name, without ``<locals>`` noise."""
    name = str(getattr(function, "__qualname__", None) or type(function).__name__)
    return name.replace("<locals>.", "")


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
        if not _is_int(current) or current < 1:
            raise InvalidMigrationChain(f"current must be an int of at least 1, not {current!r}")
        if not _is_int(oldest) or not 1 <= oldest <= current:
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
        if not _is_int(version):
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
                f"({_name(self._functions[version])} and {_name(function)})"
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
        if not _is_int(version) or version < 1:
            raise InvalidArgument(f"schema_version must be an int of at least 1, not {version!r}")
        return version != self._current

    def check_version(self, version: Any, *, run_id: str, step: int) -> None:
        """Raise unless a checkpoint at ``version`` can be lifted to ``current``.

        ``SchemaTooNew`` when it is newer; ``MigrationError`` when it is older
        than ``oldest`` (its migrations were retired); ``InvalidArgument``
        when it is not an int of at least 1. Cheap: the store may call it on a
        header before loading the rest.
        """
        if not _is_int(version):
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
        run_id, step = _identity(data, run_id, step)
        version = data.get("schema_version")
        self.check_version(version, run_id=run_id, step=step)
        assert _is_int(version)  # check_version refused anything else
        problem = _json_problem(data)
        if problem is not None:
            raise problem
        checkpoint: dict[str, Any] = thaw(dict(data))  # a deep copy: the input stays as stored
        for from_version in range(version, self._current):
            checkpoint = self._apply(from_version, checkpoint, run_id, step)
        return checkpoint

    def _apply(self, version: int, checkpoint: dict[str, Any], run_id: str, step: int) -> dict[str, Any]:
        """Run one migration and check what it returned."""
        function = self._functions[version]
        name = _name(function)

        def failure(detail: str) -> MigrationError:
            return MigrationError(run_id, step, version, version + 1, detail)

        # Captured before the call: the function may change its argument in place.
        identity = {key: checkpoint[key] for key in _IDENTITY if key in checkpoint}
        fields = [key for key in _FIELD_TYPES if key in checkpoint]
        try:
            result = function(checkpoint)
        except Exception as exc:
            raise failure(f"{name} raised {type(exc).__name__} (chained as the cause)") from exc
        if not isinstance(result, dict):
            hint = " (does it end with `return cp`?)" if result is None else ""
            raise failure(f"{name} returned {type(result).__name__}, not a dict{hint}")
        for key, before in identity.items():
            after = result.get(key)
            if type(after) is not type(before) or after != before:
                raise failure(f"{name} changed {key}; a migration must keep the checkpoint's run_id and step")
        for key in fields:
            if key not in result:
                raise failure(f"{name} removed the field {key!r}")
            if not isinstance(result[key], _FIELD_TYPES[key]):
                raise failure(f"{name} made {key!r} a {type(result[key]).__name__}")
        for index, message in enumerate(result.get("messages", ())):
            if not isinstance(message, dict):
                raise failure(f"{name} made messages[{index}] a {type(message).__name__}, not a dict")
        problem = _json_problem(result)
        if problem is not None:
            raise failure(f"{name} returned data that is not JSON-compatible: {problem}") from problem
        result["schema_version"] = version + 1
        return result

    def __repr__(self) -> str:
        functions = ", ".join(f"{v}: {_name(f)}" for v, f in sorted(self._functions.items()))
        return f"MigrationChain(current={self._current}, oldest={self._oldest}, migrations={{{functions}}})"


def _identity(data: Mapping[str, Any], run_id: str | None, step: int | None) -> tuple[str, int]:
    """The run id and step that name ``data`` in errors: the arguments, else its own fields."""
    run_id = data.get("run_id") if run_id is None else run_id
    step = data.get("step") if step is None else step
    if not isinstance(run_id, str):
        raise InvalidArgument("migrate needs a str run_id, in the checkpoint or as run_id=")
    if not _is_int(step):
        raise InvalidArgument(f"run {run_id!r}: migrate needs an int step, in the checkpoint or as step=")
    return run_id, step


def _json_problem(data: Mapping[str, Any]) -> NotJSONCompatible | None:
    """The first value of ``data`` that is not plain JSON, named by its path, or None."""
    if codec.is_plain_json(data):
        return None
    try:
        for key, value in data.items():
            if not isinstance(key, str):
                raise NotJSONCompatible(f"[{key!r}]", f"field name of type {type(key).__name__} is not a str")
            codec.check_json(value, key if key.isidentifier() else f"[{key!r}]")
    except NotJSONCompatible as exc:
        return exc
    return None


def current_version(chain: MigrationChain | None, schema_version: Any = None) -> int:
    """The schema_version a store opened with ``migrations=chain`` and ``schema_version=`` writes and loads.

    The chain's ``current``; without a chain ``schema_version``, default 1.
    Both given, they must agree (``InvalidArgument`` otherwise): one store
    cannot have two current versions.
    """
    if schema_version is not None and (
        not _is_int(schema_version) or not 1 <= schema_version <= _MAX_VERSION
    ):
        raise InvalidArgument(f"schema_version must be an int from 1 to {_MAX_VERSION}")
    if chain is None:
        return 1 if schema_version is None else schema_version
    if schema_version is not None and schema_version != chain.current:
        raise InvalidArgument(
            f"schema_version={schema_version} disagrees with the migration chain's current version "
            f"{chain.current}; give one of them, or both equal"
        )
    return chain.current


# The largest schema_version a store holds (serialize.MAX_SCHEMA_VERSION, a 32-bit column).
_MAX_VERSION = 2**31 - 1
