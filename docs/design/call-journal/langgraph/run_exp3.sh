#!/bin/bash
# run_exp3.sh mode cache durability crash journal
cd /tmp/lgjournal; M=$1; C=$2; D=$3; K=$4; J=$5; T=$M-$C-$D-$K-$J
export LEDGER=/tmp/lgjournal/l3/ledger-$T.jsonl; DB=/tmp/lgjournal/l3/db-$T.sqlite; mkdir -p l3
rm -f $LEDGER $LEDGER.crashed $DB*
/work/main/.venv/bin/python exp3_journal_crash.py $M $C $D $K $J first $DB >/dev/null 2>&1; r1=$?
out=$(/work/main/.venv/bin/python exp3_journal_crash.py $M $C $D $K $J resume $DB 2>&1 | tail -1)
/work/main/.venv/bin/python - "$T" "$r1" "$out" <<PY
import json,sys
T,r1,out=sys.argv[1:4]
rows=[json.loads(l) for l in open("$LEDGER")]
pids=sorted({r["pid"] for r in rows}); first=pids[0]
prov=[r for r in rows if r["kind"]=="provider"]; pay=[r for r in rows if r["kind"]=="EFFECT pay"]
print(f"{T:38s} first_exit={r1} provider_calls={len(prov)} (after crash: {sum(r['pid']!=first for r in prov)}) pay_effects={len(pay)} || {out[:150]}")
PY
