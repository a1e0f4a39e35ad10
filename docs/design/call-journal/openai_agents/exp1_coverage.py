"""Which interception sees which model call / tool call, for run, run_sync, run_streamed."""
import asyncio, os, sys, collections
sys.path.insert(0, "/tmp/oajournal")
os.environ["OAJ_LEDGER"] = "/tmp/oajournal/ledger-exp1.txt"
import common, intercept
from intercept import SEEN, ACTIVE
from agents import Runner, RunConfig
from agents.run import set_default_agent_runner

EXPECTED_MODEL = 7  # triage 3, helper 2 (agent-as-tool), specialist 2 (handoff, model by name)


async def drive(mode, agent, **kw):
    if mode == "run":
        return await Runner.run(agent, "hi", **kw)
    if mode == "run_sync":  # run_sync refuses a running loop: run it in a thread
        return await asyncio.to_thread(Runner.run_sync, agent, "hi", **kw)
    r = Runner.run_streamed(agent, "hi", **kw)
    async for _ in r.stream_events():
        pass
    return r


def summarize(tag, result):
    models = collections.Counter(s[0] for s in SEEN if s[1] in ("model", "model-stream", "hook-llm"))
    tools = [(s[0], s[2], s[3]) for s in SEEN if s[1] in ("tool", "hook-tool", "patched-tool")]
    print(f"{tag:38s} final={result.final_output!r:15} models_seen={sum(models.values())}/{EXPECTED_MODEL} {dict(models)}")
    print(f"{'':38s} tools_seen={len(tools)}/5 {tools}")


async def main():
    for mode in ("run", "run_sync", "run_streamed"):
        print(f"===== {mode}")
        # A: model_provider wrapper only
        SEEN.clear(); triage, prov = common.build_graph()
        r = await drive(mode, triage, run_config=RunConfig(model_provider=intercept.WrapProvider(prov)))
        summarize("A model_provider wrapper", r)
        # B: RunHooks
        SEEN.clear(); triage, prov = common.build_graph()
        r = await drive(mode, triage, run_config=RunConfig(model_provider=prov), hooks=intercept.SeeHooks())
        summarize("B RunHooks on_llm_start/on_tool_start", r)
        # C: clone graph + provider wrapper, plain Runner
        SEEN.clear(); triage, prov = common.build_graph()
        a, rc = intercept.clone_run_args(triage, RunConfig(model_provider=prov))
        r = await drive(mode, a, run_config=rc)
        summarize("C clone graph + provider (DBOS-style)", r)
        # E: journal-aware default AgentRunner (clone per run, incl. nested as_tool runs)
        SEEN.clear(); triage, prov = common.build_graph()
        set_default_agent_runner(intercept.JournalRunner())
        tok = ACTIVE.set({})
        try:
            r = await drive(mode, triage, run_config=RunConfig(model_provider=prov))
        finally:
            ACTIVE.reset(tok); set_default_agent_runner(None)
        summarize("E default AgentRunner subclass", r)
        # D: internal patch of get_model + _invoke_function_tool_with_metadata
        SEEN.clear(); triage, prov = common.build_graph()
        intercept.install_patches()
        tok = ACTIVE.set({})
        try:
            r = await drive(mode, triage, run_config=RunConfig(model_provider=prov))
        finally:
            ACTIVE.reset(tok)
        summarize("D patch run_loop.get_model + tool invoke", r)
        import agents.run_internal.run_loop as rl, agents.run_internal.tool_execution as te
        rl.get_model = intercept._orig_get_model; te._invoke_function_tool_with_metadata = intercept._orig_invoke

asyncio.run(main())
