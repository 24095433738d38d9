"""The relevance model: ranking, refits with a frozen dictionary, threads, persistence, speed."""

from __future__ import annotations

import math
import random
import threading
import time
from collections import Counter
from dataclasses import astuple
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from gensim.corpora import Dictionary
from gensim.matutils import Sparse2Corpus
from gensim.models import LsiModel
from scrapy import Request
from scrapy.http import HtmlResponse
from scrapy.settings import Settings
from scrapy.utils.test import get_crawler

from focused import relevance
from focused.items import PageItem
from focused.middlewares import RelevanceMiddleware
from focused.relevance import RelevanceModel, Scores
from focused.text import term_weights, tokenize, with_folded

QUERY = "birds bird migration nesting ornithology"

BIRD_SENTENCES = [
    "Swallows and swifts migrate thousands of kilometres each autumn to winter in Africa.",
    "The robin defends its territory with song, even through the winter months.",
    "Birdwatchers count nests, eggs and chicks in spring to follow breeding success.",
    "Ornithologists ring birds so that recoveries reveal their migration routes.",
    "Owls hunt at night; their soft feathers make their flight almost silent.",
    "Woodpeckers drum on dead trees and excavate nesting holes with strong beaks.",
    "Many warblers look alike, and birders tell them apart by their song.",
    "The female thrush builds a cup-shaped nest of grass lined with mud.",
    "Geese fly in a V formation, taking turns to lead the flock on migration.",
    "Plumage moults once or twice a year, and some birds grow breeding feathers.",
    "Seabirds such as gannets nest in dense colonies on cliffs above the sea.",
    "Feeding birds in the garden helps finches and tits survive cold winters.",
]
RAILWAY_SENTENCES = [
    "The locomotive pulled twelve carriages out of the station on time.",
    "Signals and timetables keep trains safely apart on a busy main line.",
    "Electric trains draw current from overhead lines through a pantograph.",
    "Diesel engines still haul freight wagons on rural branch lines.",
    "The railway company ordered new rolling stock for its commuter services.",
    "Passengers changed trains at the junction for the coastal line.",
    "Track maintenance crews replaced sleepers and rails over the weekend.",
    "High speed rail links cities faster than flying for journeys under four hours.",
    "The steam railway museum restored a tank engine built in 1910.",
    "Freight terminals load containers from ships onto long trains.",
    "A level crossing closed its barriers as the express approached.",
    "The timetable change added late evening trains to the suburban network.",
]
COOKING_SENTENCES = [
    "Soften the onions in butter before toasting the rice for the risotto.",
    "Add the stock one ladle at a time and stir until the rice is creamy.",
    "Season the soup with salt, pepper and a squeeze of lemon juice.",
    "Knead the dough for ten minutes, then let the bread rise until doubled.",
    "Roast the vegetables in a hot oven with olive oil and rosemary.",
    "Whisk the eggs with sugar until pale, then fold in the flour for the cake.",
    "Simmer the tomato sauce gently with garlic and fresh basil leaves.",
    "Marinate the chicken overnight in yoghurt, garlic and spices before grilling.",
    "Caramelise the sugar in a heavy pan and pour it over the custard.",
    "Chop the herbs finely and stir them into the salad dressing.",
    "Bake the pastry blind before adding the filling to the tart.",
    "Grate parmesan over the pasta and serve it with a green salad.",
]
# Vocabulary none of the above pages use: it only reaches the model in later pages.
ASTRONOMY_SENTENCES = [
    "The telescope resolved the spiral galaxy into clusters of young stars.",
    "Astronomers measured the redshift of distant quasars with a spectrograph.",
    "A comet's nucleus sheds gas and dust as it nears perihelion.",
    "Exoplanets are detected by the dimming of their host star during transits.",
    "The nebula glows with hydrogen ionised by hot massive stars.",
    "Observatories on high mountains avoid atmospheric turbulence and light pollution.",
]

ON_TOPIC = (
    "Each spring the cliffs fill with nesting seabirds. Birders watch puffins carry fish to "
    "their chicks, while swallows return from migration to nest under the eaves. Ringing "
    "studies show that many birds come back to the very nest site they used the year before."
)
RAILWAY_TEXT = (
    "The new timetable runs an express train every half hour between the two cities. "
    "Electric locomotives replaced the diesel engines on the main line, and the station "
    "was rebuilt with longer platforms for twelve-carriage trains."
)
COOKING_TEXT = (
    "For a weeknight dinner, fry garlic in olive oil, add chopped tomatoes and simmer the "
    "sauce for twenty minutes. Toss it with the pasta, grate parmesan on top and serve with "
    "a salad dressed with lemon juice."
)
OFF_TOPIC = (RAILWAY_TEXT, COOKING_TEXT)
UNSEEN_WORDS = "zorblax quintessor flumptic yarrowgate snerdlings"


def pages(sentences: list[str], count: int, rng: random.Random) -> list[str]:
    """Fake pages: a handful of sentences on one subject, in random order."""
    return [" ".join(rng.sample(sentences, 5)) for _ in range(count)]


def crawl_buffer(seed: int = 0, per_topic: int = 40) -> list[str]:
    rng = random.Random(seed)
    docs = [
        *pages(BIRD_SENTENCES, per_topic, rng),
        *pages(RAILWAY_SENTENCES, per_topic, rng),
        *pages(COOKING_SENTENCES, per_topic, rng),
    ]
    rng.shuffle(docs)
    return docs


