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

from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

from safepoint.observe import NO_OBSERVER, Observer
from safepoint.observe.spans import backend_of
from safepoint.twins import Blocking, Flow, Invoke, entry

from .methods import StoreMethods
from .query import AsyncDriver, Driver
from .redacting import Redacted, Redaction, redact_flow
from .settings import StoreSettings
from .tenants import IMPLICIT

T = TypeVar("T")
D = TypeVar("D", Driver, AsyncDriver)


class StoreFace(StoreMethods, Generic[D]):
    """What ``Store`` and ``AsyncStore`` are, written once (``D``: the kind of driver)."""

    _driver: D

    def __init__(
        self, driver: D, *, url: str, settings: StoreSettings | None = None, tenant: str = IMPLICIT
    ) -> None:
        self._driver = driver
        self.url = url
        # Whose runs this handle sees (``open_store(url, tenant=…)``; ``tenants.py``): the
        # driver and the blob target were opened for it, so no call takes it again.
        self.tenant = tenant
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

    @entry
    def redact(
        self,
        redaction: Redaction,
        *,
        run_ids: Iterable[str] | None = None,
        labels: dict[str, str] | None = None,
        dry_run: bool = False,
        progress: Callable[[int, int], None] | None = None,
    ) -> Flow[Redacted]:
        """Take what ``redaction`` names (``safepoint.Redaction``: secrets, literal values, rules,
        PII kinds) out of every stored checkpoint, message, journal entry and blob of the
        store — or of ``run_ids``, or of the runs whose labels hold all of ``labels``, and
        their forks — one run per transaction, each with an audit record. Resumable: run it
        again after a kill to finish. ``dry_run`` counts what would change and writes
        nothing. See docs/secrets.md, "Redacting what is stored"."""
        return (
            yield from redact_flow(
                self, redaction, run_ids=run_ids, labels=labels, dry_run=dry_run, progress=progress
            )
        )

    def __repr__(self) -> str:
        tenant = "" if self.tenant == IMPLICIT else f" tenant={self.tenant}"
        return f"<safepoint.{type(self).__name__} {self.url}{tenant}>"


class Store(StoreFace[Driver], Blocking):
    """A checkpoint store. Open one with ``safepoint.open_store(url)``.

    Thread-safe; one ``Store`` per process is the usual pattern, and any
    number of processes may open the same SQLite file or PostgreSQL database.
    ``tenant`` names whose runs it sees (``open_store(url, tenant=…)``;
    ``"default"``, the implicit tenant, when none was given).
    """

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
