"""What a store does to a checkpoint between the caller and the bytes, and back.

Save: every field is scrubbed (``safepoint.scrub``) before it is encoded, so
no registered secret or rule match reaches the database. Messages are
scrubbed one by one as the delta is planned — only the new ones, and the
scrubber is deterministic, so the stored bytes of an unchanged message are
the same every time and the delta compares like with like.

Load: the stored (scrubbed) checkpoint is what the store returns, unless the
caller asks for its secrets back (``resolve_secrets``), which replaces the
references and markers with values from a registry or resolver.

One ``Pipeline`` per store; it holds no per-call state, so it is shared by
every thread.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from safepoint import codec
from safepoint.blobs.base import BlobRef, BlobStore
from safepoint.errors import BlobNotFound, InvalidArgument, NotJSONCompatible, SchemaTooNew
from safepoint.messagelist import MessageList, StoredView, freeze
from safepoint.migrations import MigrationChain, current_version
from safepoint.model import Checkpoint, Retention, ScrubReport
from safepoint.refs import BlobLink
from safepoint.scrub import Found, Scrubber, Secrets
from safepoint.scrub.resolve import lookup_for, restore

from .blobio import BlobTarget, DatabaseBlobs, ExternalBlobs, inline_blobs
from .offload import (
    DEFAULT_THRESHOLD,
    BlobPolicy,
    BlobSink,
    blob_digests_json,
    inline,
    might_hold_blobs,
    offload,
    offload_encoded,
)
from .references import KEY_MARK, may_need_stored_form, to_stored
from .serialize import MessagePlan, check_message, plan_messages

if TYPE_CHECKING:
    from .query import Loaded

T = TypeVar("T")
# Header JSON up to this many characters is walked without a look per field (see _scrub_fields).
_WALK_WITHOUT_LOOK = 2048
ResolveSecrets = bool | Secrets | Callable[[str], "str | None"]


@dataclass(frozen=True, slots=True)
class StoredFields:
    """The header fields as they will be stored (scrubbed)."""

    counters: dict[str, int | float]
    pending_action: dict[str, Any] | None
    cursors: dict[str, Any]
    state: dict[str, Any]
    labels: dict[str, str]

    @classmethod
    def of(cls, cp: Checkpoint) -> StoredFields:
        """A checkpoint's fields as they are (already scrubbed, e.g. a stored one being forked)."""
        return cls(cp.counters, cp.pending_action, cp.cursors, cp.state, cp.labels)

    def value(self, name: str) -> Any:
        """One of the walked fields (``pending_action``, ``cursors``, ``state``) by name."""
        return getattr(self, name)

    def with_values(self, values: dict[str, Any]) -> StoredFields:
        """A copy with the walked fields in ``values`` replaced."""
        return StoredFields(
            self.counters,
            values.get("pending_action", self.pending_action),
            values.get("cursors", self.cursors),
            values.get("state", self.state),
            self.labels,
        )


# The header fields that hold arbitrary JSON (walked for secrets, $ keys and blobs).
_WALKED = ("pending_action", "cursors", "state")


