#!/bin/bash
# As run in session 13. /tmp/s13/base: git archive of main at 96db2a1; /tmp/s13/new: the
# working tree with RELEVANCE_MAX_CHARS = 10000: the change as committed, save its docs and tests
# and the near-duplicate check's branch for a spider without a relevance model (unused here).
# issue 7's throughput command from each checkout, alternating: base (main) and new (RELEVANCE_MAX_CHARS)
mkdir -p /tmp/s13/tp
for round in 1 2 3; do
  for co in base new; do
    cd /tmp/s13/$co
    echo "== round $round $co $(date +%T) load $(cut -d' ' -f1 /proc/loadavg)"
    PYTHONPATH=. /work/main/.venv/bin/python -m benchmarks.throughput --corpus /work/shared/corpora/wikispeedia.tar.xz --pages 1000 --repeats 1 --delay 0 0.1 --out /tmp/s13/tp/$co-$round > /tmp/s13/tp/$co-$round.log 2>&1
    grep -h "^| " /tmp/s13/tp/$co-$round/throughput.md | tail -4
  done
done
echo done $(date +%T)
