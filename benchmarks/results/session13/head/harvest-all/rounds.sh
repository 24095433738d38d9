#!/bin/bash
# every strategy's harvest from each checkout: /tmp/s13/final (git archive of f23dac1) and
# /tmp/s13/base (git archive of 96db2a1); then the default strategy once more from each
OUT=/tmp/s13/harvest-all
mkdir -p $OUT
run() {  # checkout, strategies, jobs, out
  cd /tmp/s13/$1
  echo "== $1 $2 $(date +%T) load $(cut -d' ' -f1 /proc/loadavg)"
  PYTHONPATH=. /work/main/.venv/bin/python -m benchmarks.harvest --corpus /work/shared/corpora/wikispeedia.tar.xz --topics /work/shared/benchmarks/topics.json --strategies $2 --jobs $3 --out $OUT/$4 > $OUT/$4.log 2>&1
  grep -h "^| \`" $OUT/$4/harvest.md | head -20
}
run final all 2 final-all
run base all 2 base-all
run final semantic 1 final-semantic
run base semantic 1 base-semantic
echo done $(date +%T)
