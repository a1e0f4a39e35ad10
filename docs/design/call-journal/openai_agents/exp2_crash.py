"""SIGKILL right after charge(7)'s effect, then resume the same turn in a fresh process.
usage: exp2_crash.py DIR MODE(run|streamed) PHASE(crash|resume|clean)"""
import asyncio, os, signal, sys
sys.path.insert(0, "/tmp/oajournal")
d, mode, phase = sys.argv[1:4]
os.environ["OAJ_LEDGER"] = f"{d}/ledger.txt"
import common, journal
import safepoint
from safepoint.adapters.openai_agents import SafepointSession
from agents import RunConfig

if phase == "crash":
    def die(amount):
        if amount == 7:
            os.kill(os.getpid(), signal.SIGKILL)
    common.CHARGE_HOOK["after_effect"] = die

async def main():
    store = safepoint.open_store(f"sqlite:///{d}/state.db")
    session = SafepointSession("user-1", store)
    print("session items before:", [(i.get("role") or i.get("type")) for i in await session.get_items()])
    j = journal.FileJournal(f"{d}/journal.json")
    triage, prov = common.build_graph()
    r, st = await journal.journaled_run(j, triage, "hi", session=session, streamed=(mode == "streamed"),
                                        reconcile=lambda key, name, args: f"reconciled:{name}{args}",
                                        run_config=RunConfig(model_provider=prov))
    print("final:", r.final_output, "| usage.requests:", r.context_wrapper.usage.requests)
    for k in st["keys"]:
        print("  ", k)
    print("stats:", journal.STATS)
    print("session items after:", len(await session.get_items()))
    store.close()

asyncio.run(main())
