"""The project's only tokenizer, shared by page scoring, anchor scoring and model training.

Every component that turns text into terms goes through :func:`tokenize`, so that a topic, a page
and an anchor always land in the same vocabulary.

What happens to a text depends first on its script, which the text itself shows, and only then
on its language, which may be unknown or wrong (a template's ``lang="en"`` on a Persian page):

- every text: NFC, lower case, words of two or more letters, digits and marks; numbers dropped;
- Arabic script (Persian, Arabic, Urdu): NFKC (presentation forms become letters), Arabic and
  Persian letter forms unified (ي ى → ی, ك → ک, ة ۀ → ه, أ إ ٱ → ا), Arabic-Indic digits
  made ASCII, harakat and tatweel removed, and ZWNJ made a word boundary. Writers join a
  Persian suffix with ZWNJ, a space or nothing; as a boundary ZWNJ makes the first two the same
  ("کتاب‌ها" = "کتاب ها"), and the stem then matches the bare word while the suffix ("ها",
  "های", "می") is a stop word. The third spelling stays one token: that needs a stemmer;
- Han and Kana (Chinese, Japanese), and Thai, Lao, Myanmar and Khmer, written without spaces
  between words: NFKC, then each run of their characters becomes its overlapping character
  bigrams ("候鸟迁徙" → 候鸟 鸟迁 迁徙), a one-character run itself. No dictionary is needed,
  and a two-character word, the commonest length in Chinese, is always one of the bigrams; a
  segmenter (jieba) would cost a second of import and a dictionary in memory. A Thai sentence
  cut only at spaces was one token, which no query matched;
- Hangul (Korean) too: Korean puts spaces between words, but each takes its particles and
  endings ("철새가", "이동한다"), so that a query's bare words ("철새 이동") matched none of
  them. Bigrams find the stem in each, as search engines' CJK analyzers do for Korean;
- Vietnamese (``language="vi"``): every syllable is written apart, so words span syllables:
  each syllable, tone marks kept, plus each pair of adjacent syllables within a phrase
  ("di cư" → di, cư, di_cư). Pairs with a stop syllable are skipped;
- stop words of the text's language, from the ``stopwordsiso`` package (English and unknown
  languages: gensim's English list, as before languages were told apart).

Diacritics are kept in tokens; :func:`term_weights` adds their folded form with a lower weight
(see there). Underscores are replaced by spaces before matching, so the ``_`` that joins a
Vietnamese syllable pair can never come from the text.
"""

# Persian, Vietnamese and other letters here are meant, not look-alikes of Latin ones:
# ruff: noqa: RUF001, RUF002
from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Sequence
from functools import cache, lru_cache
from itertools import filterfalse

import stopwordsiso

from focused.languages import ARABIC_SCRIPT, CJK_SCRIPT

# A diacritic-folded form counts this much of an occurrence of its word (see term_weights).
FOLDED_WEIGHT = 0.5


def _bmp_combining_marks() -> str:
    """Return a regex character-class body of the Basic Multilingual Plane's combining marks.

    Python's ``\\w`` excludes combining marks (category M*), which would cut words of scripts that
    need them (Devanagari, Bengali, Thai, Hebrew and Arabic points) into single letters. Only BMP
    marks are added: the regex engine tests a BMP class with one table lookup, whereas marks above
    U+FFFF (historic scripts) become a linear list of ranges that made tokenizing ten times slower.
    """
    category = unicodedata.category
    ranges: list[tuple[int, int]] = []
    for code in range(0x300, 0x10000):
        if category(chr(code))[0] != "M":
            continue
        if ranges and ranges[-1][1] == code - 1:
            ranges[-1] = (ranges[-1][0], code)
        else:
            ranges.append((code, code))
    return "".join(f"\\u{lo:04x}-\\u{hi:04x}" for lo, hi in ranges)


_MARKS = _bmp_combining_marks()
# Runs of two or more letters, digits and marks (underscores are replaced by spaces before
# matching): skipping 1-char runs in the regex is cheaper than filtering them afterwards. The
# ASCII letters and digits are part of \w; named first, they are tested before \w's category
# lookup, which made matching an English page a sixth faster.
_WORD = re.compile(f"[a-z0-9\\w{_MARKS}]{{2,}}")
_WORD_CHARACTER = re.compile(f"[\\w{_MARKS}]")
# For bytes.translate on a UTF-8 text: the ASCII characters that are not word characters become
# spaces, and the bytes beyond ASCII stay (see _runs).
_ASCII_BREAKS = bytes(
    byte if byte >= 0x80 or _WORD_CHARACTER.match(chr(byte)) else 0x20 for byte in range(256)
)
_ASCII = bytes(range(0x80))
_SHORT_TEXT = 32  # characters (see _word_tokens)

