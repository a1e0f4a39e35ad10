"""The store under test for one example: where it lives, how each process opens it, its bytes.

A ``World`` is made fresh for every example (a temporary folder, a fresh
PostgreSQL schema, a fresh S3 prefix) and torn down after it. It is one
tenant's: the example's second tenant is another ``World`` on the same place
(``World(config, tenant, place=first)``: the same URL, schema, folder and S3
prefix, a keyring of its own). It opens the tenant's handle with the
example's settings, and the other processes the
operations need: a keyless one, one with a wrong key, an old worker, a child
writer to SIGKILL (``child.py``), all from ``options()`` so that each differs
from the main handle only where the operation says.
"""

from __future__ import annotations

import atexit
import base64
import os
import shutil
import tempfile
import uuid
from pathlib import Path
from typing import Any

import safepoint
from safepoint import Keyring, MigrationChain, Secrets, Store
from safepoint.store.tenants import IMPLICIT, tenant_path

from .configurations import Config
from .model import SECRET_NAME, SECRET_VALUE, migrated
from .values import BLOB_THRESHOLD

_S3: dict[str, Any] = {}  # one moto server per process, started on first use


def s3_endpoint() -> str:
    """The endpoint of this process's moto S3 server (tests/blob_server.py), started once."""
    if "server" not in _S3:
        from blob_server import CREDENTIALS, REGION, start_s3_server  # noqa: PLC0415  # tests/ on the path

        server = start_s3_server()
        atexit.register(server.stop)
        import boto3  # noqa: PLC0415

        client = boto3.client("s3", endpoint_url=server.endpoint_url, region_name=REGION, **CREDENTIALS)
        client.create_bucket(Bucket="safepoint-model")
        _S3.update(server=server, client=client)
    return str(_S3["server"].endpoint_url)


def s3_client() -> Any:
    s3_endpoint()
    return _S3["client"]


def new_key() -> str:
    return base64.b64encode(os.urandom(32)).decode()


def chain(current: int) -> MigrationChain:
    """The application's migration chain at ``current``: each step records itself in the counters."""

    def lift(version: int) -> Any:
        return lambda data: {**data, "counters": migrated(data["counters"], version)}

    return MigrationChain(current, {version: lift(version) for version in range(1, current)})


