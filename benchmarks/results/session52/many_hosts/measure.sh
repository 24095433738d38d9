#!/usr/bin/env bash
# Robots.txt parsers kept by a crawl that meets 3,000 hosts (web.py), in the checkout given
# (default: this repository), PAGES pages (default 6000), -s ROBOTS_PARSERS_MAX=500 (a setting
# a checkout before it ignores).
#   benchmarks/results/session52/many_hosts/measure.sh [CHECKOUT] [PAGES]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
checkout=${1:-$(cd "$here/../../../.." && pwd)}
pages=${2:-6000}
python "$here/web.py" 3000 > /dev/null &
web=$!
trap 'kill $web' EXIT
sleep 3
scratch=$(mktemp -d)
cd "$checkout"
PYTHONPATH="$checkout:$here" SCRAPY_SETTINGS_MODULE=probesettings python -m scrapy crawl topical \
  -a query="birds feathers nesting" -a seeds=http://127.0.1.100:23200/p/1 \
  -s CLOSESPIDER_PAGECOUNT="$pages" -s HOST_WINDOW=100 -s MAX_PAGES_PER_HOST=6 \
  -s ROBOTS_PARSERS_MAX=500 -s FOCUSED_DB="$scratch/store.sqlite3" -s LOG_LEVEL=WARNING \
  2>&1 | grep -E "PROBE|Traceback|error:" || true
rm -rf "$scratch"
