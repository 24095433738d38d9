#!/bin/sh
# Usage: rounds.sh BASE_CHECKOUT NEW_CHECKOUT OUT_DIR ROUNDS DELAY...
# Topical crawls (default strategy, $PAGES pages, default 1,000, from Albatross on the replay
# web at 127.0.0.1:$REPLAY_PORT, default 8011) with SlowStore after each checkout's own
# pipelines, base and new alternating; $PER_HOST requests at once to the one host (default 8,
# Scrapy's). $PYTHON (default: python, e.g. the project's .venv activated) runs the crawls.
here=$(cd "$(dirname "$0")" && pwd)
base=$1 new=$2 out=$3 rounds=$4; shift 4
port=${REPLAY_PORT:-8011} pages=${PAGES:-1000} per_host=${PER_HOST:-8} python=${PYTHON:-python}
mkdir -p "$out"
for round in $(seq "$rounds"); do
  for delay in "$@"; do
    for side in base new; do
      eval dir=\$$side
      log="$out/$side-store$delay-round$round.log"
      pipelines=$(cd "$dir" && PYTHONPATH="$dir" "$python" -c 'import json
from focused.settings import ITEM_PIPELINES
print(json.dumps({**ITEM_PIPELINES, "slow_store.SlowStore": 900}))')
      rm -rf "/tmp/slowstore-$side" && mkdir -p "/tmp/slowstore-$side"
      (cd "$dir" && PYTHONPATH="$dir:$here" "$python" -m scrapy crawl topical \
        -a "query=birds species feathers nest eggs wings flight plumage" \
        -a seeds="http://127.0.0.1:$port/wiki/Albatross" -s CLOSESPIDER_PAGECOUNT="$pages" \
        -s CONCURRENT_REQUESTS_PER_DOMAIN="$per_host" \
        -s "FOCUSED_DB=/tmp/slowstore-$side/db.sqlite3" -s "ENCODER_STORE_DIR=/tmp/slowstore-$side/enc" \
        -s "ITEM_PIPELINES=$pipelines" -s "SLOW_STORE_DELAY=$delay" -s LOG_LEVEL=INFO) > "$log" 2>&1
      PYTHONPATH="$new" "$python" - "$log" "$side" "$delay" "$round" <<'PY'
import sys
from benchmarks.runner import parse_stats
log, side, delay, rnd = sys.argv[1:]
stats = parse_stats(open(log).read())
pages, elapsed = stats["response_received_count"], stats["elapsed_time_seconds"]
print(f"{side} store {delay} s, round {rnd}: {pages:.0f} pages in {elapsed:.1f} s = "
      f"{pages / elapsed:.1f} pages/s, harvest {stats['focused/harvest_rate']}")
PY
    done
  done
done
