#!/bin/bash
# usage: run_topical.sh CHECKOUT OUTPREFIX [prefix cmd...]
CO=$1; OUT=$2; shift 2
D=$(mktemp -d /tmp/crawlcpu/enc.XXXX)
cd $CO && PYTHONPATH=$CO "$@" /work/main/.venv/bin/python -m scrapy crawl topical -a strategy=semantic -a "query=birds species feathers nest eggs wings flight plumage" -a seeds=http://127.0.0.1:8765/wiki/Albatross -s LOG_LEVEL=INFO -s FOCUSED_LOGSTATS_INTERVAL=0 -s ENCODER_STORE_DIR=$D -s CLOSESPIDER_PAGECOUNT=1000 -s FOCUSED_DB=$D/db.sqlite3 2> /tmp/crawlcpu/$OUT.log
rm -rf $D