class World:
    """One tenant of one example's store: its settings, its place, its keyring and its open handle.

    ``place``: another tenant's world whose store this tenant shares (it owns the place and
    removes it at its close); without, a new place."""

    def __init__(self, config: Config, tenant: str = IMPLICIT, *, place: World | None = None) -> None:
        self.config = config
        self.tenant = tenant
        self.owns_place = place is None
        self.keyring_text: str | None = None
        if config.encryption == "on":  # each tenant its own keys (docs/tenants.md)
            self.keyring_text = f"index:{new_key()} k1:{new_key()}"
        if place is not None:
            self.folder, self.schema, self.s3_prefix, self.url = (
                place.folder,
                place.schema,
                place.s3_prefix,
                place.url,
            )
            self.store: Store = self.open(chain_version=1)
            return
        self.folder = Path(tempfile.mkdtemp(prefix="safepoint-model-"))
        self.schema = None
        self.s3_prefix = f"model-{uuid.uuid4().hex}/"
        if config.backend == "memory":
            self.url = "memory://"
        elif config.backend == "sqlite":
            self.url = f"sqlite:///{self.folder / 'state.db'}"
        else:
            from conftest_postgres import require_postgres  # noqa: PLC0415  # tests/ on the path

            self.schema = f"sp_model_{uuid.uuid4().hex}"
            self.url = require_postgres()
        self.store = self.open(chain_version=1)

    # -- opening -------------------------------------------------------------------------

    @property
    def keyring(self) -> Keyring | None:
        return None if self.keyring_text is None else Keyring.from_text(self.keyring_text)

    def spec(self, chain_version: int) -> dict[str, Any]:
        """Everything a process needs to open this store as the main handle does (JSON data)."""
        return {
            "url": self.url,
            "backend": self.config.backend,
            "blobs": self.config.blobs,
            "blob_folder": str(self.folder / "blobs"),
            "s3_endpoint": s3_endpoint() if self.config.blobs == "s3" else None,
            "s3_prefix": self.s3_prefix,
            "schema": self.schema,
            "policy": self.config.secrets,
            "group_commit": self.config.group_commit == "on",
            "keyring": self.keyring_text,
            "chain_version": chain_version,
            "tenant": self.tenant,
        }

    def open(self, *, chain_version: int, keyring: Keyring | bool | None = True) -> Store:
        """A new handle on this store; ``keyring=False`` opens without one, a ``Keyring`` with that one."""
        options = options_of(self.spec(chain_version))
        if keyring is False:
            options.pop("encryption", None)
        elif isinstance(keyring, Keyring):
            options["encryption"] = keyring
        return safepoint.open_store(self.url, **options)

    def reopen(self, chain_version: int) -> None:
        self.store.close()
        self.store = self.open(chain_version=chain_version)

    # -- what is on disk ---------------------------------------------------------------

    def files(self) -> list[Path]:
        """The tenant's SQLite files (db, -wal, -shm) and blob files: what the greps read."""
        found: list[Path] = []
        if self.config.backend == "sqlite":
            db = Path(tenant_path(str(self.folder / "state.db"), self.tenant))
            found += [p for p in (db, Path(f"{db}-wal"), Path(f"{db}-shm")) if p.exists()]
        blobs = self.folder / "blobs"
        if self.tenant != IMPLICIT:
            blobs = blobs / "tenants" / self.tenant  # a named tenant's namespace (FileSystemBlobStore)
        if blobs.exists():
            found += [p for p in blobs.rglob("*") if p.is_file() and not self._another_tenants(p, blobs)]
        return found

    def _another_tenants(self, path: Path, root: Path) -> bool:
        # The implicit tenant's blob root holds the named tenants' namespaces too.
        return self.tenant == IMPLICIT and path.relative_to(root).parts[0] == "tenants"

    def s3_keys_prefix(self) -> str:
        """Where this tenant's S3 objects are: the implicit tenant's at the prefix itself (a key
        under ``tenants/`` there is another tenant's), a named tenant's under ``tenants/<name>/``."""
        return self.s3_prefix if self.tenant == IMPLICIT else f"{self.s3_prefix}tenants/{self.tenant}/"

    def close(self) -> None:
        try:
            self.store.close()
        finally:
            if self.owns_place:
                self.remove_place()

    def remove_place(self) -> None:
        """The folder and the PostgreSQL schema, gone (the owner's, after every tenant's close)."""
        shutil.rmtree(self.folder, ignore_errors=True)
        if self.schema is not None:
            import psycopg  # noqa: PLC0415
            from psycopg import sql  # noqa: PLC0415

            with psycopg.connect(self.url, autocommit=True) as conn:
                conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(self.schema)))


def options_of(spec: dict[str, Any]) -> dict[str, Any]:
    """``open_store``'s keyword options for ``spec`` (``World.spec``): the same in every process."""
    options: dict[str, Any] = {
        "secrets": Secrets().add(SECRET_NAME, SECRET_VALUE),
        "secret_policy": spec["policy"],
        "blob_threshold": BLOB_THRESHOLD,
        "migrations": chain(spec["chain_version"]),
    }
    blobs = spec["blobs"]
    if blobs == "inline":
        options["blobs"] = False
    elif blobs == "files":
        options["blobs"] = spec["blob_folder"]
    elif blobs == "database":
        options["blobs"] = "database"
    else:
        from blob_server import CREDENTIALS, REGION  # noqa: PLC0415
        from safepoint.blobs.s3 import S3BlobStore  # noqa: PLC0415

        options["blobs"] = S3BlobStore(
            "safepoint-model",
            prefix=spec["s3_prefix"],
            endpoint_url=spec["s3_endpoint"],
            region=REGION,
            **CREDENTIALS,
        )
    if spec["backend"] == "postgres":
        options["schema"] = spec["schema"]
        options["min_size"] = 0
        options["max_size"] = 2
    else:
        options["group_commit"] = spec["group_commit"]
    if spec.get("tenant", IMPLICIT) != IMPLICIT:  # the implicit tenant: opened as before tenants
        options["tenant"] = spec["tenant"]
    if spec["keyring"] is not None:
        options["encryption"] = Keyring.from_text(spec["keyring"])
    return options