class PreparedSave:
    """One save's stored form: scrubbed fields with large values offloaded, the
    message encoder the delta plan uses, and the blobs the save must write."""

    def __init__(self, pipeline: Pipeline, cp: Checkpoint) -> None:
        self._scrubber = pipeline.scrubber
        self._policy = pipeline.blob_policy
        self.blobs = pipeline.blobs
        self._field_counts: list[Counter[tuple[str, str]]] = []
        self._message_found: Found | None = None
        self._field_sink = BlobSink()
        self._message_sink = BlobSink()
        self.fields = self._prepare_fields(StoredFields.of(cp))

    def _prepare_fields(self, fields: StoredFields) -> StoredFields:
        """The header fields as stored: scrubbed (``bytes`` too), input ``$`` keys
        escaped, large values and ``bytes`` out to blobs.

        The fields are encoded together once; most saves stop there, because
        that one text shows no step might match, no ``$`` key and nothing large.
        """
        try:
            encoded: bytes | None = codec.encode(_header_values(fields))
        except TypeError:  # bytes somewhere (validation let them through): every field is walked
            encoded = None
        stored = self._scrub_fields(fields, encoded)
        if stored is not fields:
            encoded = None  # changed: the offload check needs the new text
        return self._offload_fields(stored, encoded)

    def _scrub_fields(self, fields: StoredFields, encoded: bytes | None) -> StoredFields:
        scrubber = self._scrubber
        if scrubber is None:
            if encoded is not None and not may_need_stored_form(encoded):
                return fields
            return fields.with_values({name: to_stored(fields.value(name)) for name in _WALKED})
        # One look at all the header fields together first: usually nothing matches.
        text = None if encoded is None else encoded.decode()
        if text is not None and not scrubber.needs_walk(text):
            return fields
        # Something might match. A small header (the usual case: a counter
        # named "tokens_in" is enough to wake the token rule's prefilter) is
        # walked field by field straight away — its short strings are cached —
        # where a look per field would cost more than the walk; a large one
        # is looked at field by field first, so only the field at fault is walked.
        checked = text is not None and len(text) <= _WALK_WITHOUT_LOOK
        found = Found(scrubber.policy, "state")  # one record for the header; each field sets its root
        values = {}
        for name in _WALKED:
            values[name], _ = scrubber.scrub(fields.value(name), name, found, checked=checked)
        # Labels and counter names are queryable columns: they stay strings
        # (markers as plain text, never references; never resolved).
        labels, _ = scrubber.scrub_strings(fields.labels, "labels", found, values_too=True, checked=checked)
        counters, _ = scrubber.scrub_strings(
            fields.counters, "counters", found, values_too=False, checked=checked
        )
        self._field_counts.append(found.counts)
        scrubbed = StoredFields(
            counters, values["pending_action"], values["cursors"], values["state"], labels
        )
        if not found.counts and encoded is not None and scrubbed == fields:
            return fields  # nothing replaced: the header text encoded earlier still holds
        return scrubbed

    def _offload_fields(self, fields: StoredFields, encoded: bytes | None) -> StoredFields:
        """Large values out of the header, after scrubbing (so no blob holds a secret)."""
        if self.blobs is None:
            return fields
        if encoded is not None and not might_hold_blobs(encoded, self._policy):
            return fields  # the whole header is smaller than any threshold, and holds no reference
        values = {}
        for name in _WALKED:
            value = fields.value(name)
            try:
                needed = might_hold_blobs(codec.encode(value), self._policy)
            except TypeError:  # bytes (JSON has none): they go to the blob store
                needed = True
            values[name] = offload(value, name, self._policy, self._field_sink) if needed else value
        return fields.with_values(values)

    def plan(self, view: StoredView | None, messages: list[Any]) -> MessagePlan:
        """The message delta against ``view``: every new message scrubbed, then offloaded."""
        scrubber, policy = self._scrubber, self._policy
        if scrubber is None and self.blobs is None:
            return plan_messages(view, messages)
        found = self._message_found = Found(scrubber.policy if scrubber else "reference", "messages")
        sink = self._message_sink = BlobSink()

        def encode(message: Any, index: int) -> bytes:
            root = f"messages[{index}]"
            # One validating walk: plain JSON (the usual case) encodes as it is
            # and is walked only if its text asks for it; anything else (bytes,
            # the store's own references) is checked by path and walked.
            if type(message) is dict and codec.is_plain_json(message):
                body = codec.encode(message)
                if scrubber is not None:
                    message, body = scrubber.scrub_encoded(message, body, root, found)
                elif KEY_MARK in body:  # a $ key to escape
                    message = to_stored(message)
                    body = codec.encode(message)
            else:
                check_message(message, index, allow_bytes=self.blobs is not None)
                if scrubber is not None:
                    message, _ = scrubber.scrub(message, root, found, checked=True)
                else:
                    message = to_stored(message)
                if self.blobs is not None:
                    message = offload(message, root, policy, sink)  # bytes and large text out
                body = codec.encode(message)
            if self.blobs is not None:
                body = offload_encoded(message, body, root, policy, sink)
            return body

        return plan_messages(view, messages, encode)

    def report(self) -> ScrubReport:
        counts = list(self._field_counts)
        if self._message_found is not None:
            counts.append(self._message_found.counts)
        return ScrubReport.merge(counts)

    # -- what the save writes besides its row --------------------------------

    def blob_digests(self) -> str | None:
        """The row's ``blobs`` column: every digest its header and new messages reference."""
        sink = BlobSink()
        sink.digests = self._field_sink.digests | self._message_sink.digests
        return blob_digests_json(sink)

    def pending_blobs(self) -> dict[str, bytes]:
        """New values to write to the blob store (by digest), before the row commits."""
        return self._field_sink.pending | self._message_sink.pending


