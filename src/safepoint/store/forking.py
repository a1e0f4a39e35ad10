"""What a store's drivers do when the process forks (``os.fork``, multiprocessing's ``fork``).

A forked child inherits the parent's memory — every driver's connections,
sockets and locks — but only the thread that called ``fork``. None of it is
safe to use in the child: a PostgreSQL connection is a socket the parent is
still talking on (the child's queries interleave with the parent's on the
server, and closing it sends libpq's Terminate message, which ends the
parent's session); a SQLite connection's file locks belong to the parent
process; and a lock another thread held at the instant of the fork stays
held in the child forever. So, as psycopg-pool's users and SQLAlchemy do, a
driver notices it is in a new process (the process id changed) and starts
afresh, *discarding* what it inherited:

* before the fork, in the parent, ``before_fork`` lets a driver quiesce (the
  SQLite driver waits for its transaction in flight, so that libsqlite3's
  state the child inherits is idle);
* after it, in the parent, ``after_fork_in_parent`` undoes that;
* in the child, ``after_fork_in_child`` gives the driver fresh locks and
  hands what it inherited to ``inherit``; its next operation reconnects.

``inherit`` keeps an object referenced for good and never closes it: freeing
a SQLite connection closes it, and a pool's finalizer would try to stop
threads that do not exist in the child. (psycopg's own ``PGconn`` skips
``PQfinish`` when freed in another process, but ``close()`` does not.)

The hooks run only for forks Python makes (``os.register_at_fork``); drivers
also compare process ids on each use, so a fork made elsewhere still gets a
fresh connection rather than the parent's.
"""

from __future__ import annotations

import ctypes
import os
import weakref
from typing import Protocol


class ForkAware(Protocol):
    """A driver that takes part in forks (see the module docstring)."""

    def before_fork(self) -> None: ...

    def after_fork_in_parent(self) -> None: ...

    def after_fork_in_child(self) -> None: ...


_DRIVERS: weakref.WeakSet[ForkAware] = weakref.WeakSet()
_INHERITED: list[object] = []


def register(driver: ForkAware) -> None:
    """Call ``driver``'s hooks around every fork of this process while it lives."""
    _DRIVERS.add(driver)


def inherit(obj: object) -> None:
    """Keep ``obj`` (a connection or pool the parent owns) alive and unclosed in this child, for good.

    One extra reference count that is never given back, so that not even
    the interpreter's shutdown frees it: its finalizer would close it.
    """
    _INHERITED.append(obj)
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(obj))


def _each(hook: str) -> None:
    for driver in list(_DRIVERS):
        try:
            getattr(driver, hook)()
        except Exception:  # one driver's failure must not stop the others' hooks
            continue


def _before() -> None:
    _each("before_fork")


def _after_in_parent() -> None:
    _each("after_fork_in_parent")


def _after_in_child() -> None:
    _each("after_fork_in_child")


os.register_at_fork(before=_before, after_in_parent=_after_in_parent, after_in_child=_after_in_child)
