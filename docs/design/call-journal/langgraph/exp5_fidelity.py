"""Replay fidelity after a real crash (reads exp3 dbs where the resume replayed step-1 model call + tools)."""
import sys, json, sqlite3
sys.path.insert(0, "/tmp/lgjournal")
import journal_proto as jp, graphapp
from langchain_core.messages import messages_from_dict
for t in ["invoke-none-async-in_model2-on", "stream-none-async-in_model2-on"]:
    db = f"/tmp/lgjournal/l3/db-{t}.sqlite"
    s = jp.JournalSaver.open(db)
    app = graphapp.build(s)
    msgs = app.get_state({"configurable": {"thread_id": "t1"}}).values["messages"]
    rec = {r["key"]: r for r in map(json.loads, open(db + ".journal.jsonl"))}
    r1 = [v for k, v in rec.items() if k.startswith('["t1", "agent", 1') and "result" in v][0]
    m_rec = messages_from_dict([r1["result"]])[0]
    ai = [m for m in msgs if m.type == "ai"][0]
    print(t)
    print("  recorded  :", type(m_rec).__name__, m_rec.id, [tc["id"] for tc in m_rec.tool_calls], m_rec.usage_metadata)
    print("  in state  :", type(ai).__name__, ai.id, [tc["id"] for tc in ai.tool_calls], ai.usage_metadata)
    print("  tool msgs :", [(m.tool_call_id, m.content) for m in msgs if m.type == "tool"])
    print("  history   :", [(h.metadata["step"], h.metadata["source"]) for h in app.get_state_history({"configurable": {"thread_id": "t1"}})][::-1])