def fitted_model(**kwargs) -> RelevanceModel:
    model = RelevanceModel(QUERY, **kwargs)
    for doc in crawl_buffer():
        model.observe(doc)
    model.refit()
    return model


def assert_valid(scores: Scores) -> None:
    for value in (scores.tfidf, scores.lsi, scores.combined):
        assert math.isfinite(value)
        assert 0.0 <= value <= 1.0


def assert_ranks_on_topic_first(model: RelevanceModel) -> None:
    on = model.score(ON_TOPIC)
    assert_valid(on)
    for text in OFF_TOPIC:
        off = model.score(text)
        assert_valid(off)
        assert on.tfidf > off.tfidf
        assert on.lsi > off.lsi
        assert on.combined > off.combined


# -- tokenizer -------------------------------------------------------------------------------


def test_tokenize_drops_stopwords_numbers_short_tokens_and_underscores() -> None:
    tokens = tokenize("The 2 Swallows_and_SWIFTS of 1999 flew over MP3 players, a x!")
    assert tokens == ["swallows", "swifts", "flew", "mp3", "players"]


def test_tokenize_is_unicode_aware() -> None:
    # decomposed and precomposed accents are one term; combining marks do not split words
    assert tokenize("Café cafe\u0301 NAÏVE") == ["café", "café", "naïve"]
    # (Thai, written without spaces, is cut into bigrams of code points, as CJK is)
    thai = ["ภา", "าษ", "ษา", "าไ", "ไท", "ทย"]
    assert tokenize("हिन्दी भाषा ภาษาไทย Straße") == ["हिन्दी", "भाषा", *thai, "straße"]
    assert tokenize("") == []


# -- ranking ---------------------------------------------------------------------------------


def test_on_topic_ranks_first_before_any_fit() -> None:
    model = RelevanceModel(QUERY)
    assert_ranks_on_topic_first(model)
    # no LSI space yet: lsi falls back to tfidf
    scores = model.score(ON_TOPIC)
    assert scores.lsi == scores.tfidf == scores.combined


def test_on_topic_ranks_first_after_refits() -> None:
    model = fitted_model(num_topics=10)
    assert_ranks_on_topic_first(model)
    scores = model.score(ON_TOPIC)
    assert scores.lsi != scores.tfidf  # the LSI space is in use
    # a second round of pages and a second refit keep the ranking
    for doc in crawl_buffer(seed=1):
        model.observe(doc)
    model.refit()
    assert_ranks_on_topic_first(model)


@pytest.mark.parametrize("fit", [False, True], ids=["bootstrap", "fitted"])
def test_words_outside_the_dictionary_dilute_a_page(fit: bool) -> None:
    """Words the model has not seen yet get no dimension, but must still count in a page."""
    model = fitted_model(num_topics=10) if fit else RelevanceModel(QUERY)
    short = model.score("Bird migration in autumn.")
    long = model.score("Bird migration in autumn. " + " ".join([UNSEEN_WORDS] * 5))
    assert 0.0 < long.tfidf < short.tfidf / 2
    assert 0.0 < long.lsi < short.lsi / 2


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_topic_word_that_no_crawled_page_holds_gives_pages_without_it_no_lsi_score(
    seed: int,
) -> None:
    """LSI places a term by the pages it shares with other terms: a word only the query holds
    has no place in the space, and a direction made of rounding must not score pages."""
    model = RelevanceModel("zyzzyva", num_topics=10)
    for doc in crawl_buffer(seed=seed):
        model.observe(doc)
    model.refit()
    for page in crawl_buffer(seed=seed + 10):
        scores = model.score(page)
        assert scores.lsi == 0.0
        assert not model.is_relevant(scores)
    # With no LSI topic, LSI scores are the tf-idf ones, as before the first fit.
    on_topic = model.score("The zyzzyva weevil, zyzzyva beetles and birds.")
    assert 0.0 < on_topic.lsi == on_topic.tfidf


@pytest.mark.parametrize("joins", ["after the fit", "during the fit"])
def test_a_topic_text_that_joins_after_the_fit_leaves_the_crawled_words_in_the_lsi_topic(
    monkeypatch, tmp_path, joins: str
) -> None:
    """A topic word one crawled page holds stays in the LSI topic when a seed text holding it
    joins the topic after the dictionary was built: its words are not in the dictionary's
    document frequencies, and taking them off too left 'zyzzyva' held by no page, the model
    without its LSI topic until the next refit. A text that is the query changes no score."""
    docs = crawl_buffer(seed=0)
    docs[0] += " The zyzzyva weevil lives here."
    page = "The zyzzyva weevil, zyzzyva beetles and birds."

    def fitted(add_during_fit: bool) -> RelevanceModel:
        model = RelevanceModel("zyzzyva", num_topics=10)
        for doc in docs:
            model.observe(doc)
        fit = relevance._fit

        def fit_while_a_seed_joins(*args: Any) -> Any:
            model.add_topic_text("zyzzyva")
            return fit(*args)

        if add_during_fit:
            monkeypatch.setattr(relevance, "_fit", fit_while_a_seed_joins)
        model.refit()
        monkeypatch.setattr(relevance, "_fit", fit)
        return model

    before = fitted(add_during_fit=False).score(page)
    assert before.lsi != before.tfidf  # the model has its LSI topic
    model = fitted(add_during_fit=joins == "during the fit")
    if joins == "after the fit":
        model.add_topic_text("zyzzyva")
    assert model.topic_texts == 1
    assert model.score(page) == before
    model.save(tmp_path / "model")
    assert RelevanceModel.load(tmp_path / "model").score(page) == before


