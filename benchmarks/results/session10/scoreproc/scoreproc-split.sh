#!/bin/bash
# usage: split.sh CHECKOUT TAG [K=V...]: one 1,000-page crawl with the CPU sampler
D=$1; TAG=$2; shift 2
R=/work/wt/scoreproc/benchmarks/results/session10/scoreproc/split
mkdir -p $R
cd $D
PYTHONPATH=. /work/main/.venv/bin/python /work/wt/scoreproc/benchmarks/results/session10/scoreproc/one_crawl.py /work/shared/corpora/wikispeedia.tar.xz ${PAGES:-1000} "$@" > $R/$TAG.txt &
CR=$!
/work/main/.venv/bin/python /work/wt/scoreproc/benchmarks/results/session10/scoreproc/cpu_split.py $CR > $R/$TAG-split.txt
wait $CR
cat $R/$TAG-split.txt $R/$TAG.txt
