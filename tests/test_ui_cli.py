"""``safepoint ui`` as a user starts it: a real subprocess serving a real store, stopped with Ctrl-C;
off loopback it prints a token URL and refuses requests without the token."""

from __future__ import annotations

import http.client
import signal
import socket
import subprocess
import time
from pathlib import Path

import safepoint
from safepoint import Checkpoint
from safepoint_exe import SAFEPOINT


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def get(port: int, path: str, host: str | None = None) -> tuple[int, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    conn.request("GET", path, headers={"Host": host or f"127.0.0.1:{port}"})
    answer = conn.getresponse()
    body = answer.read().decode()
    conn.close()
    return answer.status, body


def started(args: list[str], cwd: Path, port: int) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [SAFEPOINT, "ui", *args], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc
        except OSError:
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.05)
    proc.kill()
    raise AssertionError("safepoint ui did not start")


def stopped(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=20)
    return proc.returncode, out, err


def test_safepoint_ui_serves_a_store_read_only_and_stops_cleanly(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/state.db"
    with safepoint.open_store(url) as store:
        store.save(Checkpoint(run_id="seen-run"))
    port = free_port()
    proc = started(["--store", url, "--port", str(port)], tmp_path, port)
    try:
        status, body = get(port, "/")
        assert status == 200
        assert "seen-run" in body
        assert "read-only" in body
        assert get(port, "/", host=f"evil.example:{port}")[0] == 421
    finally:
        code, out, err = stopped(proc)
    assert code == 0, err
    assert f"http://127.0.0.1:{port}/" in out
    assert "Traceback" not in err


def test_off_loopback_a_token_is_printed_and_required(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/state.db"
    with safepoint.open_store(url) as store:
        store.save(Checkpoint(run_id="r"))
    port = free_port()
    proc = started(["--store", url, "--port", str(port), "--host", "0.0.0.0"], tmp_path, port)
    try:
        status, _ = get(port, "/", host=f"localhost:{port}")
        assert status == 401
    finally:
        code, out, err = stopped(proc)
    assert code == 0, err
    token = out.split("?token=", 1)[1].split()[0]
    assert len(token) >= 16


def test_no_store_there_is_said_and_nothing_is_made(tmp_path: Path) -> None:
    done = subprocess.run(
        [SAFEPOINT, "ui", "--store", f"sqlite:///{tmp_path}/none.db", "--port", str(free_port())],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 3, done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "none.db").exists()
