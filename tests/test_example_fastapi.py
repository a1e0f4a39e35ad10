"""examples/fastapi_app.py as a user runs it: a real uvicorn server, a real HTTP client, a SQLite file.

Two turns of one conversation; the same turn submitted twice at once (one 200, one 409, one
step saved); the server stopped (its lifespan closes the store) and started again on the same
file, where the conversation goes on from the step it had.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

import safepoint

ROOT = Path(__file__).resolve().parent.parent


@contextmanager
def server(url: str) -> Iterator[str]:
    """``uvicorn fastapi_app:app --app-dir examples`` on a socket bound to a free port; its base URL.

    Leaving the block stops it with SIGTERM (as a deploy does) and checks it shut down cleanly."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    base = f"http://127.0.0.1:{sock.getsockname()[1]}"
    env = {**os.environ, "SAFEPOINT_STORE": url, "CHAT_MODEL_SECONDS": "0.5"}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "fastapi_app:app",
            "--app-dir",
            "examples",
            "--fd",
            str(sock.fileno()),
        ],
        cwd=ROOT,
        env=env,
        pass_fds=[sock.fileno()],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    sock.close()  # the child has its own copy
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, proc.communicate()[1]
            try:
                if httpx.get(f"{base}/openapi.json", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "the app did not start"
            time.sleep(0.1)
        yield base
    finally:
        proc.terminate()
        try:
            _, stderr = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
    assert proc.returncode in (0, -signal.SIGTERM), stderr  # uvicorn re-raises the signal once done
    assert "Application shutdown complete" in stderr, stderr  # the lifespan closed the store


def say(base: str, conversation: str, text: str) -> httpx.Response:
    return httpx.post(f"{base}/conversations/{conversation}/turns", json={"text": text}, timeout=30)


async def say_twice_at_once(base: str, conversation: str, texts: tuple[str, str]) -> list[httpx.Response]:
    async with httpx.AsyncClient(base_url=base, timeout=30) as client:
        return list(
            await asyncio.gather(
                *(client.post(f"/conversations/{conversation}/turns", json={"text": t}) for t in texts)
            )
        )


def conversation_of(base: str, conversation: str) -> dict[str, Any]:
    response = httpx.get(f"{base}/conversations/{conversation}", timeout=30)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def test_the_fastapi_example_over_http_survives_a_double_submit_and_a_restart(tmp_path: Path) -> None:
    """One run per conversation, Conflict as HTTP 409, and a restarted app resumes the conversation."""
    url = f"sqlite:///{tmp_path / 'chat.db'}"
    chat = "conv-1"
    with server(url) as base:
        assert httpx.get(f"{base}/conversations/{chat}", timeout=30).status_code == 404
        first = say(base, chat, "hello")
        assert first.status_code == 200, first.text
        assert first.json() == {"conversation_id": chat, "step": 1, "reply": "turn 1: you said 'hello'"}
        second = say(base, chat, "and again")
        assert second.status_code == 200, second.text
        assert second.json()["step"] == 2

        # A double-click: the same conversation's next turn twice, at once. One is step 3; the
        # other finds step 3 taken and is told so, with nothing of it written.
        both = asyncio.run(say_twice_at_once(base, chat, ("click", "clack")))
        assert sorted(r.status_code for r in both) == [200, 409], [r.text for r in both]
        won, lost = both if both[0].status_code == 200 else both[::-1]
        assert won.json()["step"] == 3
        assert lost.json()["error"] == "conflict"
        assert lost.json()["conversation_id"] == chat
        won_text, lost_text = (
            ("click", "clack") if won.json()["reply"].endswith("'click'") else ("clack", "click")
        )
        seen = conversation_of(base, chat)
        assert seen["step"] == 3
        assert [m["content"] for m in seen["messages"] if m["role"] == "user"] == [
            "hello",
            "and again",
            won_text,
        ]
        before_restart = seen["messages"]

    with server(url) as base:  # a new process on the same file: the conversation is where it was
        again = conversation_of(base, chat)
        assert again["messages"] == before_restart
        assert again["step"] == 3
        retried = say(base, chat, lost_text)  # the 409's advice: send it again
        assert retried.status_code == 200, retried.text
        assert retried.json() == {
            "conversation_id": chat,
            "step": 4,
            "reply": f"turn 4: you said {lost_text!r}",
        }

    with safepoint.open_store(url) as store:
        assert [info.step for info in store.history(chat)] == [0, 1, 2, 3, 4]
        final = store.load(chat)
        assert final.labels == {"app": "chat"}
        assert final.counters["steps"] == 4
        assert len(final.messages) == 8


def test_the_docs_page_quotes_the_example_word_for_word() -> None:
    """Every ```python block of docs/fastapi.md is a piece of examples/fastapi_app.py, so the page
    shows the code the test above runs."""
    page = (ROOT / "docs" / "fastapi.md").read_text(encoding="utf-8")
    example = (ROOT / "examples" / "fastapi_app.py").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", page, re.DOTALL)
    assert len(blocks) >= 4
    for block in blocks:
        assert block.strip() in example, block
