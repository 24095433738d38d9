"""The crawl's relevance model: cosine similarity to the topic in tf-idf and LSI space (gensim).

The crawler must know a page's relevance before its outlinks are queued, so the model has to
score from the very first page, long before there is a corpus to learn from. It therefore starts
as a plain term-frequency cosine against the topic (the dictionary holds only the topic's terms,
every IDF is 1) and is refit in batches on the pages crawled so far: the dictionary, the IDF
weights and the LSI space are rebuilt from the last ``max_docs`` pages plus the topic texts,
once ``refit_every`` pages were observed since the last fit and at least half as many as it
will learn from. A refit costs CPU in proportion to its pages (about 3.5 ms a whole Wikipedia
page here, 7 s for 2,000, much of it holding the GIL, though never for long at a time; the token
cap below halves it): refitting every 100 pages on a full buffer would cost 70 ms a page, several
times the page's own scoring, while spacing refits with the buffer keeps it near 8 ms.

A page is scored on all of its text, but the refits learn it from its first ``fit_tokens``
tokens (``RELEVANCE_FIT_TOKENS``, 1,000): a refit's CPU grows with the tokens it reads, and a
long article's start already places it in the space. (Scoring pages on their start as well
saved more, but cut the model's recall of bird articles by about a third: BENCHMARKS.md,
session 13.)

The topic is the query text (plus an optional topic file's text) and, once they are fetched, the
seed pages' texts. Its vector is the unit mean of two halves, the declared topic and the centroid
of the seeds, so that however many seeds there are the user's own words keep half the weight.

Threading: ``refit`` runs in a worker thread (``deferToThread``) while ``score`` keeps running on
the reactor thread. Everything ``score`` needs lives in one immutable :class:`_Snapshot` that a
refit builds completely and then swaps in with a single attribute assignment; ``score`` reads the
attribute once. While the refit thread holds the GIL in one C call the reactor thread cannot
run at all (the interpreter switches threads only between bytecodes), so the fit reads millions
of Python objects into numpy a document or a slice at a time, never in one call. Between refits
the dictionary is frozen (terms are looked up, never added): a gensim model fed term ids beyond
its ``num_terms`` silently builds invalid matrices, so words first seen after the last fit get no
dimension until the next one (they still lengthen their text).

Languages: every text is tokenized in its own language (``focused.text.tokenize``): the query in
the query's, a page and its anchors in the page's. A term's weight in a text is
``focused.text.term_weights``: its count plus half the count of the words that fold to it
without diacritics, so "vtaky" typed in a query matches "vtáky" on a Slovak page, more weakly
than "vtáky" would. The folded forms are ordinary terms of the one dictionary (they are counted
in its document frequencies at a fit), not a second model: a page without diacritics needs no
second score, and ASCII text (English) costs and scores exactly as before.
"""

from __future__ import annotations

import json
import logging
import math
import shutil
import threading
from collections import Counter, OrderedDict, deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import chain, compress, filterfalse
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy import sparse
from threadpoolctl import threadpool_limits

from focused.errors import load_json
from focused.gensim_api import Dictionary, LsiModel, Projection, TfidfModel, matutils
from focused.termindex import TermIndex
from focused.text import add_folded, term_weights, tokenize, with_folded
from focused.textcache import cached_scores

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

DEFAULT_THRESHOLD = 0.15
DEFAULT_NUM_TOPICS = 50
DEFAULT_REFIT_EVERY = 100
DEFAULT_MAX_DOCS = 2000
DEFAULT_LSI_WEIGHT = 0.5
DEFAULT_FIT_TOKENS = 1000

# LSI needs a few documents to find any structure; below this the snapshot has no LSI space.
_MIN_LSI_DOCS = 3
# Terms seen in a single training document are dropped at a fit (unless they are topic terms):
# they cannot relate documents to each other, and they are most of a web vocabulary.
_MIN_TERM_DOCS = 2
# Bounds the LSI projection matrix (terms x topics float64: 50k x 50 is 20 MB).
_MAX_TERMS = 50_000
# Distinct short texts remembered by score_texts; navigation anchors repeat on every page.
_CACHE_SIZE = 20_000
# Fixed so that a refit on the same documents gives the same space (and tests are stable).
_LSI_SEED = 0
# Extra random directions in gensim's stochastic SVD. Its default of 100 is three times the
# topics themselves; with its two power iterations 30 is ample, and it halves the cost of a refit.
_LSI_OVERSAMPLING = 30

# Python objects numpy reads in one call at a refit, at most: a few milliseconds of holding the GIL.
_GIL_SLICE = 1 << 16

_STATE_FILE = "state.json"
# Under JOBDIR: where a crawl saves its model at a pause or its end (spiders.topical), which
# ``scrapy recrawl --model`` reads to rescore changed pages.
JOBDIR_MODEL_DIR = "relevance"

# gensim logs every Dictionary build and LSI fit at INFO: at one refit per hundred pages that
# would drown a crawl's own progress lines.
logging.getLogger("gensim").setLevel(logging.WARNING)


