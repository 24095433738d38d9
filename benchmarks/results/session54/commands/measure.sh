#!/bin/sh
# Time and peak RSS of `scrapy crawls` and `scrapy report` on a store of 200,000 pages, the code
# before (OLD, a checkout) and this checkout's, alternately. From the repository root:
#   python benchmarks/results/session54/commands/build_store.py /tmp/big.sqlite3 200000
#   sh benchmarks/results/session54/commands/measure.sh /tmp/old-checkout /tmp/big.sqlite3
old=$1; db=$2; new=$(pwd)
for round in 1 2 3; do
  for tree in "$old" "$new"; do
    for command in "crawls" "report big" "report big --json"; do
      cd "$tree" && printf '%s\t%s\t%s\t' "$round" "$tree" "$command"
      # shellcheck disable=SC2086
      PYTHONPATH="$tree" /usr/bin/time -f "%e s, %M KB peak RSS" \
        "$new/.venv/bin/python" -m scrapy $command -s FOCUSED_DB="$db" 2>&1 >/dev/null | tail -1
    done
  done
done
