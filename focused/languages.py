"""Which language a page or a query is in, as an ISO 639-1 code (``"fa"``, ``"vi"``, ...).

A page declares its language in ``<html lang>`` or the ``Content-Language`` header, and the
declaration is taken when the script of the language detected in its text agrees with it. Site
templates often say ``lang="en"`` on every page, whatever the text: ``en`` is taken only when
the text is plain ASCII or CLD2 does not find most of it reliably in another language.
Otherwise, or when nothing is declared, the text decides, through Google's Compact Language
Detector 2 (``pycld2``): it ships its tables inside the package, knows 80+ languages (Persian,
Vietnamese, Chinese, Japanese, Slovak and Czech apart among them) and reads a page in about
0.1 ms. Only the first ``DETECT_CHARS`` characters are read: more does not change the answer on
a real page.

A query is a few words, too short for statistics, so its script speaks first (Arabic letters
only Persian uses, kana, Han, Hangul, Vietnamese letters), then CLD2 if it is sure, and
otherwise the query's language stays unknown (None): it is then tokenized like an English text,
which matches any page's words in their plain form. ``-a language=xx`` says it outright.
"""

from __future__ import annotations

import re
import unicodedata
from typing import TYPE_CHECKING, NamedTuple

import pycld2
import stopwordsiso

if TYPE_CHECKING:
    from scrapy.http import TextResponse

# Character ranges of the scripts that need more than the plain word pattern (focused.text).
ARABIC_SCRIPT = "\u0600-\u06ff\u0750-\u077f\u08a0-\u08ff\ufb50-\ufdff\ufe70-\ufefc"
# Han (with extension A and compatibility ideographs), hiragana, katakana, halfwidth katakana.
CJK_SCRIPT = "\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f"

# Characters of a page read by the detector.
DETECT_CHARS = 2000
# A text this long (UTF-8 bytes) is in the language of its largest part, even when CLD2 finds
# several; a shorter one only in a language CLD2 is sure of.
PLURALITY_MIN_BYTES = 200
# A page declared English is taken for another language only when CLD2 reliably finds that one
# in more than this share (percent) of a text at least this long (UTF-8 bytes): a quote, a few
# names or a line or two leave it English (CLD2 is sure "My résumé (PDF)" is French).
NOT_ENGLISH_MIN_PERCENT = 50
NOT_ENGLISH_MIN_BYTES = 100
# The script of a query is told from this many characters.
SCRIPT_SAMPLE_CHARS = 1000

_TAG = re.compile(r"\s*([A-Za-z]{2,3})(?:[-_][A-Za-z0-9]{1,8})*\s*")
# Old codes CLD2 and some sites still use, and the three-letter codes (ISO 639-2, both its
# forms, and a few of 639-3) of the languages the tokenizer's stop words and the script rules
# know by their ISO 639-1 code: a page declared lang="eng" was tokenized with no stop words,
# as a language of its own. Filipino (fil, no 639-1 code) is Tagalog's tl, as CLD2 names it
# and as stopwordsiso keys its stop words. Norwegian's two written forms, Bokmål (nb, which
# most Norwegian pages declare) and Nynorsk (nn, also CLD2's name for it), are no, whose stop
# words stopwordsiso has; Moldavian (mo, withdrawn) is Romanian.
_ALIASES = {
    "iw": "he", "in": "id", "ji": "yi", "jw": "jv", "fil": "tl", "nb": "no", "nn": "no",
    "mo": "ro", "mol": "ro",
    "afr": "af", "ara": "ar", "arb": "ar", "bel": "be", "ben": "bn", "bre": "br", "bul": "bg",
    "cat": "ca", "ces": "cs", "cze": "cs", "chi": "zh", "zho": "zh", "cmn": "zh", "dan": "da",
    "deu": "de", "ger": "de", "ell": "el", "gre": "el", "eng": "en", "epo": "eo", "est": "et",
    "eus": "eu", "baq": "eu", "fas": "fa", "per": "fa", "pes": "fa", "fin": "fi", "fra": "fr",
    "fre": "fr", "gle": "ga", "glg": "gl", "guj": "gu", "hau": "ha", "heb": "he", "hin": "hi",
    "hrv": "hr", "hun": "hu", "hye": "hy", "arm": "hy", "ind": "id", "ita": "it", "jpn": "ja",
    "kaz": "kk", "kir": "ky", "kor": "ko", "kur": "ku", "lat": "la", "lav": "lv", "lit": "lt",
    "mar": "mr", "mkd": "mk", "mac": "mk", "mon": "mn", "msa": "ms", "may": "ms", "nep": "ne",
    "nld": "nl", "dut": "nl", "nor": "no", "nob": "no", "nno": "no", "pol": "pl", "por": "pt",
    "pus": "ps", "ron": "ro", "rum": "ro", "rus": "ru", "san": "sa", "slk": "sk", "slo": "sk",
    "slv": "sl", "snd": "sd", "som": "so", "sot": "st", "spa": "es", "swa": "sw", "swe": "sv",
    "tgk": "tg", "tgl": "tl", "tha": "th", "tur": "tr", "uig": "ug", "ukr": "uk", "urd": "ur",
    "vie": "vi", "yid": "yi", "yor": "yo", "zul": "zu",
}  # fmt: skip
# Tags that declare no language: undetermined, several, none (not text), uncoded.
_NO_LANGUAGE = frozenset({"und", "mul", "zxx", "mis"})

