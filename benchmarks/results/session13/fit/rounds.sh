#!/bin/bash
# As run in session 13: /tmp/s13/base is a git archive of 96db2a1, /tmp/s13/fit the working tree
# of the change (RELEVANCE_FIT_TOKENS = 1000). Birds alone for the strategies that read the crawl's
# own scores, every strategy once, the default strategy twice, then issue 7's throughput command
# twice from each, alternating.
OUT=/tmp/s13/fit-out; mkdir -p $OUT
H="/work/main/.venv/bin/python -m benchmarks.harvest --corpus /work/shared/corpora/wikispeedia.tar.xz --topics /work/shared/benchmarks/topics.json"
harvest() {  # checkout, out, arguments...
  cd /tmp/s13/$1; out=$2; shift 2
  echo "== harvest $out $(date +%T) load $(cut -d' ' -f1 /proc/loadavg)"
  PYTHONPATH=. $H "$@" --out $OUT/$out > $OUT/$out.log 2>&1
  grep -h '^| `' $OUT/$out/harvest.md
}
harvest fit birds-fit --strategies anchor,pso,hillclimbing,rank_semantic,bestfirst,shark --topics-limit 1 --jobs 1
harvest fit all-fit --strategies all --jobs 2
for round in 1 2; do
  harvest fit semantic-fit-$round --strategies semantic --jobs 1
  harvest base semantic-base-$round --strategies semantic --jobs 1
done
for round in 1 2; do
  for co in base fit; do
    cd /tmp/s13/$co
    echo "== throughput $co $round $(date +%T) load $(cut -d' ' -f1 /proc/loadavg)"
    PYTHONPATH=. /work/main/.venv/bin/python -m benchmarks.throughput --corpus /work/shared/corpora/wikispeedia.tar.xz --pages 1000 --repeats 1 --delay 0 0.1 --out $OUT/tp-$co-$round > $OUT/tp-$co-$round.log 2>&1
    grep -h "^| " $OUT/tp-$co-$round/throughput.md | grep -v "^| spider\|^|---"
  done
done
echo done $(date +%T)
