#!/bin/bash
cd /tmp/lgjournal
for M in invoke ainvoke stream astream; do (
  for D in sync async; do for K in after_pay in_model2; do
    for C in none global false instance; do ./run_exp3.sh $M $C $D $K on 2>/dev/null; done
    ./run_exp3.sh $M none $D $K off 2>/dev/null
  done; done > matrix-$M.out ) &
done; wait
cat matrix-*.out > exp3-matrix.out