# The scripts whose runs are cut into bigrams (module docstring): CJK, Thai, Lao, Myanmar and
# Khmer without their sentence punctuation (Myanmar's ၊ ။, Khmer's ។ ៕ ...), and Hangul.
_UNSPACED_SCRIPTS = f"{CJK_SCRIPT}\u0e00-\u0eff\u1000-\u1049\u104c-\u109f\u1780-\u17d3\u17dc-\u17ff"
_BIGRAM_SCRIPTS = f"{_UNSPACED_SCRIPTS}\uac00-\ud7a3"
# Whether a text needs more than the plain word pattern (English never does); searched in the
# text's distinct characters beyond ASCII (_beyond_ascii).
_SPECIAL = re.compile(f"[{ARABIC_SCRIPT}{_BIGRAM_SCRIPTS}]")
_ARABIC = re.compile(f"[{ARABIC_SCRIPT}]")
_CJK_RUN = re.compile(f"[{_BIGRAM_SCRIPTS}]+")
_CJK_RUN_SPLIT = re.compile(f"([{_BIGRAM_SCRIPTS}]+)")
_CJK_MARK = re.compile("[\u3099\u309a]")  # the combining kana sound marks
_CJK_RUN_SPACING = 100  # characters per CJK run below which a text is not CJK (_with_cjk_bigrams)
# A CJK run, or a word of any other script (a word character that is not CJK, or a mark).
_CJK_OR_WORD = re.compile(f"([{_BIGRAM_SCRIPTS}]+)|(?:[^\\W{_BIGRAM_SCRIPTS}]|[{_MARKS}]){{2,}}")

_ARABIC_FORMS = str.maketrans(
    {
        "\u064a": "\u06cc",  # Arabic yeh -> Persian yeh
        "\u0649": "\u06cc",  # alef maksura -> Persian yeh
        "\u0643": "\u06a9",  # Arabic kaf -> keheh
        "\u0629": "\u0647",  # teh marbuta -> heh
        "\u06c0": "\u0647",  # heh with yeh above -> heh
        "\u0623": "\u0627",  # alef with hamza above -> alef
        "\u0625": "\u0627",  # alef with hamza below -> alef
        "\u0671": "\u0627",  # alef wasla -> alef
        "\u200c": " ",  # ZWNJ: a word boundary (see the module docstring)
        "\u200d": None,  # ZWJ joins glyphs, not words
        "\u0640": None,  # tatweel (kashida) only stretches a word
        **{chr(code): None for code in range(0x064B, 0x0660)},  # harakat, shadda, sukun
        "\u0670": None,  # superscript alef
        **{chr(0x0660 + d): str(d) for d in range(10)},  # Arabic-Indic digits
        **{chr(0x06F0 + d): str(d) for d in range(10)},  # extended (Persian) digits
    }
)

# Runs of the characters _ARABIC_FORMS changes. A text is translated run by run: str.translate
# looks every character of a text that is not ASCII up in the table, and on an English page
# that quotes a Persian name that was five times the cost of the regular expression.
_ARABIC_FORM_RUN = re.compile("[" + "".join(re.escape(chr(code)) for code in _ARABIC_FORMS) + "]+")

# Latin letters with diacritics (Latin-1 Supplement to Latin Extended-B, Latin Extended
# Additional: Vietnamese); only tokens with one of these are folded.
_LATIN_MARKED = re.compile("[\u00c0-\u024f\u1e00-\u1eff]")
# Letters whose diacritic is not a combining mark, so NFD cannot strip it.
_LATIN_LETTERS = str.maketrans({"đ": "d", "ł": "l", "ø": "o", "ħ": "h", "ŧ": "t", "ı": "i"})
_VIETNAMESE_PHRASE_BREAK = re.compile(f"[^\\w\\s{_MARKS}]+|\\n")
_SYLLABLE = re.compile(f"[\\w{_MARKS}]+")


def normalize(text: str) -> str:
    """The text as tokens are cut from it: NFC, lower case, Arabic script unified, no ``_``."""
    text = unicodedata.normalize("NFC", text).lower().replace("_", " ")
    return text if _SPECIAL.search(text) is None else _normalize_scripts(text)


def _normalize_scripts(text: str) -> str:
    text = unicodedata.normalize("NFKC", text)
    if _ARABIC.search(text) is not None:
        text = _ARABIC_FORM_RUN.sub(_unify_arabic_forms, text)
    return text


def _unify_arabic_forms(run: re.Match[str]) -> str:
    return run.group().translate(_ARABIC_FORMS)