def _flat_idf(docfreq: float, totaldocs: int) -> float:
    """IDF of the bootstrap model: 1 for every term, i.e. a plain term-frequency cosine.

    Before any page is crawled there is no document collection to estimate IDF from.
    """
    return 1.0


def _smooth_idf(docfreq: float, totaldocs: int) -> float:
    """Smoothed IDF, never below 1.

    gensim's default ``log2(N / df)`` gives 0 to a term found in every document, and in a focused
    crawl the topic's own words are exactly the ones found everywhere: they would vanish from the
    topic vector just as the crawl succeeds.
    """
    return 1.0 + math.log2((1.0 + totaldocs) / (1.0 + docfreq))


@dataclass(frozen=True, slots=True)
class Scores:
    """How relevant one text is to the topic; every field is in [0, 1]."""

    tfidf: float  # cosine(topic, text) in tf-idf space, clipped to [0, 1]
    lsi: float  # cosine(topic, text) in LSI space, clipped; equals tfidf before the first LSI fit
    combined: float  # (1 - lsi_weight) * tfidf + lsi_weight * lsi


@dataclass(frozen=True, slots=True)
class _Snapshot:
    """Everything scoring reads, built whole and never mutated (except its own score cache)."""

    dictionary: Dictionary
    term_index: TermIndex  # the dictionary's token2id, for scoring (focused.termindex)
    tfidf: TfidfModel
    lsi: LsiModel | None
    fitted: bool  # False for the bootstrap model built from the topic alone
    idf: np.ndarray  # tfidf.idfs by term id, for weighting a whole batch with one product
    unseen_idf: float  # weight of a word outside the dictionary, for the norm of a text
    topic_tfidf: np.ndarray  # unit topic vector over the dictionary's term ids
    lsi_basis: np.ndarray | None  # terms x topics: the projection LsiModel.__getitem__ applies
    topic_lsi: np.ndarray | None  # unit topic vector in LSI space
    # The first topic texts, those the dictionary's document frequencies count (a text that
    # joined after its fit is not counted there, and its words not taken off them).
    fit_topic_texts: int
    # Combined scores by language and text. Scores depend on the snapshot, so the caches live
    # and die with it.
    caches: dict[str | None, OrderedDict[str, float]] = field(default_factory=dict)


def _idf(dictionary: Dictionary, tfidf: TfidfModel) -> tuple[np.ndarray, float]:
    """IDF by term id as an array, and the IDF a word outside the dictionary gets (df = 0)."""
    idf = np.array([tfidf.idfs.get(term, 0.0) for term in range(len(dictionary))])
    return idf, tfidf.wglobal(0, tfidf.num_docs)


@dataclass(frozen=True, slots=True)
class _Terms:
    """Texts over the frozen dictionary, before normalisation: what their cosines are made of.

    Everything here is additive over concatenated texts except the squares, which need the
    texts' shared terms (see ``_joined``): that is what lets a link's anchor+context be scored
    from its anchor and its context without a third tokenization.
    """

    rows: sparse.csr_matrix  # texts x terms, count x IDF (not normalised)
    known_squares: np.ndarray  # squared length of each row
    unseen_squares: np.ndarray  # sum of squared weights of words outside the dictionary
    weights: list[Counter[str]]  # term_weights of each text


def _terms(index: TermIndex, idf: np.ndarray, texts: Sequence[Sequence[str]]) -> _Terms:
    """Term rows of tokenized texts over the frozen dictionary."""
    weights = [term_weights(tokens) for tokens in texts]
    return _weighted_terms(idf, weights, _term_ids(index, weights))


def _term_ids(index: TermIndex, weights: list[Counter[str]]) -> np.ndarray:
    """The ids of the texts' terms, in the order of their ``term_weights`` (-1: unknown).

    One lookup for the whole batch, as ``doc2bow(allow_update=False)`` would give them but
    without its Python loop, per-token type checks and sorting; the dictionary is only read."""
    return index.ids(list(chain.from_iterable(weights)))


def _weighted_terms(idf: np.ndarray, weights: list[Counter[str]], term_ids: np.ndarray) -> _Terms:
    """Term rows of texts given as their ``term_weights``, over the frozen dictionary, whose
    terms have the ids ``term_ids`` in that order (-1: not in the dictionary).

    The matrix is built from flat arrays in one step rather than a Python loop per term.
    """
    counts: list[float] = []
    lengths = np.zeros(len(weights), dtype=np.int64)
    for i, text_weights in enumerate(weights):
        counts.extend(text_weights.values())
        lengths[i] = len(text_weights)
    values = _float_array(counts)
    row_of = np.repeat(np.arange(len(weights)), lengths)
    known = term_ids >= 0
    unseen = ~known
    unseen_squares = np.bincount(
        row_of[unseen], weights=values[unseen] ** 2, minlength=len(weights)
    )
    term_ids, row_of = term_ids[known], row_of[known]
    values = values[known] * idf[term_ids]
    known_squares = np.bincount(row_of, weights=values * values, minlength=len(weights))
    indptr = np.zeros(len(weights) + 1, dtype=np.int64)
    np.cumsum(np.bincount(row_of, minlength=len(weights)), out=indptr[1:])
    rows = sparse.csr_matrix((values, term_ids, indptr), shape=(len(weights), len(idf)))
    return _Terms(rows, known_squares, unseen_squares, weights)


