#!/bin/bash
# run_exp2.sh <durability> <crash_point>
cd /tmp/lgjournal; D=$1; C=$2; export LEDGER=/tmp/lgjournal/ledger-$D-$C.jsonl; DB=/tmp/lgjournal/db-$D-$C.sqlite
rm -f $LEDGER $LEDGER.crashed $DB*
echo "### durability=$D crash=$C"
/work/main/.venv/bin/python exp2_resume_keys.py $D $C first $DB; echo "first run exit=$?"
/work/main/.venv/bin/python exp2_resume_keys.py $D $C resume $DB; echo "resume exit=$?"
/work/main/.venv/bin/python - <<PY
import json
for l in open("$LEDGER"):
    r=json.loads(l); k=r.pop("kind")
    keep={x:r.get(x) for x in ("pid","langgraph_step","langgraph_node","langgraph_path","langgraph_checkpoint_ns","checkpoint_ns","thread_id","tool","tool_call_id","checkpoint_id","task_id","point") if r.get(x) is not None}
    if "checkpoint_id" in keep: keep["checkpoint_id"]=keep["checkpoint_id"][-12:]
    if "task_id" in keep: keep["task_id"]=keep["task_id"][:8]
    print(f"  {k:15s}", keep)
PY