# -- refits and the frozen dictionary -------------------------------------------------------


def test_refit_with_new_vocabulary_keeps_scores_valid() -> None:
    model = fitted_model(num_topics=10)
    rng = random.Random(2)
    # words no earlier page used, observed but not in the dictionary until the next refit
    astronomy = " ".join(ASTRONOMY_SENTENCES[:2])
    for doc in pages(ASTRONOMY_SENTENCES, 40, rng):
        model.observe(doc)
    before = model.score(astronomy)
    assert_valid(before)
    assert before.combined == 0.0
    assert model.score_texts([astronomy, "telescope " + ON_TOPIC]) == [
        0.0,
        pytest.approx(model.score("telescope " + ON_TOPIC).combined),
    ]

    model.refit()
    for text in (astronomy, ON_TOPIC, *OFF_TOPIC, ON_TOPIC + " " + astronomy):
        assert_valid(model.score(text))
    assert_ranks_on_topic_first(model)
    assert model.score(ON_TOPIC).combined > model.score(astronomy).combined
    # words no page ever contained score exactly 0, in every space and in batches
    assert model.score(UNSEEN_WORDS) == Scores(0.0, 0.0, 0.0)
    assert model.score_texts([UNSEEN_WORDS, "", UNSEEN_WORDS]) == [0.0, 0.0, 0.0]


def test_lsi_needs_a_few_documents() -> None:
    model = RelevanceModel(QUERY, num_topics=50)
    model.refit()  # the topic alone: one document, no LSI
    scores = model.score(ON_TOPIC)
    assert_valid(scores)
    assert scores.lsi == scores.tfidf > 0.0
    # (a page holding query words: the LSI topic is made of the words crawled pages hold)
    model.observe(BIRD_SENTENCES[0] + " " + BIRD_SENTENCES[3])
    model.observe(RAILWAY_TEXT)
    model.refit()  # three documents: LSI with min(50, 3 - 1) = 2 topics
    assert_ranks_on_topic_first(model)
    assert model.score(ON_TOPIC).lsi != model.score(ON_TOPIC).tfidf


def test_empty_topic_scores_zero() -> None:
    model = RelevanceModel("")
    assert model.score(ON_TOPIC) == Scores(0.0, 0.0, 0.0)
    for doc in crawl_buffer(per_topic=3):
        model.observe(doc)
    model.refit()
    assert model.score(ON_TOPIC) == Scores(0.0, 0.0, 0.0)
    assert model.score_texts(["", ON_TOPIC]) == [0.0, 0.0]


# -- the fit: gensim's dictionary and LSI space, built without gensim's Python loops -----------

# Folded forms ("vtaky", "cu") are ordinary terms of the dictionary, also where a document has
# both spellings.
FOREIGN_TEXTS = ["Vtáky hniezdia v lese, vtaky aj vtáky.", "Chim cư trú ở rừng; chim cu gáy."]


def training_texts(sample_graph) -> list[list[str]]:
    """Real pages (the Wikispeedia sample), pages with diacritics, an empty page and one word
    repeated, as a refit's corpus holds them."""
    texts = [*list(sample_graph.text.values())[:150], *FOREIGN_TEXTS]
    return [*(tokenize(text) for text in texts), [], ["nest", "nest", "nest"]]


def test_dictionary_is_the_one_gensim_builds(sample_graph) -> None:
    topic = [tokenize(QUERY), tokenize(FOREIGN_TEXTS[0], "sk"), tokenize(FOREIGN_TEXTS[1], "vi")]
    documents = [with_folded(tokens) for tokens in [*training_texts(sample_graph), *topic]]
    assert len(documents[-1]) > len(topic[-1])  # with folded forms
    built, ids = relevance._dictionary([Counter(document) for document in documents])
    gensims, gensims_unfiltered = Dictionary(documents), Dictionary(documents)
    for dictionary in (built, gensims):
        assert isinstance(dictionary, Dictionary)
        # what a fit does next: the same filtering gives the same ids
        dictionary.filter_extremes(no_below=2, no_above=1.0, keep_n=3000, keep_tokens=topic[1])
    for name in ("token2id", "dfs", "cfs", "num_docs", "num_pos", "num_nnz"):
        built_value, gensims_value = getattr(built, name), getattr(gensims, name)
        assert built_value == gensims_value, name
        if isinstance(built_value, dict):  # in the same order, too
            assert list(built_value.items()) == list(gensims_value.items()), name
    assert len(built) == 3000
    # the ids of each document's terms, in order, as they were before the filtering
    assert ids.tolist() == [gensims_unfiltered.token2id[t] for d in documents for t in Counter(d)]
    assert relevance._dictionary([])[0].token2id == {}
    assert relevance._dictionary([Counter(), Counter()])[0].num_docs == 2


