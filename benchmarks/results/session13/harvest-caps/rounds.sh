#!/bin/bash
# As run in session 13. /tmp/s13/capN: copies of the working tree (git ls-files) with
# RELEVANCE_MAX_CHARS = N in focused/settings.py (0 = the whole text, as main); the text_head
# of these copies cut at the last space only (the committed one also at a line break).
# harvest of the semantic strategy at each RELEVANCE_MAX_CHARS, alternating, two rounds
for round in 1 2; do
  for cap in 0 10000 5000 20000; do
    cd /tmp/s13/cap$cap
    echo "== round $round cap $cap $(date +%T) load $(cut -d' ' -f1 /proc/loadavg)"
    PYTHONPATH=. /work/main/.venv/bin/python -m benchmarks.harvest --corpus /work/shared/corpora/wikispeedia.tar.xz --topics /work/shared/benchmarks/topics.json --strategies semantic --jobs 1 --out /tmp/s13/harvest/cap$cap-r$round > /tmp/s13/harvest/cap$cap-r$round.log 2>&1
    grep -h "semantic" /tmp/s13/harvest/cap$cap-r$round/harvest.md | head -2
  done
done
echo done $(date +%T)
