"""A local S3-compatible HTTP server for the blob store tests: moto's, in a process of its own.

``start_s3_server()`` starts ``python -m moto.server`` on a free loopback
port, waits until it answers HTTP, and returns an ``S3Server`` whose
``stop()`` ends it. The server keeps everything in memory and needs no
network beyond 127.0.0.1. Run this file directly to keep one up by hand::

    .venv/bin/python tests/blob_server.py
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import IO

HOST = "127.0.0.1"
REGION = "us-east-1"
# moto accepts any credentials; giving some keeps boto3 from searching the machine for real ones.
CREDENTIALS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}


@dataclass
class S3Server:
    """A running moto S3 server process and where it listens."""

    endpoint_url: str
    process: subprocess.Popen[bytes]
    log: IO[bytes]

    def stop(self) -> None:
        """End the server process (politely, then by force) and remove its log."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self.log.close()
        Path(self.log.name).unlink(missing_ok=True)

    def log_tail(self, lines: int = 20) -> str:
        """The last lines the server wrote, for failure messages."""
        return "\n".join(Path(self.log.name).read_text(errors="replace").splitlines()[-lines:])


def free_port(host: str = HOST) -> int:
    """A TCP port nothing listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


def start_s3_server(*, host: str = HOST, timeout: float = 60.0) -> S3Server:
    """Start moto's S3 server on a free port and return once it answers HTTP requests."""
    port = free_port(host)
    log = tempfile.NamedTemporaryFile(prefix="safepoint-moto-", suffix=".log", delete=False)  # noqa: SIM115  # closed by stop()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", host, "-p", str(port)],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
    )
    server = S3Server(f"http://{host}:{port}", process, log)
    try:
        _wait_until_answering(server, timeout)
    except BaseException:
        server.stop()
        raise
    return server


def _wait_until_answering(server: S3Server, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if server.process.poll() is not None:
            raise RuntimeError(f"moto server exited with {server.process.returncode}:\n{server.log_tail()}")
        try:
            with urllib.request.urlopen(f"{server.endpoint_url}/moto-api/", timeout=2):
                return
        except urllib.error.HTTPError:
            return  # any HTTP answer means it is serving
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"moto server did not answer within {timeout:g} s") from None
            time.sleep(0.1)


if __name__ == "__main__":
    running = start_s3_server()
    print(f"S3 server at {running.endpoint_url} (region {REGION}); Ctrl-C stops it", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        running.process.wait()
    running.stop()
