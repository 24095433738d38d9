#!/bin/bash
# usage: rounds.sh FIRST LAST [extra throughput args...]; alternates base and mine; samples the
# topical crawl's CPU split and the machine's idle share (cpu_split.py) during each run
R=/work/wt/scoreproc/benchmarks/results/session10/scoreproc/tp
first=$1; last=$2; shift 2
tag=${TAG:-}
for i in $(seq $first $last); do for who in base mine; do
  if [ $who = base ]; then D=/tmp/scoreproc-base; else D=/work/wt/scoreproc; fi
  cd $D
  PYTHONPATH=. /work/main/.venv/bin/python -m benchmarks.throughput --corpus /work/shared/corpora/wikispeedia.tar.xz --pages 1000 --repeats 1 "$@" --out /tmp/scoreproc-tp-$who$tag-$i > $R/$who$tag-$i.log 2>&1 &
  TP=$!
  /work/main/.venv/bin/python /work/wt/scoreproc/benchmarks/results/session10/scoreproc/cpu_split.py $TP > $R/$who$tag-$i-split.txt
  wait $TP
  cp /tmp/scoreproc-tp-$who$tag-$i/throughput.md $R/$who$tag-$i.md
  echo "$who$tag-$i $(uptime | sed 's/.*load/load/')" >> $R/$who$tag-$i.log
done; done
