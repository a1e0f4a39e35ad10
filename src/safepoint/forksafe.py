"""Locks that a forked child gets fresh: the one door for objects that outlive an ``os.fork``.

A lock another thread held when the process forked stays held in the child,
where no thread will ever release it: the child's first call that takes it
hangs. Objects a store shares across threads and keeps after a fork (the
secrets registry, an encrypted store's sealer, a keyring that fetches keys)
make their lock here; after a fork, in the child, each of them gets a new one.
Only the lock is renewed: what it guarded was whole at the fork unless the
holder was midway through a change, and each user keeps its critical sections
to single assignments or to work that is redone when found missing.
"""

from __future__ import annotations

import os
import threading
import weakref
from typing import Any

# The objects whose ``_lock`` is renewed in a forked child (weakly: they die as usual).
_OWNERS: weakref.WeakSet[Any] = weakref.WeakSet()


def fork_safe_lock(owner: Any) -> threading.Lock:
    """A new lock for ``owner._lock``; in a forked child ``owner._lock`` is replaced by a fresh one."""
    _OWNERS.add(owner)
    return threading.Lock()


def _renew_in_child() -> None:
    for owner in list(_OWNERS):
        owner._lock = threading.Lock()


os.register_at_fork(after_in_child=_renew_in_child)
