#!/bin/bash
CO=$1; OUT=$2; shift 2
cd $CO && PYTHONPATH=$CO "$@" /work/main/.venv/bin/python -m scrapy runspider benchmarks/plain_spider.py -a seeds=http://127.0.0.1:8765/wiki/Albatross -s LOG_LEVEL=INFO -s FOCUSED_LOGSTATS_INTERVAL=0 -s CLOSESPIDER_PAGECOUNT=1000 2> /tmp/crawlcpu/$OUT.log
