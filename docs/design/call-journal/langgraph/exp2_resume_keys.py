"""Q2/Q3: what a call sees (step/node/path/ns/ids) on first execution vs re-execution after SIGKILL + resume.
usage: exp2_resume_keys.py <durability> <crash_point> <phase: first|resume> <db>"""
import sys, os, json
sys.path.insert(0, "/tmp/lgjournal")
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.prebuilt import ToolNode
import graphapp

durability, crash, phase, db = sys.argv[1:5]
os.environ["CRASH_AT"] = crash

def wrap(request, execute):
    cfg = request.runtime.config
    graphapp.log("wrap_tool_call", tool=request.tool_call["name"], tool_call_id=request.tool_call["id"],
                 runtime_tool_call_id=request.runtime.tool_call_id,
                 exec_info=request.runtime.execution_info, **graphapp._where(cfg))
    return execute(request)

with SqliteSaver.from_conn_string(db) as saver:
    app = graphapp.build(saver, ToolNode(graphapp.TOOLS, wrap_tool_call=wrap))
    cfg = {"configurable": {"thread_id": "t1"}}
    out = app.invoke({"messages": [("user", "go")]} if phase == "first" else None, cfg, durability=durability)
    print("FINAL:", out["messages"][-1].content)
    for s in list(app.get_state_history(cfg))[::-1]:
        print("  ckpt step", s.metadata.get("step"), s.metadata.get("source"), "next", s.next)