def _float_array(numbers: list[float]) -> np.ndarray:
    """``np.array(numbers, dtype=np.float64)``, read in slices.

    numpy holds the GIL while it reads Python numbers, and a refit has 2 million of them: in one
    call that is a tenth of a second in which the reactor thread cannot run. Between slices the
    interpreter can hand the GIL over.
    """
    if len(numbers) <= _GIL_SLICE:
        return np.array(numbers, dtype=np.float64)
    return np.concatenate(
        [
            np.array(numbers[start : start + _GIL_SLICE], dtype=np.float64)
            for start in range(0, len(numbers), _GIL_SLICE)
        ]
    )


def _inverse_norms(known_squares: np.ndarray, unseen_squares: np.ndarray, unseen_idf: float):
    """1 / the length of each whole text, its unknown words included (0 for an empty text).

    A word outside the dictionary has no dimension of its own, but it still counts in the norm
    of its text (with ``unseen_idf``): otherwise a long page mentioning one topic word among
    thousands of words the model has not seen yet would look as on-topic as the topic itself.
    """
    norms = np.sqrt(known_squares + unseen_squares * unseen_idf**2)
    return np.divide(1.0, norms, out=np.zeros_like(norms), where=norms > 0.0)


def _unit_tfidf(
    idf: np.ndarray, unseen_idf: float, weights: list[Counter[str]], term_ids: np.ndarray
) -> tuple[sparse.csr_matrix, np.ndarray]:
    """Unit tf-idf rows (texts x terms) of texts given as their ``term_weights``, over the frozen
    dictionary, and each row's length.

    A row's length is the share of its text the dictionary covers: 1 when every word is known,
    0 when none is (see ``_inverse_norms``).
    """
    terms = _weighted_terms(idf, weights, term_ids)
    inverse = _inverse_norms(terms.known_squares, terms.unseen_squares, unseen_idf)
    rows = terms.rows
    rows.data *= np.repeat(inverse, np.diff(rows.indptr))
    return rows, np.sqrt(terms.known_squares) * inverse


def _make_snapshot(
    dictionary: Dictionary,
    tfidf: TfidfModel,
    lsi: LsiModel | None,
    topic: Sequence[Sequence[str]],
    *,
    fitted: bool,
    fit_topic_texts: int | None = None,
) -> _Snapshot:
    """Compute the topic vectors for the given models and wrap everything in a snapshot.

    ``topic[0]`` is the declared topic, the rest are seed pages. The topic is the unit sum of the
    declared part's unit tf-idf vector and the unit centroid of the seeds'. Its LSI vector is the
    projection of that tf-idf vector, exactly as a scored text is projected, but of its terms that
    a crawled page holds: LSI places a term by the pages it shares with other terms, and a term
    that only the topic texts hold has no place in the space but the one rounding gives it. Kept,
    such a term (a rare query word) made the LSI topic, rescaled to length 1, a random direction
    that gave pages without any topic word LSI scores of 0.5 and more. A topic with no such term
    has no LSI vector: its LSI scores are its tf-idf scores, as before the first fit.
    ``fit_topic_texts``: the first texts of ``topic`` that the dictionary was built from (all of
    them by default); those that joined after are not in its document frequencies.
    """
    if fit_topic_texts is None:
        fit_topic_texts = len(topic)
    idf, unseen_idf = _idf(dictionary, tfidf)
    index = TermIndex(dictionary.token2id)
    weights = [term_weights(part) for part in topic]
    parts, _ = _unit_tfidf(idf, unseen_idf, weights, _term_ids(index, weights))
    topic_tfidf = parts[0].toarray().ravel()
    if len(topic) > 1:
        topic_tfidf += matutils.unitvec(np.asarray(parts[1:].sum(axis=0)).ravel())
    topic_tfidf = matutils.unitvec(topic_tfidf)
    if lsi is None:
        return _Snapshot(
            *(dictionary, index, tfidf, None, fitted, idf, unseen_idf, topic_tfidf, None, None),
            fit_topic_texts,
        )
    crawled_topic = topic_tfidf * _held_by_crawled_pages(dictionary, weights[:fit_topic_texts])
    if not crawled_topic.any():
        return _Snapshot(
            *(dictionary, index, tfidf, lsi, fitted, idf, unseen_idf, topic_tfidf, None, None),
            fit_topic_texts,
        )
    # C order: scipy would otherwise copy the whole terms x topics matrix on every product.
    basis = np.ascontiguousarray(lsi.projection.u[:, : lsi.num_topics])
    topic_lsi = matutils.unitvec(basis.T @ crawled_topic)
    return _Snapshot(
        *(dictionary, index, tfidf, lsi, fitted, idf, unseen_idf, topic_tfidf, basis, topic_lsi),
        fit_topic_texts,
    )


def _held_by_crawled_pages(dictionary: Dictionary, topic_weights: list[Counter[str]]) -> np.ndarray:
    """Which of the dictionary's terms some crawled page holds: more of the documents it was
    built from hold the term than topic texts do."""
    frequencies = np.zeros(len(dictionary))
    frequencies[list(dictionary.dfs)] = list(dictionary.dfs.values())
    token2id = dictionary.token2id
    for part in topic_weights:
        frequencies[[token2id[term] for term in part if term in token2id]] -= 1
    return frequencies > 0


