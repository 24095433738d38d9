"""The project's only tokenizer, shared by page scoring, anchor scoring and model training.

Every component that turns text into terms goes through :func:`tokenize`, so that a topic, a page
and an anchor always land in the same vocabulary.
"""

import re
import unicodedata

from gensim.parsing.preprocessing import STOPWORDS


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


# Runs of two or more letters, digits and marks (underscores are replaced by spaces before
# matching): skipping 1-char runs in the regex is cheaper than filtering them afterwards.
_WORD = re.compile(f"[\\w{_bmp_combining_marks()}]{{2,}}")


def tokenize(text: str) -> list[str]:
    """Split ``text`` into lowercase terms, dropping stop words, pure numbers and 1-char tokens.

    NFC normalisation makes decomposed and precomposed accents ("cafe" + U+0301 and "café") the
    same term. Numbers are dropped because years, prices and counters carry no topic but bloat the
    vocabulary; alphanumerics such as "mp3" or "h5n1" are kept.
    """
    text = unicodedata.normalize("NFC", text).lower().replace("_", " ")
    return [
        token for token in _WORD.findall(text) if token not in STOPWORDS and not token.isdigit()
    ]
