"""Blobs as objects in an S3-compatible bucket (AWS S3, MinIO, Ceph, R2, …).

Keys are ``prefix + digest``; a tenant's (``for_tenant``) are
``prefix + "tenants/<tenant>/" + digest``. boto3 is imported only when a
store is created, so ``import safepoint`` never needs the ``s3`` extra.

A put first asks whether the key exists (a HEAD, cheap next to uploading
megabytes again), then uploads with ``If-None-Match: *`` so that, of several
writers racing on one digest, only the first creates the object and the
others get "precondition failed", which means the blob is there. A server
that does not implement conditional writes answers "not implemented"; the
store then falls back to plain puts for its lifetime, which is still safe
because every writer of a key uploads the same content.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Iterator
from datetime import UTC
from typing import Any

from safepoint.blobs.base import TENANTS, BlobInfo, BundledStore, check_digest, check_tenant_name
from safepoint.errors import BlobError, BlobNotFound, InvalidArgument, MissingExtra

# Matched against the error code only: a GET of a missing bucket is also HTTP 404, but
# "NoSuchBucket" is a misconfiguration to report, not a missing blob. (A HEAD has no
# body, so its code is the bare status and the two cannot be told apart there.)
_MISSING_KEY = frozenset({"NoSuchKey", "NotFound", "404"})
_ALREADY_WRITTEN = frozenset({"PreconditionFailed", "412"})
_CONDITIONAL_UNSUPPORTED = frozenset({"NotImplemented", "501"})
# S3 answers 409 while another conditional write of the same key is in flight; retry shortly.
_CONFLICT = frozenset({"ConditionalRequestConflict", "409"})
_CONFLICT_RETRIES = 5


class S3BlobStore(BundledStore):
    """A ``BlobStore`` over an S3-compatible bucket, which must already exist.

    Pass a ready boto3 S3 ``client`` (it is not closed by ``close()``), or let
    the store make one from ``endpoint_url``, ``region`` and any other boto3
    client options (``aws_access_key_id``, ``config``, …); credentials
    otherwise come from boto3's usual chain. ``compress=True`` stores zstd
    frames when they are smaller; either setting reads what the other wrote.
    """

    def __init__(
        self,
        bucket: str,
        *,
        prefix: str = "",
        client: Any = None,
        endpoint_url: str | None = None,
        region: str | None = None,
        compress: bool = False,
        **client_options: Any,
    ) -> None:
        if not isinstance(bucket, str) or not bucket:
            raise InvalidArgument("S3 blob store bucket must be a non-empty str")
        if not isinstance(prefix, str):
            raise InvalidArgument("S3 blob store prefix must be a str")
        try:
            import botocore.exceptions  # type: ignore[import-untyped]  # noqa: PLC0415  # lazy: optional extra
        except ImportError as exc:
            raise MissingExtra("the S3 blob store", "s3", "botocore") from exc
        self._errors: tuple[type[Exception], ...] = (
            botocore.exceptions.ClientError,
            botocore.exceptions.BotoCoreError,
        )
        self._owns_client = client is None
        if client is None:
            client = _make_client(endpoint_url, region, client_options)
        elif endpoint_url is not None or region is not None or client_options:
            raise InvalidArgument("pass either an S3 client or the options to make one, not both")
        self.client: Any = client
        self.bucket = bucket
        self.prefix = prefix
        self.compress = compress
        self._conditional_puts = True
        self._name = f"S3 blob store s3://{bucket}/{prefix}"

    def __repr__(self) -> str:
        return f"S3BlobStore({self.bucket!r}, prefix={self.prefix!r}, compress={self.compress})"

    def for_tenant(self, tenant: str) -> S3BlobStore:
        """The same bucket under ``prefix + "tenants/<tenant>/"``: a tenant's blobs in a bucket
        shared by many (``open_store(..., blobs=…, tenant=…)``), named apart from every other
        tenant's. It shares this store's client and never closes it. A scan of this prefix
        never lists them (a key with a slash after the prefix is no digest)."""
        name = check_tenant_name(tenant)
        view = copy.copy(self)
        view.prefix = f"{self.prefix}{TENANTS}/{name}/"
        view._owns_client = False
        view._closed = False
        view._name = f"S3 blob store s3://{self.bucket}/{view.prefix}"
        return view

    def key_for(self, digest: str) -> str:
        """The object key of ``digest``."""
        return self.prefix + check_digest(digest)

    def _read(self, digest: str) -> bytes:
        key = self.key_for(digest)
        self._check_open()
        try:
            response = self.client.get_object(Bucket=self.bucket, Key=key)
            stored: bytes = response["Body"].read()
        except self._errors as exc:
            if _error_code(exc) in _MISSING_KEY:
                raise BlobNotFound(digest) from None
            raise BlobError(f"{self._name}: cannot read blob {digest}: {_describe(exc)}") from exc
        return stored

    def _write(self, digest: str, make: Callable[[], bytes], *, replace: bool) -> None:
        key = self.key_for(digest)
        try:
            if replace or not self._head(key):
                self._upload(key, make(), replace=replace)
        except self._errors as exc:
            raise BlobError(f"{self._name}: cannot write blob {digest}: {_describe(exc)}") from exc

    def exists(self, digest: str) -> bool:
        """True when ``digest`` is stored; see ``BlobStore.exists``."""
        key = self.key_for(digest)
        self._check_open()
        try:
            return self._head(key)
        except self._errors as exc:
            raise BlobError(f"{self._name}: cannot check blob {digest}: {_describe(exc)}") from exc

    def delete(self, digest: str) -> bool:
        """Remove ``digest``; see ``BlobStore.delete``.

        S3's delete succeeds whether or not the key exists, so a HEAD first
        tells whether there was anything to delete.
        """
        key = self.key_for(digest)
        self._check_open()
        try:
            if not self._head(key):
                return False
            self.client.delete_object(Bucket=self.bucket, Key=key)
        except self._errors as exc:
            raise BlobError(f"{self._name}: cannot delete blob {digest}: {_describe(exc)}") from exc
        return True

    def scan(self) -> Iterator[BlobInfo]:
        """Yield every blob in digest order (S3 lists keys sorted); see ``BlobStore.scan``.

        Keys under the prefix that are not a bare digest are skipped.
        """
        self._check_open()
        paginator = self.client.get_paginator("list_objects_v2")
        try:
            for page in paginator.paginate(Bucket=self.bucket, Prefix=self.prefix):
                for item in page.get("Contents", ()):
                    digest = item["Key"][len(self.prefix) :]
                    if _is_digest(digest):
                        yield BlobInfo(digest, int(item["Size"]), item["LastModified"].astimezone(UTC))
        except self._errors as exc:
            raise BlobError(f"{self._name}: cannot scan: {_describe(exc)}") from exc

    def close(self) -> None:
        """Close the client if this store made it; idempotent."""
        if not self._closed and self._owns_client:
            self.client.close()
        super().close()

    def _head(self, key: str) -> bool:
        try:
            self.client.head_object(Bucket=self.bucket, Key=key)
        except self._errors as exc:
            if _error_code(exc) in _MISSING_KEY:
                return False
            raise
        return True

    def _upload(self, key: str, stored: bytes, *, replace: bool = False) -> None:
        # A replace (rekey, encrypt: the same content sealed anew) must overwrite: a conditional
        # put would meet the object already there and leave it as it was.
        conditional = self._conditional_puts and not replace
        for attempt in range(_CONFLICT_RETRIES):
            try:
                self._put_object(key, stored, conditional=conditional)
                return
            except self._errors as exc:
                codes = _codes(exc)
                if codes & _ALREADY_WRITTEN:
                    return  # another writer created it first: the same bytes are there
                if codes & _CONDITIONAL_UNSUPPORTED and conditional:
                    self._conditional_puts = conditional = False
                    continue
                if not codes & _CONFLICT or attempt == _CONFLICT_RETRIES - 1:
                    raise
            time.sleep(0.05 * (attempt + 1))

    def _put_object(self, key: str, stored: bytes, *, conditional: bool) -> None:
        extra = {"IfNoneMatch": "*"} if conditional else {}
        self.client.put_object(
            Bucket=self.bucket, Key=key, Body=stored, ContentType="application/octet-stream", **extra
        )


def _make_client(endpoint_url: str | None, region: str | None, options: dict[str, Any]) -> Any:
    try:
        import boto3  # type: ignore[import-untyped]  # noqa: PLC0415  # lazy: optional extra
    except ImportError as exc:
        raise MissingExtra("the S3 blob store", "s3", "boto3") from exc
    # A session per store: boto3's default session is shared global state.
    return boto3.session.Session().client("s3", endpoint_url=endpoint_url, region_name=region, **options)


def _is_digest(name: str) -> bool:
    try:
        check_digest(name)
    except InvalidArgument:
        return False
    return True


def _error_code(exc: Exception) -> str:
    response = getattr(exc, "response", None)
    return str(response.get("Error", {}).get("Code", "")) if isinstance(response, dict) else ""


def _codes(exc: Exception) -> frozenset[str]:
    """The error code and HTTP status of a botocore error, as strings (empty for others)."""
    response = getattr(exc, "response", None)
    if not isinstance(response, dict):
        return frozenset()
    code = response.get("Error", {}).get("Code")
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return frozenset(str(value) for value in (code, status) if value)


def _describe(exc: Exception) -> str:
    # botocore's messages name the operation, code, bucket or endpoint, never object bodies.
    return str(exc) or type(exc).__name__