def _bootstrap(topic: Sequence[Sequence[str]]) -> _Snapshot:
    """The model before any fit: the topic's terms only, IDF 1, no LSI."""
    dictionary, _ = _dictionary([add_folded(Counter(part), 1) for part in topic])
    return _make_snapshot(
        dictionary, TfidfModel(dictionary=dictionary, wglobal=_flat_idf), None, topic, fitted=False
    )


def _dictionary(counts: Sequence[Counter[str]]) -> tuple[Dictionary, np.ndarray]:
    """``Dictionary(documents)`` from each document's ``Counter``, with no Python code per term,
    and the id of each document's each term, in the order of ``counts``.

    gensim counts each token of each document in a Python loop (``doc2bow``): at a refit on
    2,000 pages that is 4 million iterations holding the GIL, half of the refit. Here documents
    come counted (``Counter``, in C), new terms are found with C iterators and the counts summed
    with numpy; the result is the same dictionary, down to the order of its dicts: a document's
    new terms get the next ids in sorted order, as ``doc2bow`` gives them. (gensim would also
    prune the dictionary to 2 million terms every 10,000 documents; a buffer never gets there.)
    """
    dictionary = Dictionary()
    token2id = dictionary.token2id
    # Ids and counts are read one document at a time: read in one call over a refit's 2 million
    # terms, they held the GIL for most of a second, and the reactor thread with it.
    ids_by_document, frequencies_by_document, new_by_document = [], [], []
    for terms in counts:
        new = sorted(filterfalse(token2id.__contains__, terms))
        first_new = len(token2id)
        token2id.update(zip(new, range(first_new, first_new + len(new)), strict=True))
        document_ids = np.fromiter(map(token2id.__getitem__, terms), np.int64, len(terms))
        ids_by_document.append(document_ids)
        # A document lists each term once, so the ids it adds are used first here, in its order.
        new_by_document.append(document_ids[document_ids >= first_new])
        frequencies_by_document.append(np.fromiter(terms.values(), np.int64, len(terms)))
    ids = _int_concatenation(ids_by_document)
    frequencies = _int_concatenation(frequencies_by_document)
    # gensim's dfs and cfs list the ids in order of first use
    first_uses = _int_concatenation(new_by_document)
    in_use_order = first_uses.tolist()
    dfs = np.bincount(ids, minlength=len(token2id))[first_uses]
    cfs = np.bincount(ids, weights=frequencies, minlength=len(token2id))[first_uses]
    dictionary.dfs = dict(zip(in_use_order, dfs.tolist(), strict=True))
    dictionary.cfs = dict(zip(in_use_order, cfs.astype(np.int64).tolist(), strict=True))
    dictionary.num_docs = len(counts)
    dictionary.num_pos = int(frequencies.sum())
    dictionary.num_nnz = len(ids)
    return dictionary, ids


def _int_concatenation(arrays: list[np.ndarray]) -> np.ndarray:
    """The int64 arrays end to end; an empty array when there are none (no documents)."""
    return np.concatenate([np.zeros(0, np.int64), *arrays])


def _filter_extremes(dictionary: Dictionary, keep_tokens: set[str]) -> None:
    """``dictionary.filter_extremes(no_below=_MIN_TERM_DOCS, no_above=1.0, keep_n=_MAX_TERMS,
    keep_tokens=keep_tokens)``, down to the order of its dicts, in numpy.

    gensim decides in Python loops over the ids, and lists every dropped word with its document
    frequency for a log line that the crawl does not show: 12 % of a refit's Python time. Here
    the same choice is made on arrays: the ids that are in ``_MIN_TERM_DOCS`` documents or more
    (no upper bound: a topic word found on every page is the signal, not noise) or are kept,
    most documents first (kept ones first of all), ties in id order, the first ``_MAX_TERMS``;
    they are then renumbered in their old order, as ``compactify`` does.
    """
    token2id, dfs, cfs = dictionary.token2id, dictionary.dfs, dictionary.cfs
    ids = np.fromiter(token2id.values(), np.int64, len(token2id))
    size = int(ids.max()) + 1 if len(ids) else 0
    frequency = np.zeros(size, np.int64)
    frequency[np.fromiter(dfs, np.int64, len(dfs))] = np.fromiter(dfs.values(), np.int64, len(dfs))
    kept = np.zeros(size, bool)
    kept[[token2id[token] for token in keep_tokens if token in token2id]] = True
    eligible = ids[kept[ids] | (frequency[ids] >= _MIN_TERM_DOCS)]
    rank = np.where(kept[eligible], dictionary.num_docs, frequency[eligible])
    good = np.zeros(size, bool)
    good[eligible[np.argsort(-rank, kind="stable")][:_MAX_TERMS]] = True
    new_id = np.cumsum(good) - 1  # of each old id that stays
    staying = good[ids]
    dictionary.token2id = dict(
        zip(compress(token2id, staying.tolist()), new_id[ids[staying]].tolist(), strict=True)
    )
    dictionary.dfs, dictionary.cfs = (
        _renumbered(frequencies, good, new_id) for frequencies in (dfs, cfs)
    )
    dictionary.id2token = {}