@pytest.mark.parametrize("max_terms", [50_000, 300, 0])
def test_filtering_is_the_one_gensim_does(sample_graph, monkeypatch, max_terms: int) -> None:
    """Same kept words, ids and frequencies, in the same order, as gensim's filter_extremes;
    also when the bound cuts among words of equal document frequency, or keeps nothing."""
    monkeypatch.setattr(relevance, "_MAX_TERMS", max_terms)
    documents = [with_folded(tokens) for tokens in training_texts(sample_graph)]
    once = next(t for t in documents[0] if sum(t in d for d in documents) == 1)
    keep = {*with_folded(tokenize(QUERY)), once, "wordfoundnowhere"}
    for corpus in (documents, [], [[]]):
        ours, _ = relevance._dictionary([Counter(document) for document in corpus])
        gensims, _ = relevance._dictionary([Counter(document) for document in corpus])
        relevance._filter_extremes(ours, keep)
        gensims.filter_extremes(no_below=2, no_above=1.0, keep_n=max_terms, keep_tokens=keep)
        for name in ("token2id", "dfs", "cfs", "id2token"):
            assert list(getattr(ours, name).items()) == list(getattr(gensims, name).items()), name
        for name in ("num_docs", "num_pos", "num_nnz"):
            assert getattr(ours, name) == getattr(gensims, name), name
        # what the parameters are for: a kept word of a single page, and the bound
        if corpus is documents:
            assert (once in ours.token2id) == (max_terms > 0)
            assert len(ours) == max_terms or max_terms == 50_000


def test_lsi_space_is_the_one_gensim_fits_on_the_corpus(sample_graph) -> None:
    """gensim's own LsiModel, fed the training rows as a streamed corpus, finds the same space."""
    corpus = training_texts(sample_graph)
    snap = relevance._fit([" ".join(tokens) for tokens in corpus], [tokenize(QUERY)], 20)
    weights = [term_weights(tokens) for tokens in [*corpus, tokenize(QUERY)]]
    ids = np.array([snap.dictionary.token2id.get(t, -1) for text in weights for t in text])
    rows, _ = relevance._unit_tfidf(snap.idf, snap.unseen_idf, weights, ids)
    streamed = LsiModel(
        Sparse2Corpus(rows, documents_columns=False),
        id2word=snap.dictionary,
        num_topics=20,
        extra_samples=relevance._LSI_OVERSAMPLING,
        random_seed=relevance._LSI_SEED,
    )
    assert snap.lsi.projection.u.shape == (len(snap.dictionary), 20)
    assert np.allclose(snap.lsi.projection.u, streamed.projection.u, rtol=0.0, atol=1e-12)
    assert np.allclose(snap.lsi.projection.s, streamed.projection.s, rtol=1e-12, atol=0.0)
    assert (snap.lsi.num_topics, snap.lsi.num_terms, snap.lsi.docs_processed) == (
        streamed.num_topics,
        streamed.num_terms,
        streamed.docs_processed,
    )


def test_a_fit_read_in_slices_is_the_fit_read_at_once(sample_graph, monkeypatch) -> None:
    """The training weights are read into numpy in slices (so that the reactor thread can take
    the GIL between them); with slices of 7 numbers the fit is the same to the bit."""
    corpus = [" ".join(tokens) for tokens in training_texts(sample_graph)]
    topic = [tokenize(QUERY), tokenize(FOREIGN_TEXTS[0], "sk")]
    at_once = relevance._fit(corpus, topic, 20)
    monkeypatch.setattr(relevance, "_GIL_SLICE", 7)
    numbers = [float(n) / 3 for n in range(23)]  # slices of 7, 7, 7 and 2
    assert relevance._float_array(numbers).tolist() == numbers
    in_slices = relevance._fit(corpus, topic, 20)
    assert list(in_slices.dictionary.token2id.items()) == list(at_once.dictionary.token2id.items())
    for name in ("idf", "topic_tfidf", "lsi_basis", "topic_lsi"):
        assert np.array_equal(getattr(in_slices, name), getattr(at_once, name)), name
    assert np.array_equal(in_slices.lsi.projection.s, at_once.lsi.projection.s)


def test_refit_due_counts_observed_pages() -> None:
    model = RelevanceModel(QUERY, refit_every=5, max_docs=8)
    for doc in crawl_buffer()[:4]:
        model.observe(doc)
    assert not model.refit_due
    model.observe(RAILWAY_TEXT)
    assert model.refit_due
    model.refit()
    assert not model.refit_due
    for doc in crawl_buffer()[:20]:  # the buffer keeps only max_docs pages
        model.observe(doc)
    assert model.refit_due
    model.refit()
    assert_ranks_on_topic_first(model)


def test_refits_are_spaced_as_the_pages_learned_from_grow() -> None:
    # A refit's cost grows with its pages: the gap is at least half of them, so the CPU a page
    # pays for refits stays bounded as the crawl grows.
    docs = crawl_buffer(per_topic=10)
    model = RelevanceModel(QUERY, refit_every=2, max_docs=16)
    for doc in docs[:10]:
        model.observe(doc)
    assert model.refit_due  # 10 pages >= max(2, 10 // 2)
    model.refit()
    for count, doc in enumerate(docs[10:19], start=1):
        model.observe(doc)  # the buffer holds 10 + count pages, at most 16
        assert model.refit_due == (count >= 8), count  # max(2, 16 // 2) = 8


