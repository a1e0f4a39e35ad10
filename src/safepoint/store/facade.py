"""``Store``: the public face of a checkpoint store, over any driver.

Its methods are the call table's (``methods.py``), each run by blocking on
the driver (``twins.Blocking``): build the shared ``Call`` and run its
transaction. An async store does the same with ``await``. With an observer
(``open_store(url, observer=…)``) each call runs inside a span (``observe.store_calls``);
without one, a single identity test skips all of that.
"""

from __future__ import annotations

from typing import Any, TypeVar

from safepoint.observe import NO_OBSERVER, Observer
from safepoint.observe.spans import backend_of

from .calls import Call
from .methods import StoreMethods
from .query import Driver
from .settings import StoreSettings
from .twins import Blocking

T = TypeVar("T")


class Store(StoreMethods, Blocking):
    """A checkpoint store. Open one with ``safepoint.open_store(url)``.

    Thread-safe; one ``Store`` per process is the usual pattern, and any
    number of processes may open the same SQLite file or PostgreSQL database.
    """

    _driver: Driver

    def __init__(self, driver: Driver, *, url: str, settings: StoreSettings | None = None) -> None:
        self._driver = driver
        self.url = url
        self.settings = settings if settings is not None else StoreSettings()
        # Spans and metrics (``safepoint.observe``); ``open_store(observer=…)`` sets it.
        self.observer: Observer = NO_OBSERVER
        self._backend = backend_of(url)

    @property
    def driver(self) -> Driver:
        """The backend driver (for tests and tools; not needed to use the store)."""
        return self._driver

    def _transact(self, call: Call[T, Any]) -> T:
        if call.before is not None:  # slow I/O (blob uploads), before the transaction begins
            call.before()
        # An encrypted store's: sealed.
        op, rebuild = self.settings.sealing(call.op, call.rebuild, self._driver.capabilities)
        if rebuild is not None:  # a save: it may share a transaction with other runs' (group commit)
            return self._driver.run_joined(op, rebuild, weight=call.weight)
        return self._driver.run(op, write=call.write)

    def close(self) -> None:
        """Release the connection(s). Using the store afterwards raises ``StoreClosed``."""
        self._driver.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<safepoint.Store {self.url}>"