def _renumbered(
    frequencies: dict[int, int], good: np.ndarray, new_id: np.ndarray
) -> dict[int, int]:
    """The entries of ``frequencies`` whose id is ``good``, in their order, under their new id."""
    old = np.fromiter(frequencies, np.int64, len(frequencies))
    values = np.fromiter(frequencies.values(), np.int64, len(frequencies))
    staying = good[old]
    return dict(zip(new_id[old[staying]].tolist(), values[staying].tolist(), strict=True))


def _lsi(rows: sparse.csr_matrix, dictionary: Dictionary, num_topics: int) -> LsiModel:
    """``LsiModel`` of unit tf-idf rows (documents x terms), fit on the matrix itself.

    Given a corpus, LsiModel streams it as lists of (id, weight) pairs and packs them back into
    the very same sparse matrix in Python before its stochastic SVD; given a scipy matrix, it
    forgets the random seed. So the SVD is gensim's own (``Projection``, as LsiModel runs it, with
    its default power iterations), run on the transposed rows directly: the same basis, to the
    bit, without the detour.
    """
    lsi = LsiModel(
        id2word=dictionary,
        num_topics=num_topics,
        extra_samples=_LSI_OVERSAMPLING,
        random_seed=_LSI_SEED,
    )
    lsi.projection.merge(
        Projection(
            lsi.num_terms,
            lsi.num_topics,
            rows.T.tocsc(),
            power_iters=lsi.power_iters,
            extra_dims=lsi.extra_samples,
            dtype=lsi.dtype,
            random_seed=lsi.random_seed,
        )
    )
    lsi.docs_processed = rows.shape[0]
    return lsi


def _fit(docs: Sequence[str], topic: Sequence[Sequence[str]], num_topics: int) -> _Snapshot:
    """Build dictionary, IDF and LSI space from observed pages (space-joined tokens) and topic."""
    # Each document's words are counted once, in C, for both the dictionary and the tf-idf rows:
    # they differ only in the weight of folded forms, added over a page's distinct words.
    counts = [Counter(doc.split()) for doc in docs] + [Counter(part) for part in topic]
    dictionary, unfiltered_ids = _dictionary([add_folded(Counter(c), 1) for c in counts])
    unfiltered = dictionary.token2id  # _filter_extremes makes a new one
    _filter_extremes(dictionary, {token for part in topic for token in with_folded(part)})
    tfidf = TfidfModel(dictionary=dictionary, wglobal=_smooth_idf)
    lsi = None
    if len(counts) >= _MIN_LSI_DOCS and len(dictionary) > 0:
        # A page's term weights list its terms in the order of its dictionary counts, so their
        # ids are known without looking a million terms up again: only the kept ones moved.
        weights = [add_folded(text_counts) for text_counts in counts]
        new_id = np.full(len(unfiltered), -1)
        new_id[list(map(unfiltered.__getitem__, dictionary.token2id))] = list(
            dictionary.token2id.values()
        )
        rows, _ = _unit_tfidf(*_idf(dictionary, tfidf), weights, new_id[unfiltered_ids])
        lsi = _lsi(rows, dictionary, max(1, min(num_topics, len(counts) - 1)))
    return _make_snapshot(dictionary, tfidf, lsi, topic, fitted=True)


@dataclass(frozen=True, slots=True)
class _Projection:
    """Texts projected on the topic, unnormalised: sums of these are the projections of the
    concatenated texts."""

    tfidf_dots: np.ndarray  # row . topic_tfidf
    lsi: np.ndarray | None  # rows x LSI topics
    known_squares: np.ndarray
    unseen_squares: np.ndarray


def _project(snap: _Snapshot, terms: _Terms) -> _Projection:
    lsi = None if snap.lsi_basis is None else np.asarray(terms.rows @ snap.lsi_basis)
    return _Projection(
        terms.rows @ snap.topic_tfidf, lsi, terms.known_squares, terms.unseen_squares
    )


def _joined(snap: _Snapshot, first: _Terms, second: _Terms) -> _Projection:
    """The projection of each text of ``first`` followed by the same row's text of ``second``.

    Term weights add up over concatenated texts, and so do the dot products and the LSI
    projections; the squared lengths add up plus twice the terms the two texts share.
    """
    a, b = _project(snap, first), _project(snap, second)
    # A Python loop over the shared terms only: an anchor has two or three, and a sparse
    # element-wise product cost more to set up than all of them.
    token2id, idf = snap.dictionary.token2id, snap.idf
    shared_known = np.zeros(len(first.weights))
    shared_unseen = np.zeros(len(first.weights))
    for i, (mine, other) in enumerate(zip(first.weights, second.weights, strict=True)):
        for term in mine.keys() & other.keys():
            term_id = token2id.get(term)
            if term_id is None:
                shared_unseen[i] += mine[term] * other[term]
            else:
                shared_known[i] += (mine[term] * idf[term_id]) * (other[term] * idf[term_id])
    return _Projection(
        a.tfidf_dots + b.tfidf_dots,
        None if a.lsi is None else a.lsi + b.lsi,
        a.known_squares + b.known_squares + 2.0 * shared_known,
        a.unseen_squares + b.unseen_squares + 2.0 * shared_unseen,
    )


