"""A text's projection as the relevance model computes it (a scipy CSR row times the topic and
the LSI basis), against a numpy gather of the basis rows and a sum, on random data of the
model's shape (50 LSI topics). Session 55: is scipy's sparse set-up a lever for scoring?

    .venv/bin/python benchmarks/results/session55/sparse/sparse_vs_gather.py
"""

import time

import numpy as np
from scipy import sparse

rng = np.random.default_rng(0)
TERMS, TOPICS = 20000, 50
basis = rng.standard_normal((TERMS, TOPICS))
topic = rng.standard_normal(TERMS)


def csr_way(values, ids, indptr, n):
    rows = sparse.csr_matrix((values, ids, indptr), shape=(n, TERMS))
    return rows @ topic, np.asarray(rows @ basis)


def gather_way(values, ids, indptr, n):
    row_of = np.repeat(np.arange(n), np.diff(indptr))
    dots = np.bincount(row_of, weights=values * topic[ids], minlength=n)
    contributions = values[:, None] * basis[ids]
    lsi = np.zeros((n, TOPICS))
    np.add.at(lsi, row_of, contributions)
    return dots, lsi


for texts, terms_each in [(1, 1000), (100, 3), (100, 20)]:
    indptr = np.concatenate([[0], np.cumsum(np.full(texts, terms_each))])
    ids = rng.integers(0, TERMS, indptr[-1])
    values = rng.random(indptr[-1])
    for way in (csr_way, gather_way):
        started = time.perf_counter()
        for _ in range(2000):
            way(values, ids, indptr, texts)
        took = (time.perf_counter() - started) / 2000 * 1e6
        print(f"{texts} texts of {terms_each} terms, {way.__name__}: {took:.1f} us")