# -- the topic -------------------------------------------------------------------------------

SEED = (
    "Albatrosses are large seabirds of the Southern Ocean. An albatross glides for hours on "
    "long narrow wings and may circle Antarctica; petrels and shearwaters share its tubenose "
    "bill and its habit of nesting on remote islands."
)
LIKE_SEED = "The wandering albatross, like other petrels and shearwaters, glides on long wings."


def test_add_topic_text_before_any_fit() -> None:
    model = RelevanceModel(QUERY)
    before = model.score(LIKE_SEED)
    model.add_topic_text(SEED)
    after = model.score(LIKE_SEED)
    assert after.tfidf > before.tfidf
    assert after.combined > before.combined
    assert_ranks_on_topic_first(model)


def test_add_topic_text_after_a_fit() -> None:
    model = RelevanceModel(QUERY, num_topics=10)
    docs = crawl_buffer()
    rng = random.Random(3)
    for doc in docs:
        model.observe(doc)
    # the seed's words are known: some crawled pages mention albatrosses
    for _ in range(5):
        model.observe(SEED + " " + " ".join(rng.sample(BIRD_SENTENCES, 3)))
    model.refit()
    before = model.score(LIKE_SEED)
    model.add_topic_text(SEED)
    after = model.score(LIKE_SEED)
    assert after.tfidf > before.tfidf
    assert after.lsi > before.lsi
    assert after.combined > before.combined
    assert_ranks_on_topic_first(model)


def test_words_of_a_seed_added_after_a_fit_join_at_the_next_refit() -> None:
    model = fitted_model(num_topics=10)
    model.add_topic_text(SEED)
    assert model.score("albatross tubenose").combined == 0.0  # unseen at the last fit
    model.refit()
    assert model.score("albatross tubenose").combined > 0.0


# -- batches ---------------------------------------------------------------------------------

SHORT_TEXTS = [
    "",
    "   ",
    "--- | ---",
    "Home",
    "Bird migration",
    "Next train times",
    "Recipes",
    "Bird migration",
    "nesting seabirds on the cliffs",
    UNSEEN_WORDS,
    ON_TOPIC,
    "Home",
]


@pytest.mark.parametrize("fit", [False, True], ids=["bootstrap", "fitted"])
def test_score_texts_agrees_with_score(fit: bool) -> None:
    model = fitted_model(num_topics=10) if fit else RelevanceModel(QUERY)
    expected = [model.score(text).combined for text in SHORT_TEXTS]
    assert model.score_texts(SHORT_TEXTS) == pytest.approx(expected, abs=1e-12)
    assert model.score_texts(SHORT_TEXTS) == pytest.approx(expected, abs=1e-12)  # cached
    assert model.score_texts([]) == []
    for text, value in zip(SHORT_TEXTS[:4], model.score_texts(SHORT_TEXTS[:4]), strict=True):
        assert value == 0.0, text
    assert model.score_texts(["Bird migration"])[0] > model.score_texts(["Next train times"])[0]


@pytest.mark.parametrize("fit", [False, True], ids=["bootstrap", "fitted"])
def test_score_links_agrees_with_scoring_each_text(fit: bool) -> None:
    """The anchor+context score, derived from the two texts' vectors, is the score of the
    joined text; shared words (known or not) count once with their summed weight."""
    model = fitted_model(num_topics=10) if fit else RelevanceModel(QUERY)
    anchors = [*SHORT_TEXTS, "Bird migration", "zzyzx seabirds", "vtáky"]
    contexts = [*reversed(SHORT_TEXTS), "migration of birds", "zzyzx zzyzx nesting", "vtaky"]
    joined = [f"{a} {c}" for a, c in zip(anchors, contexts, strict=True)]
    anchor, context, link = model.score_links(anchors, contexts)
    assert anchor == pytest.approx(model.score_texts(anchors), abs=1e-12)
    assert context == pytest.approx(model.score_texts(contexts), abs=1e-12)
    assert link == pytest.approx(model.score_texts(joined), abs=1e-12)
    assert max(link) > 0.0
    assert model.score_links([], []) == ([], [], [])


def test_score_texts_cache_does_not_outlive_a_refit() -> None:
    model = RelevanceModel(QUERY, num_topics=10)
    stale = model.score_texts(SHORT_TEXTS)
    for doc in crawl_buffer():
        model.observe(doc)
    model.refit()
    fresh = [model.score(text).combined for text in SHORT_TEXTS]
    assert fresh != pytest.approx(stale)
    assert model.score_texts(SHORT_TEXTS) == pytest.approx(fresh, abs=1e-12)
    model.add_topic_text(SEED)
    assert model.score_texts([LIKE_SEED]) == [pytest.approx(model.score(LIKE_SEED).combined)]


# -- threads ---------------------------------------------------------------------------------