def _cosines_of(snap: _Snapshot, projection: _Projection) -> tuple[np.ndarray, np.ndarray]:
    """Cosines to the topic: (tf-idf, LSI), each clipped to [0, 1].

    The LSI cosine of the known part of a text is scaled by that part's length: as if LSI
    replaced the known words by their latent direction, keeping their weight, while words outside
    the dictionary stay orthogonal to the topic as they are in tf-idf space. Without it, one topic
    word on a page of new vocabulary would reach an LSI score of 1.
    """
    inverse = _inverse_norms(projection.known_squares, projection.unseen_squares, snap.unseen_idf)
    tfidf = np.clip(projection.tfidf_dots * inverse, 0.0, 1.0)
    if projection.lsi is None:
        return tfidf, tfidf
    norms = np.linalg.norm(projection.lsi, axis=1)
    dots = projection.lsi @ snap.topic_lsi
    lsi = np.divide(dots, norms, out=np.zeros_like(dots), where=norms > 0.0)
    return tfidf, np.clip(lsi * np.sqrt(projection.known_squares) * inverse, 0.0, 1.0)


def _cosines(snap: _Snapshot, texts: Sequence[Sequence[str]]) -> tuple[np.ndarray, np.ndarray]:
    """Cosines of tokenized texts to the topic: (tf-idf, LSI), each clipped to [0, 1].

    One sparse matrix for the whole batch, so a page of 300 anchors costs a few matrix products
    rather than 300 trips through gensim's per-document transforms.
    """
    return _cosines_of(snap, _project(snap, _terms(snap.term_index, snap.idf, texts)))