@cache
def stopwords(language: str | None) -> frozenset[str]:
    """Stop words of a language (ISO 639-1), normalized as texts are; English for None.

    A language ``stopwordsiso`` has no list for gets none: its frequent words then only get a low
    IDF. Vietnamese entries of several syllables are kept as their ``_``-joined pairs.
    """
    if language in (None, "en"):
        # Imported here: importing any of gensim takes seconds that every command (a one-line
        # refusal of bad input included) paid at start-up for a list of words.
        from focused.gensim_api import STOPWORDS

        return STOPWORDS
    if not stopwordsiso.has_lang(language):
        return frozenset()
    return frozenset("_".join(normalize(word).split()) for word in stopwordsiso.stopwords(language))


def tokenize(text: str, language: str | None = None) -> list[str]:
    """Split ``text`` into lowercase terms, dropping stop words, pure numbers and 1-char tokens.

    ``language`` is an ISO 639-1 code (``focused.languages``) or None when unknown; it chooses
    the stop words and Vietnamese syllable pairs, the script does the rest (module docstring).

    NFC normalisation makes decomposed and precomposed accents ("cafe" + U+0301 and "café") the
    same term. Numbers are dropped because years, prices and counters carry no topic but bloat the
    vocabulary; alphanumerics such as "mp3" or "h5n1" are kept.
    """
    text = unicodedata.normalize("NFC", text).lower().replace("_", " ")
    stop = stopwords(language)
    # Arabic script and CJK need more. They are found among the text's few distinct characters
    # beyond ASCII: a scan of an English page with curly quotes cost a sixth of its tokenizing.
    beyond = _beyond_ascii(text)
    if beyond and _SPECIAL.search(beyond) is not None:
        text = _normalize_scripts(text)
        beyond = _beyond_ascii(text)
        if _CJK_RUN.search(beyond) is not None:
            return _with_cjk_bigrams(text, stop)
    if language == "vi":
        return _vietnamese(text, stop)
    return _word_tokens(text, stop, beyond)


def _beyond_ascii(text: str) -> str:
    """The distinct characters of ``text`` beyond ASCII, in no order ("" for an ASCII text)."""
    if text.isascii():
        return ""
    # The bytes beyond ASCII, kept by bytes.translate in C, are the characters beyond ASCII.
    data = text.encode("utf-8", "surrogatepass").translate(None, _ASCII)
    return "".join(set(data.decode("utf-8", "surrogatepass")))


@cache
def _not_tokens(stop: frozenset[str]) -> frozenset[str]:
    """The stop words and every one-character ASCII word: what ``_word_tokens`` drops by lookup."""
    return stop.union(map(chr, range(0x80)))


def _word_tokens(text: str, stop: frozenset[str], beyond: str) -> list[str]:
    """The words of a text (``_WORD``) that are tokens: no stop words or numbers.

    ``beyond``: the text's characters beyond ASCII (``_beyond_ascii``).
    """
    # Below a few dozen characters the regular expression costs less than _runs's set-up.
    if len(text) < _SHORT_TEXT:
        return [word for word in _WORD.findall(text) if word not in stop and not word.isdigit()]
    # _runs's one-character runs are ASCII or among ``beyond``: one set drops them and the stop
    # words, and both tests run in C, without a Python step for each of a page's thousands of
    # words (a third less time than a list comprehension).
    not_tokens = _not_tokens(stop).union(beyond) if beyond else _not_tokens(stop)
    words = _runs(text, beyond)
    return list(filterfalse(str.isdigit, filterfalse(not_tokens.__contains__, words)))


def _runs(text: str, beyond: str) -> list[str]:
    """The runs of word characters (letters, digits, marks) of a text, in order: the words
    ``_WORD.findall`` finds, and the one-character runs it skips.

    Every character that is no word character is made a space, and ``split()`` cuts the
    rest, in C: half the time of the regular expression on a page. The few distinct ones beyond
    ASCII (dashes, quotes, a degree sign, among ``beyond``, which is ``_beyond_ascii(text)``)
    each by one ``str.replace``, the ASCII ones through ``bytes.translate`` on the UTF-8 text.
    (Replaced in the UTF-8 bytes, a dash or a curly quote took three times as long: their
    bytes start alike, and every one of them is a candidate match.)
    """
    for character in filterfalse(_WORD_CHARACTER.match, beyond):
        text = text.replace(character, " ")
    data = text.encode("utf-8", "surrogatepass")
    return data.translate(_ASCII_BREAKS).decode("utf-8", "surrogatepass").split()


