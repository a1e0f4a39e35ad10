"""A store's settings: what it does to a checkpoint on the way in and out, fixed when it opens.

Each direction has its own module: a save is prepared (scrubbed, escaped,
offloaded, its delta planned) by ``prepare.py`` before its transaction; a
load is migrated and its secrets resolved by ``after_load.py`` after its
transaction, with large values put back by ``large_values.py``. ``StoreSettings``
holds what both need — the scrubber, the migration chain, the blob target
and policy, the retention — and is what every store call takes.

One ``StoreSettings`` per store, made by ``open_store`` from its options and
fixed from then on: assigning to it raises, and a changed copy is a new
object (``replace``, ``encrypted``) that a store is opened with — a second
store handle, never the first one's settings swapped under it. It holds no
per-call state, so it is shared by every thread; it does carry the store's
memory of the runs it saved (``remembered.RunMemory``: a hint for fresh
checkpoints, thread-safe), which a copy shares.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from safepoint.blobs.base import BlobRef
from safepoint.errors import InvalidArgument
from safepoint.migrations import MigrationChain, current_version
from safepoint.model import Checkpoint
from safepoint.records import Retention
from safepoint.refs import BlobLink
from safepoint.scrub import Scrubber

from . import after_load
from .after_load import ResolveSecrets
from .blob_targets import BlobTarget, blob_target
from .large_values import DEFAULT_THRESHOLD, BlobPolicy, inline, inline_blobs
from .prepare import PreparedSave, guarded, prepare_save
from .remembered import RunMemory
from .sealed_blobs import SealedBlobs
from .sealer import Sealer
from .tenants import IMPLICIT
from .verified import VerifiedRows

if TYPE_CHECKING:
    from .query import Loaded

T = TypeVar("T")


class StoreSettings:
    """A store's save and load transformations: scrubbing, migrations (and blobs).

    ``schema_version`` is the application's current checkpoint version as
    this code knows it: the chain's ``current``, else the one given, else 1.
    A save of a newer checkpoint and a migrating load of one are refused
    (``SchemaTooNew``), so code that never declared versions cannot resume
    (and overwrite) a run written by newer code.
    """

    def __init__(
        self,
        scrubber: Scrubber | None = None,
        migrations: MigrationChain | None = None,
        blobs: BlobTarget | None = None,
        blob_policy: BlobPolicy | None = None,
        retention: Retention | None = None,
        *,
        schema_version: int | None = None,
    ) -> None:
        self.scrubber = scrubber
        self.blobs = blobs
        self.blob_policy = blob_policy if blob_policy is not None else BlobPolicy()
        if retention is not None and not isinstance(retention, Retention):
            raise InvalidArgument(f"retention must be a safepoint.Retention, not {type(retention).__name__}")
        self.retention = retention
        if migrations is not None:
            if not isinstance(migrations, MigrationChain):
                raise InvalidArgument(
                    f"migrations must be a safepoint.MigrationChain, not {type(migrations).__name__}"
                )
            migrations.validate()  # a gap is an error now, not when a run resumes
        self.migrations = migrations
        self.schema_version = current_version(migrations, schema_version)
        self.memory = RunMemory()
        self.verified = VerifiedRows()  # message rows a load has hashed (``verified.py``)
        # An encrypted store's (``open_store(url, encryption=…)``): every operation's
        # content sealed and opened by ``sealed_ops``, the blobs by ``sealed_blobs``.
        self.sealer: Sealer | None = None
        self._fixed = True

    def __setattr__(self, name: str, value: Any) -> None:
        if getattr(self, "_fixed", False):
            raise AttributeError(f"a store's settings are fixed when it opens: use replace() for {name}")
        object.__setattr__(self, name, value)

    def replace(self, **changes: Any) -> StoreSettings:
        """A copy with ``changes`` (attribute names), for a second store handle over the same database."""
        copied = copy.copy(self)
        for name, value in changes.items():
            if not hasattr(self, name) or name.startswith("_"):
                raise AttributeError(f"store settings have no {name}")
            object.__setattr__(copied, name, value)
        return copied

    def encrypted(self, sealer: Sealer) -> StoreSettings:
        """These settings sealing everything the store writes, and opening what it reads, with ``sealer``."""
        blobs = None if self.blobs is None else SealedBlobs(self.blobs, sealer)
        return self.replace(sealer=sealer, blobs=blobs)

    @classmethod
    def from_options(
        cls, options: dict[str, Any], default_blobs: BlobTarget | None = None, *, tenant: str = IMPLICIT
    ) -> StoreSettings:
        """Take the settings's options out of ``open_store``'s keyword arguments.

        ``default_blobs`` is the backend's blob target for ``tenant`` when ``blobs``
        is not given; a blob store given as ``blobs`` is seen through ``tenant``'s
        namespace in it (``blob_targets.blob_target``).
        """
        migrations = options.pop("migrations", None)
        schema_version = options.pop("schema_version", None)
        retention = options.pop("retention", None)
        blobs = blob_target(
            options.pop("blobs", None), default_blobs, options.pop("blob_compress", False), tenant=tenant
        )
        blob_policy = BlobPolicy(
            threshold=options.pop("blob_threshold", DEFAULT_THRESHOLD), rules=options.pop("blob_rules", {})
        )
        scrubber = options.pop("scrubber", None)
        secrets = options.pop("secrets", None)
        policy = options.pop("secret_policy", "reference")
        pii = options.pop("pii", ())
        if scrubber is False:
            if secrets is not None:
                raise InvalidArgument("secrets= needs a scrubber; it cannot be combined with scrubber=False")
            return cls(None, migrations, blobs, blob_policy, retention, schema_version=schema_version)
        if scrubber is None:
            scrubber = Scrubber(secrets=secrets, policy=policy, pii=pii)
        elif not isinstance(scrubber, Scrubber):
            raise InvalidArgument(
                f"scrubber must be a safepoint.Scrubber or False, not {type(scrubber).__name__}"
            )
        elif secrets is not None or pii:
            raise InvalidArgument("give secrets= and pii= to the Scrubber, not beside it")
        return cls(scrubber, migrations, blobs, blob_policy, retention, schema_version=schema_version)

    def prepare_save(self, cp: Checkpoint) -> PreparedSave:
        """``cp`` in the form this store writes (``prepare.prepare_save``)."""
        return prepare_save(cp, self.scrubber, self.blobs, self.blob_policy, self.schema_version)

    def guard(self, func: Callable[..., T], *args: Any) -> T:
        """``func(*args)``, with a ``NotJSONCompatible`` path scrubbed (``prepare.guarded``)."""
        return guarded(self.scrubber, func, *args)

    def migrate(self, cp: Checkpoint) -> Checkpoint:
        """``cp`` run forward to the current schema_version (``after_load.migrate``)."""
        return after_load.migrate(cp, self.migrations, self.schema_version)

    def after_load(
        self, loaded: Loaded, *, migrate: bool, resolve: ResolveSecrets, fetch_blobs: bool
    ) -> Checkpoint:
        """What ``load`` returns: migrated (unless ``migrate=False``) — migrations see
        blob references, as stored — then large values put back (unless
        ``fetch_blobs=False``), then secrets resolved if asked."""
        cp = loaded.checkpoint
        migrated = False
        if migrate:
            before = cp
            cp = self.migrate(cp)
            migrated = cp is not before
        if fetch_blobs and loaded.has_blobs and self.blobs is not None:
            indexes = None if migrated else loaded.blob_messages
            cp = inline_blobs(cp, self.blobs, fetched=loaded.stored_blobs, message_indexes=indexes)
        return self.resolve(cp, resolve)

    def blob_ref(self, ref: Any) -> BlobRef:
        """``ref`` as a ``BlobRef`` (a ``{"$blob": …}`` dict or a ``BlobRef``)."""
        parsed = ref if isinstance(ref, BlobRef) else BlobRef.from_json(ref)
        if parsed is None:
            raise InvalidArgument("not a blob reference: expected {'$blob': {...}} or a BlobRef")
        if self.blobs is None:
            raise InvalidArgument("this store has no blob store (opened with blobs=False)")
        return parsed

    def fetch_blob(self, ref: BlobRef, stored: dict[str, bytes]) -> str | bytes:
        """The value ``ref`` stands for; ``stored`` holds it already for the database target."""
        assert self.blobs is not None
        values = self.blobs.fetch([ref.digest], stored)
        return inline(BlobLink(ref.digest, ref.size, ref.media_type), values)  # type: ignore[no-any-return]

    def resolve(self, cp: Checkpoint, resolve: ResolveSecrets) -> Checkpoint:
        """``cp`` with secret references and markers replaced by values (in place)."""
        return after_load.resolve_secrets(cp, resolve, self.scrubber)