def test_refit_in_a_thread_while_scoring() -> None:
    model = RelevanceModel(QUERY, num_topics=20)
    for doc in crawl_buffer(per_topic=100):
        model.observe(doc)
    errors: list[Exception] = []

    def refit() -> None:
        try:
            model.refit()
        except Exception as error:  # reported by the assertion below
            errors.append(error)

    thread = threading.Thread(target=refit)
    thread.start()
    calls = 0
    while thread.is_alive() or calls < 20:
        assert_valid(model.score(ON_TOPIC))
        assert_valid(model.score(RAILWAY_TEXT))
        for value in model.score_texts(SHORT_TEXTS):
            assert 0.0 <= value <= 1.0
        model.observe(COOKING_TEXT)  # the reactor keeps feeding pages during the fit
        calls += 1
    thread.join()
    assert not errors
    assert model.score(ON_TOPIC).lsi != model.score(ON_TOPIC).tfidf  # the new snapshot is in
    assert_ranks_on_topic_first(model)


def test_topic_text_added_during_a_refit_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    """A seed added on the reactor while a refit runs must not be lost when the refit lands."""
    docs = [*crawl_buffer(), SEED, SEED]
    model, baseline = RelevanceModel(QUERY, num_topics=10), RelevanceModel(QUERY, num_topics=10)
    for doc in docs:
        model.observe(doc)
        baseline.observe(doc)
    baseline.refit()
    fit = relevance._fit

    def fit_while_a_seed_arrives(*args, **kwargs):
        snapshot = fit(*args, **kwargs)
        model.add_topic_text(SEED)  # what the reactor thread does meanwhile
        return snapshot

    monkeypatch.setattr(relevance, "_fit", fit_while_a_seed_arrives)
    model.refit()
    assert model.score(LIKE_SEED).combined > baseline.score(LIKE_SEED).combined


# -- persistence and settings ----------------------------------------------------------------


@pytest.mark.parametrize("fit", [False, True], ids=["bootstrap", "fitted"])
def test_save_load_round_trip(tmp_path: Path, fit: bool) -> None:
    if fit:
        model = fitted_model(num_topics=10, threshold=0.2, fit_tokens=8)
    else:
        model = RelevanceModel(QUERY, fit_tokens=8)
    model.add_topic_text(SEED)
    model.observe(RAILWAY_TEXT)
    model.save(tmp_path / "model")
    loaded = RelevanceModel.load(tmp_path / "model")
    texts = [ON_TOPIC, *OFF_TOPIC, LIKE_SEED, UNSEEN_WORDS, ""]
    assert [loaded.score(t) for t in texts] == [model.score(t) for t in texts]
    assert loaded.score_texts(SHORT_TEXTS) == model.score_texts(SHORT_TEXTS)
    assert (loaded.threshold, loaded.fit_tokens) == (model.threshold, 8)
    assert loaded.refit_due == model.refit_due
    # the loaded model goes on learning the same way (up to BLAS rounding)
    model.refit()
    loaded.refit()
    for text in texts:
        assert astuple(loaded.score(text)) == pytest.approx(astuple(model.score(text)), abs=1e-9)


def test_a_save_during_a_refit_keeps_the_refitted_space(tmp_path: Path, monkeypatch) -> None:
    """A pause while a refit ran in its thread saved the old space with the refit's pages off
    the count: the resumed crawl scored with the old space until a refit was due again."""
    model = fitted_model(num_topics=10)
    for _ in range(model.refit_every):
        model.observe(RAILWAY_TEXT)
    fitting, go_on = threading.Event(), threading.Event()
    real_fit = relevance._fit

    def slow_fit(*args):
        fitting.set()
        go_on.wait()
        return real_fit(*args)

    monkeypatch.setattr(relevance, "_fit", slow_fit)
    refit = threading.Thread(target=model.refit)
    refit.start()
    fitting.wait()
    save = threading.Thread(target=model.save, args=(tmp_path / "model",))
    save.start()
    save.join(0.2)
    waited = save.is_alive()
    go_on.set()
    refit.join()
    save.join()
    assert waited
    loaded = RelevanceModel.load(tmp_path / "model")
    texts = [ON_TOPIC, *OFF_TOPIC, RAILWAY_TEXT]
    assert [loaded.score(t) for t in texts] == [model.score(t) for t in texts]
    assert loaded.refit_due == model.refit_due is False


def test_a_model_loaded_with_settings_takes_their_relevance_parameters(tmp_path: Path) -> None:
    """A resumed crawl may change its settings: the model kept the saved threshold, while the
    pipeline that stores is_relevant read the new one."""
    model = fitted_model(num_topics=10)
    model.save(tmp_path / "model")
    same = RelevanceModel.load(tmp_path / "model", Settings())
    assert [same.score(t) for t in (ON_TOPIC, *OFF_TOPIC)] == [
        model.score(t) for t in (ON_TOPIC, *OFF_TOPIC)
    ]
    changed = RelevanceModel.load(
        tmp_path / "model",
        Settings({"RELEVANCE_THRESHOLD": 0.3, "RELEVANCE_LSI_WEIGHT": 0.0}),
    )
    assert (changed.threshold, changed.lsi_weight) == (0.3, 0.0)
    scores = changed.score(ON_TOPIC)
    assert scores.combined == scores.tfidf == model.score(ON_TOPIC).tfidf