class RelevanceModel:
    """One per crawl: scores pages and link texts against the topic, learns from crawled pages."""

    def __init__(
        self,
        topic: str,
        *,
        threshold: float = DEFAULT_THRESHOLD,
        num_topics: int = DEFAULT_NUM_TOPICS,
        refit_every: int = DEFAULT_REFIT_EVERY,
        max_docs: int = DEFAULT_MAX_DOCS,
        lsi_weight: float = DEFAULT_LSI_WEIGHT,
        fit_tokens: int = DEFAULT_FIT_TOKENS,
        language: str | None = None,
    ) -> None:
        if not 0.0 <= threshold <= 1.0 or not 0.0 <= lsi_weight <= 1.0:
            raise ValueError("threshold and lsi_weight must be in [0, 1]")
        if num_topics < 1 or refit_every < 1 or max_docs < _MIN_LSI_DOCS or fit_tokens < 0:
            raise ValueError(
                f"need num_topics >= 1, refit_every >= 1, max_docs >= {_MIN_LSI_DOCS},"
                " fit_tokens >= 0"
            )
        self.threshold = threshold
        self.num_topics = num_topics
        self.refit_every = refit_every
        self.max_docs = max_docs
        self.lsi_weight = lsi_weight
        self.fit_tokens = fit_tokens  # the refits learn a page from its first tokens; 0: all
        self.language = language  # the query's (focused.languages.query_language)
        # Guards the topic parts, the training buffer and the snapshot swap, which the reactor
        # thread (observe, add_topic_text) and a refit thread both touch.
        self._lock = threading.Lock()
        # Serialises refits; while held, a refit is running and refit_due is False.
        self._refit_lock = threading.Lock()
        self._topic: list[list[str]] = [tokenize(topic, language)]
        # Pages as space-joined tokens: one string per page instead of hundreds of token objects.
        self._buffer: deque[str] = deque(maxlen=max_docs)
        self._since_fit = 0
        self._snapshot = _bootstrap(self._topic)
        # The page score() saw last, with its tokens: the crawler scores a page and then observes
        # it (and adds a seed to the topic), and tokenizing it again would cost a quarter of the
        # page's scoring time.
        self._last_page: tuple[str, str | None, list[str]] = ("", None, [])
        # Read back by load(): it knows the pages learned before a save (a resumed crawl relearns
        # from its store only the pages stored since; a model made anew must relearn them all).
        self.restored = False

    @classmethod
    def from_settings(
        cls, topic: str, settings: BaseSettings, language: str | None = None
    ) -> RelevanceModel:
        """Build the model from a Scrapy ``Settings`` (``RELEVANCE_*``)."""
        return cls(topic, language=language, **_settings_params(settings))

    # -- scoring -------------------------------------------------------------------------------

    def score(self, text: str, language: str | None = None) -> Scores:
        """Score one page's text, written in ``language`` (None: unknown)."""
        tokens = self.page_tokens(text, language)
        tfidf, lsi = _cosines(self._snapshot, [tokens])
        t, s = float(tfidf[0]), float(lsi[0])
        return Scores(t, s, (1.0 - self.lsi_weight) * t + self.lsi_weight * s)

    def score_texts(self, texts: Sequence[str], language: str | None = None) -> list[float]:
        """Combined scores of many short texts (anchors, link contexts), scored as one batch.

        ``language`` is the texts' (their page's).

        Repeated strings are scored once per snapshot: menus and footers repeat the same anchors
        on every page of a site. Call it from one thread (the reactor): the cache is not locked.
        """
        snap = self._snapshot

        def score_batch(batch: list[str]) -> list[float]:
            tfidf, lsi = _cosines(snap, [tokenize(text, language) for text in batch])
            return ((1.0 - self.lsi_weight) * tfidf + self.lsi_weight * lsi).tolist()

        cache = snap.caches.setdefault(language, OrderedDict())
        return cached_scores(cache, texts, score_batch, _CACHE_SIZE)

    def score_links(
        self, anchors: Sequence[str], contexts: Sequence[str], language: str | None = None
    ) -> tuple[list[float], list[float], list[float]]:
        """Combined scores of each link's anchor, its context, and the two as one text.

        ``anchors[i]`` and ``contexts[i]`` belong to one link; ``language`` is their page's.
        Each anchor and context is tokenized once: the anchor+context score is derived from the
        two texts' vectors (``_joined``), equal to scoring ``f"{anchor} {context}"`` up to float
        rounding (except that no Vietnamese syllable pair spans the anchor and its context).
        """
        snap = self._snapshot
        anchor_terms = _terms(
            snap.term_index, snap.idf, [tokenize(text, language) for text in anchors]
        )
        context_terms = _terms(
            snap.term_index, snap.idf, [tokenize(text, language) for text in contexts]
        )
        return (
            self._combined(_cosines_of(snap, _project(snap, anchor_terms))),
            self._combined(_cosines_of(snap, _project(snap, context_terms))),
            self._combined(_cosines_of(snap, _joined(snap, anchor_terms, context_terms))),
        )

    def _combined(self, cosines: tuple[np.ndarray, np.ndarray]) -> list[float]:
        tfidf, lsi = cosines
        return ((1.0 - self.lsi_weight) * tfidf + self.lsi_weight * lsi).tolist()

    def page_tokens(self, text: str, language: str | None = None) -> list[str]:
        """Tokens of a page's ``text``, kept for the next call with the same text: a page is
        tokenized once for its near-duplicate check (``focused.dedup``), its score and its
        place in the training buffer. Do not change the list."""
        last_text, last_language, tokens = self._last_page
        if text == last_text and language == last_language:
            return tokens
        tokens = tokenize(text, language)
        self._last_page = (text, language, tokens)
        return tokens

    def is_relevant(self, scores: Scores) -> bool:
        """Whether a page counts as on-topic (for harvest rate and strategies)."""
        return scores.combined >= self.threshold

    # -- learning ------------------------------------------------------------------------------

    @property
    def topic_texts(self) -> int:
        """How many texts joined the topic beside the query (``add_topic_text``)."""
        return len(self._topic) - 1

    def add_topic_text(self, text: str, language: str | None = None) -> bool:
        """Make a seed page's text part of the topic; False if it has no token to add.

        Takes effect at once: before the first fit the bootstrap dictionary is rebuilt with the
        new words; after it, the topic vectors are recomputed in the current (frozen) spaces, and
        the text's new words join the dictionary and the LSI space at the next refit.
        """
        tokens = self.page_tokens(text, language)
        if not tokens:
            return False
        with self._lock:
            self._topic.append(tokens)
            snap = self._snapshot
            if snap.fitted:
                self._snapshot = _make_snapshot(
                    *(snap.dictionary, snap.tfidf, snap.lsi, self._topic),
                    fitted=True,
                    fit_topic_texts=snap.fit_topic_texts,
                )
            else:
                self._snapshot = _bootstrap(self._topic)
        return True

    def observe(self, text: str, language: str | None = None) -> None:
        """Add a fetched page, its first ``fit_tokens`` tokens, to the training buffer (the last
        ``max_docs`` pages are kept)."""
        tokens = self.page_tokens(text, language)
        doc = " ".join(tokens[: self.fit_tokens] if self.fit_tokens else tokens)
        with self._lock:
            self._buffer.append(doc)
            self._since_fit += 1

    @property
    def refit_due(self) -> bool:
        """``refit_every`` pages, and half the pages a refit would learn from, were observed
        since the last fit began, and none is running."""
        return (
            self._since_fit >= max(self.refit_every, len(self._buffer) // 2)
            and len(self._buffer) >= _MIN_LSI_DOCS
            and not self._refit_lock.locked()
        )

    def refit(self) -> None:
        """Rebuild dictionary, IDF and LSI space from the training buffer and the topic.

        Blocking and thread-safe: it works on copies taken under the lock and publishes the new
        snapshot with one assignment, so scoring can go on in another thread meanwhile. A topic
        text added during the fit is included in the published topic vectors (its new words wait
        for the next fit).
        """
        with self._refit_lock:
            with self._lock:
                docs = list(self._buffer)
                topic = [list(part) for part in self._topic]
                self._since_fit = 0
            # One BLAS thread: a refit runs beside the crawl, and OpenBLAS spreading its QR over
            # every core of a busy machine made a 100-page refit 14 times slower (0.14 s of CPU
            # single-threaded, 2 s multi-threaded), long enough to delay the first LSI space by
            # dozens of pages.
            with threadpool_limits(limits=1, user_api="blas"):
                fitted = _fit(docs, topic, self.num_topics)
            with self._lock:
                if len(self._topic) != len(topic):
                    fitted = _make_snapshot(
                        *(fitted.dictionary, fitted.tfidf, fitted.lsi, self._topic),
                        fitted=True,
                        fit_topic_texts=len(topic),
                    )
                self._snapshot = fitted

    # -- persistence ---------------------------------------------------------------------------

    def save(self, directory: str | Path) -> None:
        """Write the models (gensim ``save``), the topic and the training buffer to a directory.

        The buffer is kept so that a resumed crawl's next refit still learns from earlier pages.
        A refit under way is waited for. The files are written to a new directory that then
        takes the old one's place: a crawl killed as it saved (as it closed) leaves the old
        model whole, or none, never files of two models that would load as one and fail once
        scoring.
        """
        path = Path(directory)
        written = path.with_name(f"{path.name}.new")
        replaced = path.with_name(f"{path.name}.old")
        for leftover in (written, replaced):  # a save killed before
            shutil.rmtree(leftover, ignore_errors=True)
        written.mkdir(parents=True)
        # A refit under way (in its thread, at a pause) has taken its pages off the count: the
        # save waits for the space they went into, else the resumed crawl scored with the old
        # one until its next refit was due again.
        with self._refit_lock, self._lock:
            snap = self._snapshot
            state = {
                "params": {
                    "threshold": self.threshold,
                    "num_topics": self.num_topics,
                    "refit_every": self.refit_every,
                    "max_docs": self.max_docs,
                    "lsi_weight": self.lsi_weight,
                    "fit_tokens": self.fit_tokens,
                    "language": self.language,
                },
                "fitted": snap.fitted,
                "lsi": snap.lsi is not None,
                "topic": [list(part) for part in self._topic],
                "buffer": list(self._buffer),
                "since_fit": self._since_fit,
                "fit_topic_texts": snap.fit_topic_texts,
            }
        try:
            snap.dictionary.save(str(written / "dictionary"))
            snap.tfidf.save(str(written / "tfidf"))
            if snap.lsi is not None:
                snap.lsi.save(str(written / "lsi"))
            (written / _STATE_FILE).write_text(json.dumps(state), encoding="utf-8")
        except OSError:
            shutil.rmtree(written, ignore_errors=True)  # a full disk: the model saved before stays
            raise
        if path.exists():
            path.rename(replaced)
        written.rename(path)
        shutil.rmtree(replaced, ignore_errors=True)

    @classmethod
    def load(cls, directory: str | Path, settings: BaseSettings | None = None) -> RelevanceModel:
        """Restore a model written by :meth:`save`; it scores exactly as the saved one did,
        but with ``settings`` (a resumed crawl's) its ``RELEVANCE_*`` parameters are theirs: a
        resumed crawl may change its settings, and the pipeline that records a page's
        ``is_relevant`` and the strategies read them (the model kept its own threshold, so a
        page was relevant in the crawl's stats and not in the store).

        gensim files are pickles: load only directories this crawler wrote.
        """
        path = Path(directory)
        state = load_json((path / _STATE_FILE).read_text(encoding="utf-8"))
        params = state["params"] | (_settings_params(settings) if settings is not None else {})
        model = cls("", **params)
        model._topic = state["topic"]
        model._buffer.extend(state["buffer"])
        model._since_fit = state["since_fit"]
        model._snapshot = _make_snapshot(
            Dictionary.load(str(path / "dictionary")),
            TfidfModel.load(str(path / "tfidf")),
            LsiModel.load(str(path / "lsi")) if state["lsi"] else None,
            model._topic,
            fitted=state["fitted"],
            # A model saved before the count was: its topic as the one counted, as it was read.
            fit_topic_texts=state.get("fit_topic_texts"),
        )
        model.restored = True
        return model


def _settings_params(settings: BaseSettings) -> dict[str, Any]:
    """The model's parameters that the ``RELEVANCE_*`` settings give."""
    return {
        "threshold": relevance_threshold(settings),
        "num_topics": settings.getint("RELEVANCE_NUM_TOPICS", DEFAULT_NUM_TOPICS),
        "refit_every": settings.getint("RELEVANCE_REFIT_EVERY", DEFAULT_REFIT_EVERY),
        "max_docs": settings.getint("RELEVANCE_MAX_DOCS", DEFAULT_MAX_DOCS),
        "lsi_weight": settings.getfloat("RELEVANCE_LSI_WEIGHT", DEFAULT_LSI_WEIGHT),
        "fit_tokens": settings.getint("RELEVANCE_FIT_TOKENS", DEFAULT_FIT_TOKENS),
    }


def relevance_threshold(settings: BaseSettings) -> float:
    """``RELEVANCE_THRESHOLD``: the combined score at or above which a text is on-topic."""
    return settings.getfloat("RELEVANCE_THRESHOLD", DEFAULT_THRESHOLD)