class Pipeline:
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

    @classmethod
    def from_options(cls, options: dict[str, Any], default_blobs: BlobTarget | None = None) -> Pipeline:
        """Take the pipeline's options out of ``open_store``'s keyword arguments.

        ``default_blobs`` is the backend's blob target when ``blobs`` is not given.
        """
        migrations = options.pop("migrations", None)
        schema_version = options.pop("schema_version", None)
        retention = options.pop("retention", None)
        blobs = _blob_target(options.pop("blobs", None), default_blobs, options.pop("blob_compress", False))
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
        if type(cp.schema_version) is int and cp.schema_version > self.schema_version:
            # Written by newer code (an imported fixture, a copied checkpoint): this
            # code would store a shape it cannot load itself.
            raise SchemaTooNew(cp.run_id, cp.step, cp.schema_version, self.schema_version)
        return PreparedSave(self, cp)

    def guard(self, func: Callable[..., T], *args: Any) -> T:
        """``func(*args)``, with a ``NotJSONCompatible`` path scrubbed: the path
        may quote a dict key, and a key can be a secret. The cleaned error is
        raised outside the ``except`` block so the original (with the key) is
        not kept as its ``__context__`` either."""
        try:
            return func(*args)
        except NotJSONCompatible as exc:
            if self.scrubber is None:
                raise
            error = NotJSONCompatible(self.scrubber.scrub_text(exc.path), exc.reason)
        raise error

    def migrate(self, cp: Checkpoint) -> Checkpoint:
        """``cp`` run forward to the chain's current schema_version (a new object).

        The stored rows are not touched. The migrated messages keep the stored
        view but nothing of it is trusted (``clean_prefix`` 0): the next save
        compares them with the stored ones and writes, as a new range at the
        new version, every message from the first one the migration changed.
        """
        chain = self.migrations
        if chain is None:
            if cp.schema_version > self.schema_version:
                raise SchemaTooNew(cp.run_id, cp.step, cp.schema_version, self.schema_version)
            return cp  # no chain: an older version loads as stored
        chain.check_version(cp.schema_version, run_id=cp.run_id, step=cp.step)
        if not chain.needs_migration(cp.schema_version):
            return cp
        data = chain.migrate(cp.to_dict(), run_id=cp.run_id, step=cp.step)
        view = cp.stored_view
        messages = MessageList([freeze(m) for m in data["messages"]], view)
        messages.clean_prefix = 0
        return Checkpoint(
            run_id=cp.run_id,
            step=cp.step,
            schema_version=data["schema_version"],
            messages=messages,
            counters=data["counters"],
            pending_action=data["pending_action"],
            cursors=data["cursors"],
            state=data["state"],
            status=data["status"],
            labels=data["labels"],
            parent=cp.parent,
            created_at=cp.created_at,
            digest=cp.digest,
            scrub_report=cp.scrub_report,
        )

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
        if isinstance(self.blobs, ExternalBlobs):
            stored = self.blobs.fetch([ref.digest])
        elif ref.digest not in stored:
            raise BlobNotFound(ref.digest, "not in the store's blob table")
        values = DatabaseBlobs.decode(stored) if self.blobs.in_database else stored
        return inline(BlobLink(ref.digest, ref.size, ref.media_type), values)  # type: ignore[no-any-return]

    def resolve(self, cp: Checkpoint, resolve: ResolveSecrets) -> Checkpoint:
        """``cp`` with secret references and markers replaced by values (in place)."""
        if resolve is False:
            return cp
        if resolve is True:
            if self.scrubber is None or not len(self.scrubber.secrets):
                raise InvalidArgument("resolve_secrets=True needs secrets registered with the store")
            resolve = self.scrubber.secrets
        lookup = lookup_for(resolve)
        messages = cp.messages
        assert isinstance(messages, MessageList)
        restored = MessageList([freeze(restore(m, lookup)) for m in messages], messages.stored)
        restored.clean_prefix = messages.clean_prefix
        cp.messages = restored
        cp.pending_action = restore(cp.pending_action, lookup)
        cp.cursors = restore(cp.cursors, lookup)
        cp.state = restore(cp.state, lookup)
        return cp


def _header_values(fields: StoredFields) -> tuple[Any, ...]:
    return (fields.pending_action, fields.cursors, fields.state, fields.labels, fields.counters)


def _blob_target(option: Any, default: BlobTarget | None, compress: bool) -> BlobTarget | None:
    """The blob target ``open_store(..., blobs=…)`` asks for.

    ``None``: the backend's default; ``False``: never offload; ``"database"``:
    the store's own table; a ``BlobStore``; or a blob store URL
    (``file:///…``, ``s3://bucket/prefix?…``, ``memory://``).
    """
    if option is None:
        return default
    if option is False:
        return None
    if option == "database":
        return DatabaseBlobs(compress=compress)
    if isinstance(option, str):
        from safepoint.blobs import open_blob_store  # noqa: PLC0415

        return ExternalBlobs(
            open_blob_store(option, compress=compress) if compress else open_blob_store(option)
        )
    if isinstance(option, BlobStore):
        return ExternalBlobs(option)
    raise InvalidArgument(
        f"blobs must be a BlobStore, a blob store URL, 'database' or False, not {type(option).__name__}"
    )