def test_a_save_cut_short_leaves_the_saved_model_whole(tmp_path: Path, monkeypatch) -> None:
    """A crawl killed as it saved its model (as it closed) left the new dictionary beside the old
    LSI space: files of two models, which loaded as one and failed once scoring."""
    old = fitted_model(num_topics=10)
    old.save(tmp_path / "model")
    assert old.restored is False and RelevanceModel.load(tmp_path / "model").restored is True
    new = fitted_model(num_topics=10)
    new.observe(RAILWAY_TEXT)
    new.add_topic_text(SEED)
    new.refit()

    def killed(self, *args, **kwargs):
        raise KeyboardInterrupt  # the process dies here, after the dictionary and tf-idf

    monkeypatch.setattr(LsiModel, "save", killed)
    with pytest.raises(KeyboardInterrupt):
        new.save(tmp_path / "model")
    loaded = RelevanceModel.load(tmp_path / "model")
    texts = [ON_TOPIC, *OFF_TOPIC, LIKE_SEED]
    assert [loaded.score(t) for t in texts] == [old.score(t) for t in texts]
    monkeypatch.undo()
    new.save(tmp_path / "model")  # the next save clears what the cut one left
    assert [RelevanceModel.load(tmp_path / "model").score(t) for t in texts] == [
        new.score(t) for t in texts
    ]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["model"]


def test_is_relevant_uses_the_threshold() -> None:
    model = RelevanceModel(QUERY, threshold=0.3)
    assert model.is_relevant(Scores(0.0, 0.0, 0.3))
    assert model.is_relevant(Scores(0.1, 0.9, 0.5))
    assert not model.is_relevant(Scores(0.9, 0.9, 0.2999))
    lenient = RelevanceModel(QUERY, threshold=0.0)
    assert lenient.is_relevant(lenient.score(RAILWAY_TEXT))


def test_from_settings() -> None:
    settings = Settings(
        {
            "RELEVANCE_THRESHOLD": "0.25",
            "RELEVANCE_NUM_TOPICS": "7",
            "RELEVANCE_REFIT_EVERY": "3",
            "RELEVANCE_MAX_DOCS": "10",
            "RELEVANCE_LSI_WEIGHT": "0",
            "RELEVANCE_FIT_TOKENS": "500",
        }
    )
    model = RelevanceModel.from_settings(QUERY, settings)
    assert (model.threshold, model.num_topics, model.refit_every, model.max_docs) == (
        0.25,
        7,
        3,
        10,
    )
    assert (model.lsi_weight, model.fit_tokens) == (0.0, 500)
    for doc in crawl_buffer()[:3]:
        model.observe(doc)
    assert model.refit_due
    model.refit()
    scores = model.score(ON_TOPIC)
    assert scores.combined == scores.tfidf  # lsi_weight 0
    defaults = RelevanceModel.from_settings(QUERY, Settings())
    assert (defaults.threshold, defaults.num_topics, defaults.lsi_weight) == (0.15, 50, 0.5)
    assert defaults.fit_tokens == 1000


def test_rejects_bad_parameters() -> None:
    with pytest.raises(ValueError):
        RelevanceModel(QUERY, lsi_weight=1.5)
    with pytest.raises(ValueError):
        RelevanceModel(QUERY, num_topics=0)
    with pytest.raises(ValueError):
        RelevanceModel(QUERY, fit_tokens=-1)


# -- what the refits learn of a page --------------------------------------------------------


@pytest.mark.parametrize("fit", [False, True], ids=["bootstrap", "fitted"])
def test_the_refits_learn_a_page_from_its_first_fit_tokens(fit: bool) -> None:
    head = tokenize(ON_TOPIC)
    model = fitted_model(num_topics=10) if fit else RelevanceModel(QUERY)
    model.fit_tokens = len(head)
    page = f"{ON_TOPIC} {RAILWAY_TEXT * 5}"
    model.observe(page)
    assert model._buffer[-1] == " ".join(head)
    # The page itself is scored on all of its text, mostly railways: the cap is the refits'.
    assert model.score(page).combined < model.score(ON_TOPIC).combined
    model.fit_tokens = 0
    model.observe(page)
    assert model._buffer[-1] == " ".join(tokenize(page))


# -- cost ------------------------------------------------------------------------------------


def cpu_ms(function, repeat: int) -> float:
    started = time.process_time()
    for _ in range(repeat):
        function()
    return (time.process_time() - started) / repeat * 1000


def test_report_scoring_cost(capsys: pytest.CaptureFixture[str]) -> None:
    """Print the CPU cost of scoring (not asserted: it depends on the machine)."""
    rng = random.Random(4)
    sentences = BIRD_SENTENCES + RAILWAY_SENTENCES + COOKING_SENTENCES + ASTRONOMY_SENTENCES
    page = " ".join(rng.choices(sentences, k=80))[:5000]
    anchors = [" ".join(rng.sample(s.split(), 3)) for s in rng.choices(sentences, k=300)]
    contexts = [" ".join(rng.choices(sentences, k=5))[:400] for _ in range(300)]
    model = RelevanceModel(QUERY, num_topics=50)
    lines = [f"5 KB page, bootstrap model: {cpu_ms(lambda: model.score(page), 200):.3f} ms CPU"]
    model = fitted_model(num_topics=50)
    lines.append(f"5 KB page, fitted model: {cpu_ms(lambda: model.score(page), 200):.3f} ms CPU")

    def uncached(texts: list[str], repeat: int) -> list[list[str]]:
        # a number is not a token: same scores, but a new string the cache has not seen
        return [[f"{text} {i}" for text in texts] for i in range(repeat)]

    runs = iter(uncached(anchors, 20) + uncached(contexts, 20))
    lines.append(f"300 anchors: {cpu_ms(lambda: model.score_texts(next(runs)), 20):.3f} ms CPU")
    lines.append(
        f"300 contexts of 400 chars: {cpu_ms(lambda: model.score_texts(next(runs)), 20):.3f} ms CPU"
    )
    model.score_texts(anchors)
    lines.append(
        f"300 anchors, cached: {cpu_ms(lambda: model.score_texts(anchors), 50):.3f} ms CPU"
    )
    with capsys.disabled():
        print("\n" + "\n".join(f"  relevance cost: {line}" for line in lines))


