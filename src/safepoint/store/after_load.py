"""What a load does to a stored checkpoint after its transaction: migrate, resolve.

The stored (scrubbed) checkpoint is what a load returns, run forward through
the application's migration chain (``migrate``; the stored rows are not
touched) and, only if the caller asks for its secrets back
(``resolve_secrets``), with the references and markers replaced by values
from a registry or resolver. Putting large values back between the two is
the blob half of a load (``large_values.inline_blobs``).
"""

from __future__ import annotations

from collections.abc import Callable

from safepoint.errors import InvalidArgument, SchemaTooNew
from safepoint.messagelist import MessageList, freeze
from safepoint.migrations import MigrationChain
from safepoint.model import MIGRATED_FIELDS, VALUE_FIELDS, Checkpoint
from safepoint.scrub import Scrubber, Secrets
from safepoint.scrub.resolve import lookup_for, restore

ResolveSecrets = bool | Secrets | Callable[[str], "str | None"]


def migrate(cp: Checkpoint, chain: MigrationChain | None, schema_version: int) -> Checkpoint:
    """``cp`` run forward to the chain's current schema_version (a new object).

    The stored rows are not touched. The migrated messages keep the stored
    view but nothing of it is trusted (``clean_prefix`` 0): the next save
    compares them with the stored ones and writes, as a new range at the
    new version, every message from the first one the migration changed.
    ``schema_version`` is the current version this code knows, for a store
    without a chain.
    """
    if chain is None:
        if cp.schema_version > schema_version:
            raise SchemaTooNew(cp.run_id, cp.step, cp.schema_version, schema_version)
        return cp  # no chain: an older version loads as stored
    chain.check_version(cp.schema_version, run_id=cp.run_id, step=cp.step)
    if not chain.needs_migration(cp.schema_version):
        return cp
    data = chain.migrate(cp.to_dict(), run_id=cp.run_id, step=cp.step)
    view = cp.stored_view
    messages = MessageList([freeze(m) for m in data["messages"]], view)
    messages.clean_prefix = 0
    # Every field a migration may change comes from its result; identity, parent
    # and what the store recorded stay the stored checkpoint's.
    migrated = {name: data[name] for name in MIGRATED_FIELDS if name != "messages"}
    return cp.evolve(messages=messages, **migrated)


def resolve_secrets(cp: Checkpoint, resolve: ResolveSecrets, scrubber: Scrubber | None) -> Checkpoint:
    """``cp`` with secret references and markers replaced by values (in place).

    ``resolve``: False (nothing), True (the secrets registered with
    ``scrubber``), a ``Secrets`` registry or a resolver function.
    """
    if resolve is False:
        return cp
    if resolve is True:
        if scrubber is None or not len(scrubber.secrets):
            raise InvalidArgument("resolve_secrets=True needs secrets registered with the store")
        resolve = scrubber.secrets
    lookup = lookup_for(resolve)
    messages = cp.messages
    assert isinstance(messages, MessageList)
    restored = MessageList([freeze(restore(m, lookup)) for m in messages], messages.stored)
    restored.clean_prefix = messages.clean_prefix
    cp.messages = restored
    for name in VALUE_FIELDS:
        setattr(cp, name, restore(getattr(cp, name), lookup))
    return cp
