import asyncio, os, sys
sys.path.insert(0, "/tmp/oajournal")
os.environ["OAJ_LEDGER"] = "/tmp/oajournal/ledger-exp0.txt"
import common
from common import build_graph, read_ledger
from agents import Runner, RunConfig
if os.path.exists(common.LEDGER): os.remove(common.LEDGER)
triage, provider = build_graph()
r = Runner.run_sync(triage, "hi", run_config=RunConfig(model_provider=provider))
print("final:", r.final_output, "| last agent:", r.last_agent.name)
print("ledger:", read_ledger())
print("usage requests:", r.context_wrapper.usage.requests)