_SCRIPTS = {
    "arabic": re.compile(f"[{ARABIC_SCRIPT}]"),
    "cjk": re.compile(f"[{CJK_SCRIPT}]"),
    "hangul": re.compile("[\uac00-\ud7af\u1100-\u11ff]"),
    "cyrillic": re.compile("[\u0400-\u04ff]"),
    "greek": re.compile("[\u0370-\u03ff]"),
    "hebrew": re.compile("[\u0590-\u05ff]"),
    "devanagari": re.compile("[\u0900-\u097f]"),
    "thai": re.compile("[\u0e00-\u0e7f]"),
    "lao": re.compile("[\u0e80-\u0eff]"),
    "myanmar": re.compile("[\u1000-\u109f]"),
    "khmer": re.compile("[\u1780-\u17ff]"),
    "latin": re.compile("[A-Za-z\u00c0-\u024f\u1e00-\u1eff]"),
}
# The script of each language written in another than Latin (the others are Latin).
_LANGUAGE_SCRIPT = {
    **dict.fromkeys(("fa", "ar", "ur", "ps", "ckb", "sd", "ug"), "arabic"),
    **dict.fromkeys(("zh", "ja"), "cjk"),
    "ko": "hangul",
    **dict.fromkeys(("ru", "uk", "bg", "sr", "be", "mk", "kk", "ky", "mn", "tg"), "cyrillic"),
    "el": "greek",
    **dict.fromkeys(("he", "yi"), "hebrew"),
    **dict.fromkeys(("hi", "mr", "ne", "sa"), "devanagari"),
    "th": "thai",
    "lo": "lao",
    "my": "myanmar",
    "km": "khmer",
}
_LETTER = re.compile(r"[^\W\d_]")
# Letters that give a short text's language away (Persian's: unless the detector names
# another language of Arabic script).
_PERSIAN_LETTERS = re.compile("[\u067e\u0686\u0698\u06af\u06a9\u06cc]")  # پ چ ژ گ ک ی
_KANA = re.compile("[\u3040-\u30ff\u31f0-\u31ff\uff66-\uff9f]")
# ă đ ơ ư and the tone-marked vowels of Latin Extended Additional: Vietnamese writes them, and
# few other languages in Latin letters do. Not â, ê and ô: Slovak (kôň), French (forêt) and
# Portuguese have them too, and an English query may (Côte d'Ivoire); those are left to the
# detector. Romanian shares ă ("păsări migratoare"), Yoruba and Igbo ẹ ọ ị ụ ("àwọn ẹyẹ"): a
# query with these letters is Vietnamese unless the detector is sure of another language (it
# took none of 30 Vietnamese queries for one), or the query has a letter Vietnamese never
# writes: Romanian's î ș ț (ş ţ as it is often typed), Yoruba's ṣ.
_VIETNAMESE_LETTERS = re.compile("[ăđơưĂĐƠƯ\u1ea0-\u1ef9]")
_NOT_VIETNAMESE_LETTERS = re.compile("[îșțşţṣÎȘȚŞŢṢ]")


def language_code(tag: str | None) -> str | None:
    """The language of a tag (``"fa-IR"`` → ``"fa"``, ``"zh_Hant"`` → ``"zh"``), or None."""
    match = _TAG.fullmatch(tag or "")
    if match is None:
        return None
    code = match.group(1).lower()
    return None if code in _NO_LANGUAGE else _ALIASES.get(code, code)


def known_languages() -> frozenset[str]:
    """Codes the tokenizer has stop words or a script rule for (``-a language=`` accepts these):
    Lao, Khmer and Myanmar have no stop words, but their bigrams are the README's."""
    return frozenset({"en", *stopwordsiso.langs(), *_LANGUAGE_SCRIPT})


class _Finding(NamedTuple):
    """What CLD2 reads in the beginning of a text."""

    language: str | None  # of the largest share of the text; None when CLD2 finds none
    percent: int  # that share of the text's bytes
    reliable: bool  # CLD2's own judgement
    size: int  # bytes read


