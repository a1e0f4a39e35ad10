"""Q1-Q3 end to end: the prototype journal vs SIGKILL + resume in a fresh process.
usage: exp3_journal_crash.py <mode invoke|ainvoke|stream|astream> <cache none|global|false|instance> <durability> <crash> <journal on|off> <phase> <db>"""
import sys, os, asyncio, sqlite3
sys.path.insert(0, "/tmp/lgjournal")
mode, cache, durability, crash, jon, phase, db = sys.argv[1:8]
os.environ["MODE"] = mode; os.environ["CRASH_AT"] = crash
import journal_proto as jp
from langchain_core.caches import InMemoryCache
from langchain_core.globals import set_llm_cache
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.prebuilt import ToolNode
import graphapp
jp.install()  # done once by `import safepoint.langgraph` in the real thing
graphapp.model.cache = {"none": None, "global": None, "false": False, "instance": InMemoryCache()}[cache]
if cache == "global": set_llm_cache(InMemoryCache())

# ---- the user-facing diff: only these two lines differ between journal on/off
saver = jp.JournalSaverA.open(db) if jon == "on" else jp.AsyncOkSqliteSaver(sqlite3.connect(db, check_same_thread=False))
tools = ToolNode(graphapp.TOOLS, wrap_tool_call=jp.wrap_tool_call, awrap_tool_call=jp.awrap_tool_call) if jon == "on" else ToolNode(graphapp.TOOLS)

use_async = mode in ("ainvoke", "astream")
app = graphapp.build(saver, tools, use_async=use_async)
cfg = {"configurable": {"thread_id": "t1"}}
inp = {"messages": [("user", "go")]} if phase == "first" else None
if use_async:
    out = asyncio.run(app.ainvoke(inp, cfg, durability=durability))
else:
    out = app.invoke(inp, cfg, durability=durability)
print("FINAL:", out["messages"][-1].content, "| tool msgs:", [m.content for m in out["messages"] if m.type == "tool"], "| STATS", jp.STATS)