@pytest.mark.parametrize(
    ("queue", "reads_fetched_parent"),
    [
        ("schedulers.bfs.BreadthFirstQueue", False),
        ("schedulers.pso.PsoQueue", True),
        ("schedulers.rank_semantic.RankSemanticQueue", True),
    ],
)
def test_a_childs_parent_url_is_the_url_its_parent_is_stored_under(
    queue: str, reads_fetched_parent: bool
) -> None:
    """A page stored under another URL than the one it was fetched at (its rel=canonical, or a
    redirect's target with a tracking parameter, canonicalized) gave its children the fetched
    URL as ``parent_url``: no stored page had it, so the link graph of the store had orphans.
    The strategies that know a page by the URL the frontier handed out get that one too."""
    crawler = get_crawler(settings_dict={"SCHEDULER_PRIORITY_QUEUE": queue})
    crawler.spider = SimpleNamespace(
        relevance=RelevanceModel("birds"), state={}, config=SimpleNamespace(topic="birds")
    )
    middleware = RelevanceMiddleware(crawler)
    middleware.spider_opened(crawler.spider)
    fetched = "http://127.0.0.1/page?utm_source=feed&id=1"
    response = HtmlResponse(fetched, body=b"<p>birds</p>", request=Request(fetched))
    page = PageItem(url="http://127.0.0.1/canonical", text="birds nest eggs", language="en")
    child = Request("http://127.0.0.1/child")
    list(middleware.process_spider_output(response, [page, child]))
    assert child.meta["parent_url"] == page["url"]
    assert child.meta.get("parent_fetched_url") == (fetched if reads_fetched_parent else None)


def test_the_harvest_stats_at_the_close_are_the_crawls_of_every_process() -> None:
    """Set at a process's last page, a shared crawl's stats missed the pages the other
    processes scored after it: a process of a crawl of 80 pages, 33 relevant, dumped 75 and
    32 (harvest rate 0.4267) under a progress line of 80 and 33."""
    crawler = get_crawler(
        settings_dict={"SCHEDULER_PRIORITY_QUEUE": "schedulers.bfs.BreadthFirstQueue"}
    )
    counts = {"pages": 80, "relevant": 33}
    crawler.spider = SimpleNamespace(
        relevance=RelevanceModel("birds"),
        state={},
        config=SimpleNamespace(topic="birds"),
        shared=SimpleNamespace(counter=counts.__getitem__),
    )
    crawler.stats.set_value("focused/pages", 75)
    crawler.stats.set_value("focused/relevant", 32)
    middleware = RelevanceMiddleware(crawler)
    middleware.spider_opened(crawler.spider)
    middleware.spider_closed(crawler.spider)
    stats = crawler.stats.get_stats()
    assert (stats["focused/pages"], stats["focused/relevant"]) == (80, 33)
    assert stats["focused/harvest_rate"] == 0.4125


@pytest.mark.parametrize(
    ("queue", "params", "scored"),
    [
        ("hybrid.HybridQueue", {"bfs_levels": 2, "then": "dfs", "max_depth": 5}, False),
        ("hybrid.HybridQueue", {"bfs_levels": 2, "then": "bestfirst", "max_depth": 5}, True),
        ("astar.AStarQueue", {"h_weight": 0.0}, False),
        ("astar.AStarQueue", {"h_weight": 0.5}, True),
    ],
)
def test_a_strategy_gets_link_scores_only_when_its_parameters_read_them(
    queue: str, params: dict, scored: bool
) -> None:
    """``hybrid`` with ``then=dfs`` orders as bfs, then dfs, and ``astar`` with ``h_weight=0``
    as ucs: none of them reads a link's scores, yet every anchor and context was scored for
    them, the strategy class saying it read them whatever its parameters."""
    crawler = get_crawler(settings_dict={"SCHEDULER_PRIORITY_QUEUE": f"schedulers.{queue}"})
    crawler.spider = SimpleNamespace(
        relevance=RelevanceModel("birds"),
        state={},
        config=SimpleNamespace(topic="birds"),
        strategy_params=params,
    )
    middleware = RelevanceMiddleware(crawler)
    middleware.spider_opened(crawler.spider)
    url = "http://127.0.0.1/a"
    response = HtmlResponse(url, body=b"<p>birds</p>", request=Request(url))
    page = PageItem(url=url, text="birds nest eggs", language="en")
    child = Request("http://127.0.0.1/b", meta={"anchor": "bird nests", "link_context": "eggs"})
    list(middleware.process_spider_output(response, [page, child]))
    assert ("link_relevance" in child.meta) is scored
    assert ("anchor_relevance" in child.meta) is scored