def _cld2(text: str) -> _Finding:
    # CLD2 knows composed letters only: a page written decomposed (Vietnamese often is: "ư"
    # as "u" and a combining horn) went undetected. A lone surrogate (from a bad page) cannot
    # be UTF-8: replaced rather than fatal.
    sample = unicodedata.normalize("NFC", text[:DETECT_CHARS]).encode("utf-8", "replace")
    try:
        reliable, _, found = pycld2.detect(sample)
    except pycld2.error:  # CLD2 refuses a few control characters
        return _Finding(None, 0, False, len(sample))
    _, code, percent, _ = found[0]
    return _Finding(language_code(code) if code != "un" else None, percent, reliable, len(sample))


def _trusted(finding: _Finding) -> str | None:
    # A page that mixes languages (links listed in others) is not "reliable" to CLD2, yet the
    # language of the largest share of its text is its language. A short text's guess is not.
    sure = finding.reliable or finding.size >= PLURALITY_MIN_BYTES
    return finding.language if sure else None


def detect(text: str) -> str | None:
    """The language CLD2 finds in most of the text, or None when it finds none it trusts."""
    return _trusted(_cld2(text))


def dominant_script(text: str) -> str | None:
    """The script most letters of the text's beginning are written in (for short texts)."""
    sample = text[:SCRIPT_SAMPLE_CHARS]
    counts = {name: len(pattern.findall(sample)) for name, pattern in _SCRIPTS.items()}
    script = max(counts, key=counts.__getitem__)
    return script if counts[script] else None


def no_latin_letters(text: str) -> bool:
    """True when the text has letters and none of them is Latin: whatever its language (a
    short query in Cyrillic or Devanagari the detector cannot name), it is not English."""
    return _SCRIPTS["latin"].search(text) is None and _LETTER.search(text) is not None


def page_language(declared: list[str | None], text: str) -> str | None:
    """A page's language: the first declared tag whose script the text's agrees with, else the
    detected one.

    ``declared`` lists ``<html lang>`` and then ``Content-Language`` (either may be None; a
    header naming several languages is split by the caller). The declaration is checked against
    the script of the language CLD2 finds, so a Slovak page declared ``sk`` that CLD2 takes for
    Czech stays Slovak, while ``lang="en"`` on a Persian page does not. ``en``, which templates
    put on every page, is not taken either when CLD2 reliably finds most of the text in another
    language (Vietnamese, German, Slovak...); a few names or a quote in another leave it English.
    A page of plain ASCII declared in a Latin-script language (most English pages) is not read
    at all.
    """
    codes = [code for code in map(language_code, declared) if code]
    if codes and _script_of(codes[0]) == "latin" and text[:DETECT_CHARS].isascii():
        return codes[0]
    finding = _cld2(text)
    detected = _trusted(finding)
    not_english = (
        finding.reliable
        and finding.percent > NOT_ENGLISH_MIN_PERCENT
        and finding.size >= NOT_ENGLISH_MIN_BYTES
        and detected not in (None, "en")
    )
    for code in codes:
        if code == "en" and not_english:
            continue
        if detected is None or _script_of(code) == _script_of(detected):
            return code
    return detected


def declared_languages(response: TextResponse) -> list[str | None]:
    """``page_language``'s ``declared`` of a fetched page: ``<html lang>`` (or ``xml:lang``),
    then each language of the Content-Language header."""
    header = response.headers.get(b"Content-Language", b"").decode("latin-1")
    return [
        response.xpath("/html/@lang").get() or response.xpath("/html/@xml:lang").get(),
        *header.split(","),
    ]


def _script_of(language: str) -> str:
    return _LANGUAGE_SCRIPT.get(language, "latin")


def query_language(query: str, language: str | None = None) -> str | None:
    """The query's language: ``language`` when given, else its letters', else CLD2's if sure."""
    if language:
        return language_code(language)
    # A query typed or pasted decomposed (macOS file names, some Vietnamese input methods) has
    # "u" and a combining horn where the letters below look for "ư"; the tokenizer composes too.
    query = unicodedata.normalize("NFC", query)
    script = dominant_script(query)
    if script == "arabic":
        # Urdu (and Pashto, Sindhi) write Persian's letters too: the detector, when sure of an
        # Arabic-script language, knows them apart (it never took a Persian query for one).
        detected = detect(query)
        if detected is not None and _script_of(detected) == "arabic":
            return detected
        return "fa" if _PERSIAN_LETTERS.search(query) else detected or "ar"
    if script == "cjk":
        return "ja" if _KANA.search(query) else "zh"
    if script == "hangul":
        return "ko"
    detected = detect(query)
    if (
        script == "latin"
        and detected is None
        and _VIETNAMESE_LETTERS.search(query)
        and not _NOT_VIETNAMESE_LETTERS.search(query)
    ):
        return "vi"
    return detected
