"""What a new user's first minute does, run by the Python of a fresh venv holding safepoint's wheel.

    <venv>/bin/python tests/install/smoke.py [--core-only] [--s3]

``import safepoint`` loads no optional package; a SQLite store saves and loads
through the library and through the installed ``safepoint`` command; psycopg is
absent, and a ``postgresql://`` URL is a ``MissingExtra`` naming the extra (one
line from the CLI, no traceback). ``--core-only``: the venv holds exactly
safepoint's core dependencies (and what they need), nothing else, and the S3
blob store names the s3 extra. ``--s3``: the
S3 blob store makes its client, and the installed botocore takes the
``IfNoneMatch`` put that conditional writes need. Standard library only: this
runs outside the project's .venv. Exits non-zero, saying what failed.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import importlib.util
import re
import subprocess
import sys
import tempfile
from pathlib import Path

OPTIONAL = {"psycopg", "psycopg_pool", "boto3", "botocore", "langgraph", "langchain_core", "agents"}
OPTIONAL |= {"opentelemetry", "cryptography"}
PG_URL = "postgresql://someone:hunter2@127.0.0.1:9/nowhere"
EXTRA_HINT = "pip install 'safepoint[postgres]'"
SAFEPOINT = Path(sys.executable).with_name("safepoint")  # the console script of this venv


def check(ok: object, what: str) -> None:
    if not ok:
        raise SystemExit(f"smoke: FAILED: {what}")


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def core_closure() -> set[str]:
    """safepoint and every distribution its core requirements bring, from the installed metadata."""
    names: set[str] = set()
    todo = ["safepoint"]
    while todo:
        name = canonical(todo.pop())
        if name in names:
            continue
        names.add(name)
        for line in importlib.metadata.requires(name) or []:
            requirement, _, marker = line.partition(";")
            if "extra ==" in marker:
                continue  # an extra's requirement; none is asked for here
            todo.append(re.split(r"[\s\[<>=!~;(]", requirement.strip(), maxsplit=1)[0])
    return names


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(SAFEPOINT), *args], capture_output=True, text=True, timeout=120, check=False)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--core-only", action="store_true")
    parser.add_argument("--s3", action="store_true")
    args = parser.parse_args()

    import safepoint  # noqa: PLC0415  # the import under test

    loaded = sorted({m.split(".")[0] for m in sys.modules} & OPTIONAL)
    check(not loaded, f"import safepoint loaded optional packages {loaded}")
    check(importlib.util.find_spec("psycopg") is None, "psycopg is installed without the postgres extra")

    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/state.db"
        with safepoint.open_store(url) as store:
            cp = safepoint.Checkpoint(run_id="smoke-1", labels={"from": "install-checks"})
            cp.messages.append({"role": "user", "content": "hello"})
            store.save(cp)
            cp.step += 1
            cp.messages.append({"role": "assistant", "content": "hi " * 2000})
            cp.counters["tokens_out"] = 3
            store.save(cp)
            loaded_cp = store.load("smoke-1")
            check(loaded_cp.step == 1, "the latest checkpoint loads")
            check(loaded_cp.messages == cp.messages, "messages load as saved")
            check(store.load("smoke-1", step=0).messages == cp.messages[:1], "step 0 loads as saved")
        shown = cli("runs", "--store", url)
        check(shown.returncode == 0 and "smoke-1" in shown.stdout, f"safepoint runs: {shown.stderr.strip()}")
        verified = cli("verify", "smoke-1", "--store", url)
        check(verified.returncode == 0, f"safepoint verify: {verified.stderr.strip()}")

    for opener in ("open_store", "open_async_store"):
        try:
            opened = getattr(safepoint, opener)(PG_URL)
            if asyncio.iscoroutine(opened):
                asyncio.run(opened)
        except safepoint.MissingExtra as exc:
            check(EXTRA_HINT in str(exc), f"{opener}: the error names the extra: {exc}")
        else:
            check(False, f"{opener}(postgresql://…) without psycopg raised nothing")
    refused = cli("runs", "--store", PG_URL)
    check(refused.returncode == 2, f"safepoint runs on postgresql:// exits 2, not {refused.returncode}")
    check("Traceback" not in refused.stderr, f"a traceback from the CLI: {refused.stderr}")
    check(refused.stderr.count("\n") == 1 and EXTRA_HINT in refused.stderr, f"one line: {refused.stderr!r}")
    check("hunter2" not in refused.stderr, "the CLI quoted the URL's password")

    if args.core_only:
        installed = {canonical(d.metadata["Name"]) for d in importlib.metadata.distributions()}
        extra = installed - core_closure() - {"pip", "setuptools", "wheel"}
        check(not extra, f"a core-only venv holds more than the core dependencies: {sorted(extra)}")
        from safepoint.blobs.s3 import S3BlobStore  # noqa: PLC0415  # importable without boto3

        try:
            S3BlobStore("bucket", endpoint_url="http://127.0.0.1:9")
        except safepoint.MissingExtra as exc:
            check("pip install 'safepoint[s3]'" in str(exc), f"the S3 error names the extra: {exc}")
        else:
            check(False, "an S3 blob store without boto3 raised nothing")
        # Encryption needs cryptography; the keyring itself does not.
        keyring = safepoint.Keyring({"k1": bytes(32)}, index_key=bytes(range(32)))
        try:
            with tempfile.TemporaryDirectory() as tmp:
                sealed = Path(tmp) / "sealed.db"
                try:
                    safepoint.open_store(f"sqlite:///{sealed}", encryption=keyring)
                finally:
                    check(not sealed.exists(), "a refused encrypted store still created its file")
        except safepoint.MissingExtra as exc:
            check("pip install 'safepoint[encryption]'" in str(exc), f"the error names the extra: {exc}")
        else:
            check(False, "an encrypted store without cryptography raised nothing")

    if args.s3:
        from safepoint.blobs.s3 import S3BlobStore  # noqa: PLC0415  # needs the s3 extra

        blobs = S3BlobStore(
            "bucket",
            endpoint_url="http://127.0.0.1:9",
            region="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )
        members = blobs.client.meta.service_model.operation_model("PutObject").input_shape.members
        check("IfNoneMatch" in members, "this botocore's put_object has no IfNoneMatch")
        blobs.close()

    versions = {n: importlib.metadata.version(n) for n in ("orjson", "click", "rich", "boto3") if _has(n)}
    print("smoke: ok", " ".join(f"{n}=={v}" for n, v in versions.items()))


def _has(name: str) -> bool:
    try:
        importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


if __name__ == "__main__":
    main()
