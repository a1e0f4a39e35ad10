"""Q1: which extension point sees / can replace each chat-model call path, per cache setting."""
import asyncio, sys
sys.path.insert(0, "/tmp/lgjournal")
from common import ScriptedModel, PROVIDER_CALLS
from langchain_core.caches import BaseCache, InMemoryCache
from langchain_core.globals import set_llm_cache
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import HumanMessage, AIMessage
from langchain_core.outputs import ChatGeneration

REPLAY = AIMessage(content="RECORDED", usage_metadata={"input_tokens": 99, "output_tokens": 99, "total_tokens": 198})

class ReplayCache(BaseCache):
    """A 'journal as cache': always claims to have a recorded response."""
    def __init__(self): self.lookups = 0; self.updates = 0
    def lookup(self, prompt, llm_string): self.lookups += 1; return [ChatGeneration(message=REPLAY)]
    def update(self, prompt, llm_string, return_val): self.updates += 1
    def clear(self, **kw): pass

class EndSpy(BaseCallbackHandler):
    def __init__(self): self.starts = 0; self.ends = []
    def on_chat_model_start(self, serialized, messages, **kw): self.starts += 1
    def on_llm_end(self, response, **kw):
        m = response.generations[0][0].message
        self.ends.append((type(m).__name__, m.content, len(m.tool_calls), m.usage_metadata and m.usage_metadata.get("total_tokens")))

async def paths(model, cfg):
    msgs = [HumanMessage("hi")]
    out = {}
    out["invoke"] = model.invoke(msgs, cfg).content
    out["ainvoke"] = (await model.ainvoke(msgs, cfg)).content
    out["stream"] = "".join(str(c.content) for c in model.stream(msgs, cfg))
    out["astream"] = "".join([str(c.content) async for c in model.astream(msgs, cfg)])
    return out

async def main():
    print("== A. LangChain cache as the replay point (cache lookup always returns RECORDED) ==")
    for label, mk in [
        ("cache=None + global set_llm_cache", lambda c: (set_llm_cache(c), ScriptedModel(cache=None))[1]),
        ("cache=True + global set_llm_cache", lambda c: (set_llm_cache(c), ScriptedModel(cache=True))[1]),
        ("cache=<BaseCache instance>",        lambda c: (set_llm_cache(None), ScriptedModel(cache=c))[1]),
        ("cache=False + global set_llm_cache", lambda c: (set_llm_cache(c), ScriptedModel(cache=False))[1]),
    ]:
        c = ReplayCache(); m = mk(c); PROVIDER_CALLS.clear()
        out = await paths(m, None)
        served = {k: ("REPLAYED" if v.startswith("RECORDED") else "CALLED") for k, v in out.items()}
        print(f"{label:38s} {served} provider_hits={PROVIDER_CALLS}")
    set_llm_cache(None)

    print("\n== A2. usage_metadata on a cache hit ==")
    m = ScriptedModel(cache=ReplayCache())
    print("cache-hit usage_metadata:", m.invoke("hi").usage_metadata, " id:", m.invoke("hi").id)

    print("\n== B. callbacks: on_llm_end sees the complete response on every path (record side) ==")
    spy = EndSpy(); PROVIDER_CALLS.clear()
    await paths(ScriptedModel(cache=False), {"callbacks": [spy]})
    print("starts:", spy.starts, "ends:", spy.ends)
    print("provider_hits:", PROVIDER_CALLS)

    print("\n== B2. can on_chat_model_start short-circuit? (raise_error handler) ==")
    class Stop(BaseCallbackHandler):
        raise_error = True
        def on_chat_model_start(self, *a, **k): raise RuntimeError("want to replay instead")
        def on_llm_start(self, *a, **k): raise RuntimeError("want to replay instead")
    PROVIDER_CALLS.clear()
    for meth in ("invoke", "stream"):
        try:
            r = getattr(ScriptedModel(), meth)("hi", {"callbacks": [Stop()]})
            if meth == "stream": r = list(r)
            print(meth, "-> returned", r)
        except Exception as e:
            print(f"{meth} -> raised {type(e).__name__}: {e}  (no way to return a value) provider_hits={PROVIDER_CALLS}")

asyncio.run(main())
