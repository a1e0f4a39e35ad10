"""``Store`` and ``AsyncStore``'s one body: the public face of a checkpoint store, over any driver.

Their methods are the call table's (``methods.py``), each run by blocking
on the driver (``Store``, ``twins.Blocking``) or awaiting it (``AsyncStore``,
``twins.Awaiting``): build the shared ``Call`` and run its transaction,
which ``twins.hand_over`` gives the driver, once for both. With an
observer (``open_store(url, observer=…)``) each call runs inside a span
(``observe.store_calls``); without one, a single identity test skips all of that.
What is left to each class is its own kind of ``with``.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from safepoint.observe import NO_OBSERVER, Observer
from safepoint.observe.spans import backend_of
from safepoint.twins import Blocking, Flow, Invoke, entry

from .methods import StoreMethods
from .query import AsyncDriver, Driver
from .settings import StoreSettings

T = TypeVar("T")
D = TypeVar("D", Driver, AsyncDriver)


class StoreFace(StoreMethods, Generic[D]):
    """What ``Store`` and ``AsyncStore`` are, written once (``D``: the kind of driver)."""

    _driver: D

    def __init__(self, driver: D, *, url: str, settings: StoreSettings | None = None) -> None:
        self._driver = driver
        self.url = url
        self.settings = settings if settings is not None else StoreSettings()
        # Spans and metrics (``safepoint.observe``); ``open_store(observer=…)`` sets it.
        self.observer: Observer = NO_OBSERVER
        self._backend = backend_of(url)

    @property
    def driver(self) -> D:
        """The backend driver (for tests and tools; not needed to use the store)."""
        return self._driver

    @entry
    def close(self) -> Flow[None]:
        """Release the connection(s). Using the store afterwards raises ``StoreClosed``."""
        yield Invoke(self._driver.close)

    def __repr__(self) -> str:
        return f"<safepoint.{type(self).__name__} {self.url}>"


class Store(StoreFace[Driver], Blocking):
    """A checkpoint store. Open one with ``safepoint.open_store(url)``.

    Thread-safe; one ``Store`` per process is the usual pattern, and any
    number of processes may open the same SQLite file or PostgreSQL database.
    """

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
