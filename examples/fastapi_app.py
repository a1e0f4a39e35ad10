"""safepoint inside a FastAPI app: one run per conversation, each turn one checkpoint.

    python examples/fastapi_app.py [--port 8000]
    # or: uvicorn fastapi_app:app --app-dir examples

The store is SAFEPOINT_STORE (default sqlite:///.safepoint/chat.db; a PostgreSQL URL works
the same), opened once in the app's lifespan and closed on shutdown. A conversation is a
safepoint run named by its id: each POST opens the run, adds the user's message and the
reply, and commits them as the next step. The run is held while its turn is in progress:
a second turn of the same conversation sent meanwhile gets ``RunHeld`` (a ``Conflict``) at
once, which the app answers with HTTP 409 (reload and send again). Restart the app and
every conversation is where it was.

The reply comes from ``reply_to``, an offline stand-in for a model call.
"""

from __future__ import annotations

import argparse
import asyncio
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel

import safepoint
from safepoint import AsyncRun, AsyncStore, Conflict, NotFound

STORE_URL = os.environ.get("SAFEPOINT_STORE", "sqlite:///.safepoint/chat.db")
MODEL_SECONDS = float(os.environ.get("CHAT_MODEL_SECONDS", "0.05"))  # the stand-in model's latency


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    """Open the store when the app starts; close it (its connections, its thread) on shutdown."""
    async with await safepoint.open_async_store(STORE_URL) as store:
        app.state.store = store
        yield


app = FastAPI(title="chat on safepoint", lifespan=lifespan)


def store_of(request: Request) -> AsyncStore:
    store: AsyncStore = request.app.state.store
    return store


@app.exception_handler(Conflict)
async def conflict(request: Request, exc: Conflict) -> JSONResponse:
    """Another request holds this conversation, or saved its next step first: nothing of ours was written."""
    return JSONResponse(
        status_code=409,
        content={"error": "conflict", "conversation_id": exc.run_id, "detail": str(exc)},
    )


@app.exception_handler(NotFound)
async def not_found(request: Request, exc: NotFound) -> JSONResponse:
    return JSONResponse(status_code=404, content={"error": "not found", "conversation_id": exc.run_id})


class Turn(BaseModel):
    text: str


async def reply_to(messages: list[dict[str, Any]]) -> tuple[str, int, int]:
    """The stand-in model: the reply, tokens in and tokens out. Swap in your model call."""
    await asyncio.sleep(MODEL_SECONDS)
    last = str(messages[-1]["content"])
    turn = sum(1 for m in messages if m["role"] == "user")
    reply = f"turn {turn}: you said {last!r}"
    return reply, sum(len(str(m["content"])) for m in messages), len(reply)


@app.post("/conversations/{conversation_id}/turns")
async def post_turn(conversation_id: str, turn: Turn, request: Request) -> dict[str, Any]:
    """Add the user's message and the reply to the conversation, as one new checkpoint."""
    # Held until the block ends; another turn of this conversation in progress: RunHeld, HTTP 409.
    opened = AsyncRun.open(store_of(request), conversation_id, labels={"app": "chat"}, wait=0)
    async with await opened as run:
        run.append({"role": "user", "content": turn.text})
        reply, tokens_in, tokens_out = await reply_to(run.messages)
        run.append({"role": "assistant", "content": reply})
        await run.add_usage(tokens_in=tokens_in, tokens_out=tokens_out)
        info = await run.commit()
    return {"conversation_id": conversation_id, "step": info.step, "reply": reply}


@app.get("/conversations/{conversation_id}")
async def get_conversation(conversation_id: str, request: Request) -> dict[str, Any]:
    """The conversation as its latest checkpoint holds it (404 when there is none)."""
    cp = await store_of(request).load(conversation_id)
    return {
        "conversation_id": conversation_id,
        "step": cp.step,
        "messages": list(cp.messages),
        "tokens": int(cp.counters.get("tokens_in", 0)) + int(cp.counters.get("tokens_out", 0)),
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args()
    uvicorn.run(app, host=args.host, port=args.port)