def _with_cjk_bigrams(text: str, stop: frozenset[str]) -> list[str]:
    parts = _CJK_RUN_SPLIT.split(text)  # text, run, text, ..., text
    # A page in Chinese or Japanese is mostly runs: one match at a time. An English page that
    # names a few Chinese characters is mostly words, and a Python step per word cost five times
    # the rest of its tokenizing: the words between the runs are cut as in any other text.
    if len(parts) * _CJK_RUN_SPACING > 2 * len(text) or _CJK_MARK.search(text) is not None:
        return _with_cjk_bigrams_by_match(text, stop)
    tokens = _word_tokens(parts[0], stop, _beyond_ascii(parts[0]))
    for run, between in zip(parts[1::2], parts[2::2], strict=True):
        tokens.extend(_bigrams(run, stop))
        tokens.extend(_word_tokens(between, stop, _beyond_ascii(between)))
    return tokens


def _with_cjk_bigrams_by_match(text: str, stop: frozenset[str]) -> list[str]:
    """``_with_cjk_bigrams`` one match at a time. The only way for a text with a kana sound
    mark: a mark, so a word character, that a word of another script takes in although it is
    also CJK."""
    tokens = []
    for match in _CJK_OR_WORD.finditer(text):
        run = match.group(1)
        if run is None:
            token = match.group()
            if token not in stop and not token.isdigit():
                tokens.append(token)
        else:
            tokens.extend(_bigrams(run, stop))
    return tokens


def _bigrams(run: str, stop: frozenset[str]) -> list[str]:
    """The tokens of a CJK run: its overlapping character bigrams, or itself if one character."""
    if len(run) == 1:
        return [] if run in stop else [run]
    return [bigram for bigram in map(str.__add__, run, run[1:]) if bigram not in stop]


def _vietnamese(text: str, stop: frozenset[str]) -> list[str]:
    tokens = []
    for phrase in _VIETNAMESE_PHRASE_BREAK.split(text):
        previous = None  # the last syllable, when it may start a pair
        for syllable in _SYLLABLE.findall(phrase):
            if syllable in stop or syllable.isdigit():
                previous = None
                continue
            if len(syllable) > 1:
                tokens.append(syllable)
            if previous is not None:
                pair = f"{previous}_{syllable}"
                if pair not in stop:
                    tokens.append(pair)
            previous = syllable
    return tokens


def fold(token: str) -> str:
    """The token without the diacritics of its Latin letters ("vtáky" → "vtaky", "cư" → "cu").

    Other scripts are left alone: their marks are letters' vowels (Devanagari), or were already
    stripped (Arabic harakat).
    """
    if token.isascii():
        return token
    return _fold_latin(token)


@lru_cache(maxsize=1 << 16)
def _fold_latin(token: str) -> str:
    if _LATIN_MARKED.search(token) is None:
        return token
    decomposed = unicodedata.normalize("NFD", token.translate(_LATIN_LETTERS))
    return "".join(char for char in decomposed if not unicodedata.combining(char))


def term_weights(tokens: Sequence[str]) -> Counter[str]:
    """Each term's weight in a text: its count, plus ``FOLDED_WEIGHT`` times the count of every
    token that folds to it.

    A query typed without diacritics ("vtaky") then matches a Slovak or Vietnamese page that has
    them ("vtáky"), through the page's folded forms, while the exact spelling still matches
    better: a page that is one word "vtáky" is (1, ½) on (vtáky, vtaky), so its cosine to "vtáky"
    is 0.89 and to "vtaky" 0.45. Folded forms share the exact forms' dimensions rather than a
    separate channel: a word typed without its diacritics *is* the folded form, so the two
    spellings meet without a second dictionary, IDF or LSI space, and texts of plain ASCII
    (English) are left exactly as they were.
    """
    return add_folded(Counter(tokens))


def add_folded(counts: Counter[str], weight: float = FOLDED_WEIGHT) -> Counter[str]:
    """``counts`` (a text's token counts), with ``weight`` times the count of every token added
    to the form it folds to; changed in place. With ``weight`` 1 it is
    ``Counter(with_folded(tokens))``, in the same order, for what costs less: a text's distinct
    words rather than all of them."""
    if "".join(counts).isascii():
        return counts
    # The ASCII test runs in C: a page has a thousand distinct words, and few are not ASCII.
    for token, count in [(t, counts[t]) for t in filterfalse(str.isascii, counts)]:
        form = _fold_latin(token)
        if form != token:
            counts[form] += weight * count
    return counts


def with_folded(tokens: Sequence[str]) -> list[str]:
    """The tokens and the folded forms that differ from them: what a dictionary should hold."""
    if "".join(tokens).isascii():  # nothing to fold, as in any English text
        return list(tokens)
    return [*tokens, *(form for token in tokens if (form := fold(token)) != token)]
