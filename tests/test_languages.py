"""Relevance beyond English: tokenization, folding, detection and ranking per language, and a
crawl of a loopback site that mixes Persian, English, Vietnamese, Chinese and Slovak pages.

The texts are short sentences written for these tests (about migratory birds, and about a
stock market as the off-topic subject).
"""

# Persian, Vietnamese and Slovak letters here are meant, not look-alikes of Latin ones:
# ruff: noqa: RUF001

from __future__ import annotations

import re
import sqlite3
import threading
import unicodedata
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from focused import languages
from focused import text as text_module
from focused.arguments import parse_arguments
from focused.errors import ConfigError
from focused.languages import (
    DETECT_CHARS,
    detect,
    language_code,
    page_language,
    query_language,
)
from focused.relevance import RelevanceModel
from focused.sqlitestore import SqliteStore
from focused.storage import PAGE_FIELDS
from focused.text import add_folded, fold, normalize, term_weights, tokenize, with_folded
from tests.conftest import SAMPLE, run_crawl

# -- texts -----------------------------------------------------------------------------------

TEXTS = {
    "fa": {
        "query": "پرندگان مهاجر تالاب",
        "on": "پرندگان مهاجر هر سال در پاییز از سیبری به تالاب‌های شمال ایران می‌آیند. درناها، "
        "غازها و اردک‌ها زمستان را در این تالاب‌ها می‌گذرانند و در بهار برای جوجه‌آوری "
        "به شمال بازمی‌گردند.",
        "off": "بازار بورس تهران امروز با افت شاخص کل همراه بود. سهام شرکت‌های خودروسازی و "
        "بانک‌ها بیشترین کاهش قیمت را داشتند و معامله‌گران منتظر تصمیم بانک مرکزی هستند.",
    },
    "vi": {
        "query": "chim di cư",
        "on": "Mỗi mùa thu, hàng triệu con chim di cư bay từ phương bắc xuống đồng bằng sông "
        "Cửu Long để tránh rét. Các loài cò, vạc và chim nước làm tổ trong rừng tràm.",
        "off": "Giá vàng trong nước hôm nay tăng mạnh theo thị trường thế giới. Ngân hàng nhà "
        "nước giữ nguyên lãi suất điều hành và tỷ giá đô la ổn định.",
    },
    "zh": {
        "query": "候鸟迁徙湿地",
        "on": "每年秋天，成千上万的候鸟从西伯利亚飞往南方的湿地过冬。鹤、雁和野鸭在湖泊中觅食，"
        "春天再飞回北方繁殖。",
        "off": "今天上海股市小幅下跌，银行和汽车板块领跌。投资者正在等待中央银行关于利率的决定。",
    },
    "sk": {
        "query": "sťahovavé vtáky hniezda",
        "on": "Každú jeseň odlietajú sťahovavé vtáky z Európy do Afriky. Bociany, lastovičky a "
        "žeriavy prelietajú tisíce kilometrov a na jar sa vracajú do rovnakých hniezda.",
        "off": "Bratislavská burza dnes zaznamenala pokles akcií bánk a automobiliek. Investori "
        "čakajú na rozhodnutie centrálnej banky o úrokových sadzbách.",
    },
    "en": {
        "query": "migratory birds wetlands",
        "on": "Every autumn millions of migratory birds fly south from Siberia to winter in "
        "warm wetlands. Cranes, geese and ducks feed in the lakes and return north to breed.",
        "off": "Shares fell on the stock exchange today as banks and carmakers led the decline. "
        "Traders are waiting for the central bank's decision on interest rates.",
    },
}


# -- tokenization, pinned ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("language", "text", "tokens"),
    [
        (
            "fa",
            "پرندگان مهاجر هر سال در پاییز از سیبری به تالاب‌های شمال ایران می‌آیند.",
            ["پرندگان", "مهاجر", "سال", "پاییز", "سیبری", "تالاب", "شمال", "ایران"],
        ),
        (
            "vi",
            "Mỗi mùa thu, chim di cư bay về đồng bằng sông Cửu Long để tránh rét.",
            # syllables, and the pairs of adjacent syllables that are not stop words
            [
                *("mùa", "thu", "mùa_thu", "chim", "di", "chim_di", "cư", "di_cư", "bay"),
                *("cư_bay", "đồng", "sông", "cửu", "sông_cửu", "long", "cửu_long", "tránh"),
                *("rét", "tránh_rét"),
            ],
        ),
        (
            "zh",
            "每年秋天，候鸟从西伯利亚飞往南方的湿地过冬。",
            [
                *("每年", "年秋", "秋天", "候鸟", "鸟从", "从西", "西伯", "伯利", "利亚"),
                *("亚飞", "飞往", "往南", "南方", "方的", "的湿", "湿地", "地过", "过冬"),
            ],
        ),
        # bigrams of code points, the stop words พบ and มา dropped
        ("th", "นกอพยพบินมา", ["นก", "กอ", "อพ", "พย", "ยพ", "บิ", "ิน", "นม"]),
        (
            "sk",
            "Každú jeseň odlietajú sťahovavé vtáky z Európy do Afriky.",
            ["jeseň", "odlietajú", "sťahovavé", "vtáky", "európy", "afriky"],
        ),
        (
            "en",
            "Every autumn, migratory birds fly from Siberia to the wetlands of the south.",
            ["autumn", "migratory", "birds", "fly", "siberia", "wetlands", "south"],
        ),
    ],
)
def test_tokenization_is_pinned(language: str, text: str, tokens: list[str]) -> None:
    assert tokenize(text, language) == tokens


def test_english_is_tokenized_as_before() -> None:
    text = "The 2 Swallows_and_SWIFTS of 1999 flew over MP3 players, a x!"
    expected = ["swallows", "swifts", "flew", "mp3", "players"]
    assert tokenize(text) == tokenize(text, "en") == expected
    assert term_weights(expected) == Counter(expected)  # ASCII: no folded forms


def test_cjk_runs_and_words_of_other_scripts_mix() -> None:
    assert tokenize("用Python编程 鸟", "zh") == ["python", "编程", "鸟"]
    assert tokenize("渡り鳥", "ja") == ["渡り", "り鳥"]
    assert tokenize("ＡＢＣ全角") == ["abc", "全角"]  # NFKC: fullwidth letters are letters
    # A lone character is a one-character run, also where no other word is beyond ASCII
    assert tokenize("the zheng (箏) and the qin (琴)") == ["zheng", "箏", "qin", "琴"]


def test_vietnamese_pairs_stop_at_punctuation_and_stop_words() -> None:
    pairs = ["chim", "di", "chim_di", "cư", "di_cư", "cá", "hồi", "cá_hồi"]
    assert tokenize("chim di cư. Cá hồi", "vi") == pairs  # no "cư_cá" across the full stop
    # "của" is a stop word: no pair crosses it
    assert tokenize("tổ của chim", "vi") == ["tổ", "chim"]


def _sample_texts() -> list[str]:
    """Real pages (whole, and line by line: most lines are ASCII) and every language's texts."""
    pages = [path.read_text() for path in sorted((SAMPLE / "plaintext_articles").glob("*.txt"))]
    return [
        *pages,
        *(line for page in pages for line in page.splitlines()),
        *(text for language in TEXTS.values() for text in language.values()),
    ]


# What the fast paths must agree with: characters no pattern or split() treats alike.
TRICKY_TEXTS = [
    "bird–watching 1990—2000 °c 4°c • ±3 “quoted” l’homme aujourd’hui café é – ²³ ١٢٣ ۴۵",
    "ℌello ＡＢＣ ﬁne ǅ ß \u0301abc e\u0301 ①② x\u00a0yy\u2028zz\x85ww \x1cab\x1fcd \ud800ok",
    "渡り鳥は季節によって移動する。ab\u3099c が\u3099 か\u3099ki",
    "每年秋天，成千上万的候鸟飞往南方的湿地过冬。Python3 用 2024年 ok",
    "ab候鸟cd 候 x候y 12候34 é候—候 ｶﾞｲﾄﾞ ﾊﾟﾝ ﾞ " + "bird words around one run " * 10,
    "bird words around one run " * 10 + "ab\u3099\u309a候鸟 x",  # a word takes the kana marks in
    "كتاب‌ها مي‌آيند ١٢٣ ۴۵ test候 پرندگان",
    "",
]


def test_word_runs_are_what_the_word_pattern_finds() -> None:
    """_runs cuts a text where the plain class of word characters ends, on real pages and on
    characters that are not ASCII, ASCII, white space or word characters alike."""
    plain = re.compile(f"[\\w{text_module._MARKS}]{{2,}}")
    texts = [normalize(text) for text in [*_sample_texts(), *TRICKY_TEXTS]]
    assert sum(not text.isascii() for text in texts) > 100
    for text in texts:
        words = plain.findall(text)
        assert text_module._WORD.findall(text) == words
        runs = text_module._runs(text, text_module._beyond_ascii(text))
        assert [word for word in runs if len(word) > 1] == words


def _tokenize_by_pattern(text: str, language: str | None) -> list[str]:
    """tokenize as it was first written: the pattern on the whole text, one word at a time."""
    text = unicodedata.normalize("NFC", text).lower().replace("_", " ")
    stop = text_module.stopwords(language)
    if text_module._SPECIAL.search(text):
        text = text_module._normalize_scripts(text)
        if text_module._CJK_RUN.search(text) is not None:
            return text_module._with_cjk_bigrams_by_match(text, stop)
    if language == "vi":
        return text_module._vietnamese(text, stop)
    return [
        word for word in text_module._WORD.findall(text) if word not in stop and not word.isdigit()
    ]


@pytest.mark.parametrize("language", [None, "en", "fa", "zh", "ja", "vi", "sk", "fr"])
def test_tokenize_gives_the_tokens_of_the_plain_pattern(language: str | None) -> None:
    """Same tokens in the same order (SimHash shingles read the order) as the straightforward
    tokenizer, on real pages, pages that name a few CJK characters, and CJK pages."""
    texts = [*_sample_texts(), *TRICKY_TEXTS]
    pages = [path.read_text() for path in sorted((SAMPLE / "plaintext_articles").glob("*.txt"))]
    texts += [page + " 候鸟 " + page[:2000] + " 渡り鳥" for page in pages[:20]]
    if language in ("zh", "ja"):
        texts += [TRICKY_TEXTS[2] * 50, TRICKY_TEXTS[3] * 50]
    assert sum(bool(text_module._CJK_RUN.search(text)) for text in texts) >= 20
    for text in texts:
        assert tokenize(text, language) == _tokenize_by_pattern(text, language)


def test_arabic_forms_unified_run_by_run_as_in_one_translation() -> None:
    texts = [
        TEXTS["fa"]["on"],
        TEXTS["fa"]["off"],
        "Tehran (Persian: تهران‎, Arabic كتاب‌هاي فارسي ۱۴۰۲ ٢٠٢٣ كِتابِ مدرسة‍ کـــتاب) – ok",
    ]
    for text in texts:
        nfkc = unicodedata.normalize("NFKC", text)
        assert text_module._normalize_scripts(text) == nfkc.translate(text_module._ARABIC_FORMS)


# -- folding rules ---------------------------------------------------------------------------


def test_persian_letter_forms_diacritics_zwnj_and_digits() -> None:
    persian = tokenize("کتاب‌های فارسی", "fa")
    assert tokenize("كتاب‌هاي فارسي", "fa") == persian  # Arabic kaf and yeh
    assert tokenize("كِتابِ فارسیٌ", "fa") == ["کتاب", "فارسی"]  # harakat stripped
    assert tokenize("کـــتاب", "fa") == ["کتاب"]  # tatweel
    assert tokenize("کتاب ها", "fa") == tokenize("کتاب‌ها", "fa") == ["کتاب"]  # ZWNJ = space
    assert tokenize("مدرسة", "fa") == tokenize("مدرسه", "fa") == ["مدرسه"]  # teh marbuta
    assert tokenize("سال ۱۴۰۲ و ٢٠٢٣ ب۲", "fa") == ["سال", "ب2"]  # digits made ASCII
    assert tokenize("إيران") == tokenize("ایران")  # whatever the language: it is the script


@pytest.mark.parametrize(
    ("token", "folded"),
    [
        ("vtáky", "vtaky"),
        ("sťahovavé", "stahovave"),
        ("ľudia", "ludia"),
        ("đường", "duong"),
        ("cửu_long", "cuu_long"),
        ("straße", "straße"),  # ß is a letter, not a letter with a diacritic
        ("birds", "birds"),
        ("हिन्दी", "हिन्दी"),  # Devanagari vowel signs are not diacritics
        ("کتاب", "کتاب"),
    ],
)
def test_fold(token: str, folded: str) -> None:
    assert fold(token) == folded


def test_folded_forms_weigh_less_than_exact_ones() -> None:
    assert term_weights(["vtáky", "vtáky", "vtaky", "les"]) == {
        "vtáky": 2,
        "vtaky": 1 + 0.5 * 2,
        "les": 1,
    }
    assert with_folded(["vtáky", "les", "cư"]) == ["vtáky", "les", "cư", "vtaky", "cu"]


@pytest.mark.parametrize(
    "tokens",
    [[], ["les", "les"], ["vtáky", "les", "cư", "vtaky", "vtáky", "cu", "cư", "ñandú", "nandu"]],
)
def test_folded_counts_with_weight_one_are_the_counts_of_with_folded(tokens: list[str]) -> None:
    """A refit counts a page's words once for its dictionary and its tf-idf rows."""
    counts = add_folded(Counter(tokens), 1)
    assert list(counts.items()) == list(Counter(with_folded(tokens)).items())
    assert add_folded(Counter(tokens)) == term_weights(tokens)


# -- ranking ---------------------------------------------------------------------------------


@pytest.mark.parametrize("language", sorted(TEXTS))
def test_on_topic_page_ranks_above_off_topic_page(language: str) -> None:
    texts = TEXTS[language]
    assert query_language(texts["query"]) == language
    model = RelevanceModel(texts["query"], language=language)
    on = model.score(texts["on"], language)
    off = model.score(texts["off"], language)
    assert on.combined > 0.1
    assert on.combined > off.combined
    assert on.combined > max(
        model.score(TEXTS[other]["on"], other).combined for other in TEXTS if other != language
    )


@pytest.mark.parametrize(
    ("language", "plain"), [("sk", "stahovave vtaky hniezda"), ("vi", "chim di cu")]
)
def test_query_without_diacritics_matches_with_a_lower_weight(language: str, plain: str) -> None:
    texts = TEXTS[language]
    exact = RelevanceModel(texts["query"], language=language).score(texts["on"], language)
    folded_model = RelevanceModel(plain, language=language)
    folded = folded_model.score(texts["on"], language)
    assert folded.combined > folded_model.score(texts["off"], language).combined
    assert 0.0 < folded.combined < exact.combined
    # and a page written without diacritics matches the query that has them
    model = RelevanceModel(texts["query"], language=language)
    assert model.score(fold(texts["on"].lower()), language).combined > 0.0


# Query ("migratory birds", "birds"), a page on it and one on the stock market, in languages
# written without spaces between words.
UNSPACED = {
    "th": (
        "นกอพยพ",
        "ทุกฤดูหนาว นกอพยพหลายล้านตัวบินจากไซบีเรียมายังพื้นที่ชุ่มน้ำในประเทศไทย",
        "ตลาดหุ้นไทยวันนี้ปรับตัวลดลง หุ้นกลุ่มธนาคารและยานยนต์นำตลาดลง",
    ),
    "lo": (
        "ນົກອົບພະຍົບ",
        "ທຸກໆລະດູໜາວ ນົກອົບພະຍົບຫຼາຍລ້ານໂຕບິນມາຍັງເຂດດິນທາມໃນປະເທດລາວ",
        "ຕະຫຼາດຫຼັກຊັບມື້ນີ້ຫຼຸດລົງ ທະນາຄານແລະບໍລິສັດລົດນໍາພາການຫຼຸດລົງ",
    ),
    "km": (
        "បក្សីចំណាកស្រុក",
        "រៀងរាល់រដូវរងា បក្សីចំណាកស្រុករាប់លានក្បាលហើរមកកាន់តំបន់ដីសើមនៃប្រទេសកម្ពុជា។",
        "ផ្សារហ៊ុនកម្ពុជាថ្ងៃនេះធ្លាក់ចុះ ធនាគារនិងក្រុមហ៊ុនរថយន្តនាំមុខការធ្លាក់ចុះ។",
    ),
    "my": (
        "ငှက်",
        "ဆောင်းရာသီတိုင်း ငှက်များ သိန်းချီ မြန်မာနိုင်ငံ၏ စိုစွတ်သောဒေသများသို့ ပျံသန်းလာကြသည်။",
        "ယနေ့ စတော့ဈေးကွက် ကျဆင်းခဲ့သည်။ ဘဏ်များနှင့် ကားကုမ္ပဏီများ ဦးဆောင်ကျဆင်းသည်။",
    ),
}


@pytest.mark.parametrize("language", sorted(UNSPACED))
def test_languages_written_without_spaces_are_cut_into_bigrams(language: str) -> None:
    """Cut only at spaces, a Thai (Lao, Khmer, Myanmar) phrase was one token, which no query
    matched: every page of these languages scored 0. Their runs are cut into bigrams, as CJK's."""
    query, on, off = UNSPACED[language]
    assert query_language(query) == language
    assert set(tokenize(query, language)) <= set(tokenize(on, language))
    model = RelevanceModel(query, language=language)
    assert model.score(on, language).combined > max(0.1, model.score(off, language).combined)


def test_korean_words_are_found_behind_their_particles_and_endings() -> None:
    """Korean words take particles and endings ("철새가", "이동한다"): cut only at spaces, a
    query's bare words matched none of them, and the page on the query scored 0."""
    query = "철새 이동"  # "migratory birds", "migration"
    on = "매년 가을 수많은 철새가 시베리아에서 남쪽의 습지로 이동한다. 두루미와 기러기가 찾아온다."
    off = "오늘 주식 시장은 은행과 자동차 업종이 하락을 주도했다. 투자자들은 금리를 기다린다."
    assert query_language(query) == "ko"
    assert set(tokenize(query, "ko")) <= set(tokenize(on, "ko"))
    model = RelevanceModel(query, language="ko")
    assert model.score(on, "ko").combined > max(0.1, model.score(off, "ko").combined)


def test_vietnamese_syllable_pairs_tell_words_apart() -> None:
    """'di cư' (migrate) is a word; 'di' and 'cư' apart are not it."""
    model = RelevanceModel("chim di cư", language="vi")
    together = model.score("Đàn chim di cư bay qua sông.", "vi").combined
    apart = model.score("Đàn chim bay qua sông, di chuyển nơi cư trú.", "vi").combined
    assert together > apart


def test_fitted_model_keeps_the_ranking_and_its_language(tmp_path) -> None:
    model = RelevanceModel(TEXTS["fa"]["query"], language="fa", num_topics=5)
    for language, texts in TEXTS.items():
        for _ in range(3):
            model.observe(texts["on"], language)
            model.observe(texts["off"], language)
    model.refit()
    fa = TEXTS["fa"]
    assert model.score(fa["on"], "fa").combined > model.score(fa["off"], "fa").combined
    model.save(tmp_path / "model")
    loaded = RelevanceModel.load(tmp_path / "model")
    assert loaded.language == "fa"
    assert loaded.score(fa["on"], "fa") == model.score(fa["on"], "fa")
    assert loaded.score_texts([fa["on"]], "fa") == model.score_texts([fa["on"]], "fa")


# -- language detection ----------------------------------------------------------------------


@pytest.mark.parametrize("language", sorted(TEXTS))
def test_detect_each_language(language: str) -> None:
    assert detect(TEXTS[language]["on"]) == language
    assert detect(TEXTS[language]["off"]) == language
    assert detect(unicodedata.normalize("NFD", TEXTS[language]["on"])) == language  # decomposed


def test_detect_tells_slovak_from_czech() -> None:
    czech = "Každý podzim odlétají stěhovaví ptáci z Evropy do Afriky a na jaře se vracejí."
    assert detect(czech) == "cs"
    assert detect(TEXTS["sk"]["on"]) == "sk"


def test_detect_unsure_is_none() -> None:
    assert detect("") is None
    assert detect("OK 42") is None
    assert detect("\ud800 broken") is None


@pytest.mark.parametrize(
    ("tag", "code"),
    [
        *[("fa-IR", "fa"), ("zh_Hant_TW", "zh"), (" VI ", "vi"), ("iw", "he"), ("", None)],
        ("1x", None),
        # three-letter codes, as some sites write them, and the tags that name no language
        *[("eng", "en"), ("fre-FR", "fr"), ("deu", "de"), ("und", None), ("zxx", None)],
        # Tagalog's stop words are keyed tl, the code CLD2 gives it; Filipino is the same
        *[("tl", "tl"), ("fil", "tl")],
        # Norwegian's written forms (Bokmål, Nynorsk) and Moldavian: Norwegian's and Romanian's
        *[("nb", "no"), ("nb-NO", "no"), ("nn", "no"), ("nob", "no"), ("mo", "ro"), ("mol", "ro")],
    ],
)
def test_language_code(tag: str, code: str | None) -> None:
    assert language_code(tag) == code


def test_page_language_prefers_a_declaration_its_text_agrees_with() -> None:
    fa, sk = TEXTS["fa"]["on"], TEXTS["sk"]["on"]
    assert page_language(["fa-IR", None], fa) == "fa"
    assert page_language([None, "sk"], sk) == "sk"  # Content-Language
    assert page_language([None, "de", " sk"], sk) == "de"  # the header's first (same script)
    assert page_language(["en"], fa) == "fa"  # a template's lang="en" on a Persian page
    assert page_language([None], TEXTS["vi"]["on"]) == "vi"  # nothing declared: detected
    assert page_language([], "") is None


# Birds in German: a Latin-script language none of TEXTS is.
DE_BIRDS = (
    "Jedes Jahr im Herbst fliegen Millionen Zugvögel aus Nordeuropa nach Süden. Kraniche, Gänse "
    "und Störche rasten an den Seen und Feuchtgebieten, bevor sie weiter nach Afrika ziehen."
)


def test_a_page_declared_in_a_three_letter_code_is_tokenized_in_its_language() -> None:
    """lang="eng" (or "und") made an English page a language of its own, with no stop words:
    "the", "is" and "of" counted, and it scored 0.295 where the same page declared "en" scored
    0.471."""
    text = TEXTS["en"]["on"]
    model = RelevanceModel(TEXTS["en"]["query"], language="en")
    declared_en = model.score(text, page_language(["en"], text)).combined
    for tag in ("eng", "und", "mul"):
        language = page_language([tag], text)
        assert language == "en", tag
        assert model.score(text, language).combined == declared_en
    tagalog = "Ang mga ibon ay lumilipad sa himpapawid at gumagawa ng pugad sa mga puno."
    assert "ang" not in tokenize(tagalog, page_language(["fil"], tagalog))  # a stop word


# Birds in Norwegian, in Bokmål and in Nynorsk (which CLD2 names nn).
NORWEGIAN_BIRDS = {
    "nb": "Hver høst flyr millioner av trekkfugler fra Nord-Europa sørover. Tranene, gjessene og "
    "storkene hviler ved innsjøene og våtmarkene før de fortsetter mot Afrika.",
    "nn": "Kvart haust flyg millionar av trekkfuglar frå Nord-Europa sørover. Tranene, gjæsene og "
    "storkane kviler ved innsjøane og våtmarkene før dei held fram mot Afrika.",
}


@pytest.mark.parametrize("written", sorted(NORWEGIAN_BIRDS))
def test_a_norwegian_page_is_tokenized_with_norwegian_stop_words(written: str) -> None:
    """lang="nb" (most Norwegian pages declare it) and CLD2's nn were languages of their own,
    with no stop words: "og", "av" and "ved" counted as words of the page."""
    text = NORWEGIAN_BIRDS[written]
    assert page_language([written], text) == page_language([None], text) == "no"
    assert "og" not in tokenize(text, page_language([written], text))


def test_page_language_does_not_believe_a_template_english_declaration() -> None:
    """lang="en" on a page in another Latin-script language (where the scripts agree): the text
    decides, else it would be tokenized and scored as English."""
    vi, sk = TEXTS["vi"]["on"], TEXTS["sk"]["on"]
    assert page_language(["en"], vi) == "vi"
    assert page_language(["en-US"], sk) == "sk"
    assert page_language(["en"], DE_BIRDS) == "de"
    assert page_language(["en", "vi-VN"], vi) == "vi"  # the header's declaration agrees
    assert page_language(["en", "de"], sk) == "de"  # any other declaration is still taken
    # ... as before: a Slovak page declared sk that CLD2 takes for Czech stays Slovak
    czech_like = "Každý podzim odlétají stěhovaví ptáci z Evropy do Afriky a na jaře se vracejí."
    assert detect(czech_like) == "cs"
    assert page_language(["sk"], czech_like) == "sk"


def test_page_language_keeps_english_with_a_few_words_of_another() -> None:
    """A page declared en whose text is not ASCII (names, a quote, a shorter part in another
    language) is read by CLD2, and stays English."""
    en = f"{TEXTS['en']['on']} {TEXTS['en']['off']}"
    names = f"José Martí and Antonín Dvořák met in Zürich, where Søren Kierkegaard studied. {en}"
    quote = f"{en} As Goethe wrote: „Über allen Gipfeln ist Ruh, in allen Wipfeln spürest du kaum"
    quote += ' einen Hauch." The motto « Liberté, égalité, fraternité » is on the town hall.'
    short = ["Welcome to Café Müller, home of the best crêpes in town.", "My résumé (PDF)"]
    mixed = f"{TEXTS['en']['on']} {TEXTS['en']['off']} {DE_BIRDS}"  # English the larger part
    for text in [names, quote, *short, mixed, f"{TEXTS['en']['on']} {TEXTS['vi']['on']}"]:
        assert not text[:DETECT_CHARS].isascii()
        assert page_language(["en"], text) == "en", text
    assert page_language([None], mixed) == "en"
    assert page_language([None], f"{DE_BIRDS} {DE_BIRDS} {TEXTS['en']['on']}") == "de"


def test_page_language_does_not_read_an_ascii_page_declared_in_a_latin_language(
    monkeypatch,
) -> None:
    """The fast path that keeps English crawls cheap: no CLD2 call for a plain ASCII page."""

    def no_detector(sample: bytes) -> None:
        raise AssertionError("CLD2 called")

    monkeypatch.setattr(languages.pycld2, "detect", no_detector)
    assert page_language(["en"], TEXTS["en"]["on"]) == "en"
    assert page_language(["de"], "Zugvoegel fliegen im Herbst nach Sueden.") == "de"
    with pytest.raises(AssertionError, match="CLD2"):
        page_language(["en"], TEXTS["vi"]["on"])


@pytest.mark.parametrize(
    ("query", "language"),
    [
        ("پرندگان", "fa"),
        ("كتاب", "ar"),  # no letter only Persian has, and too short for the detector
        # Urdu writes Persian's letters too: these were taken for Persian, its stop words kept.
        ("ہجرت کرنے والے پرندے", "ur"),
        ("پرندوں کی نقل مکانی", "ur"),
        ("مهاجرت پرندگان در پاییز", "fa"),
        ("候鸟", "zh"),
        ("渡り鳥", "ja"),
        ("새", "ko"),
        ("chim di cư", "vi"),
        (unicodedata.normalize("NFD", "chim di cư"), "vi"),  # typed decomposed
        ("sťahovavé vtáky hniezda", "sk"),
        ("birds", None),  # a word or two of plain Latin letters: unknown
        # â, ê and ô are not only Vietnamese: these were taken for it.
        ("pôda a hnojenie pôdy", "sk"),
        ("hôtel château forêt", "fr"),
        ("birds of Côte d'Ivoire", "en"),
        ("crêpe recipes", "en"),
        ("côn trùng", "vi"),  # only â, ê or ô, and Latin-1 tone marks: the detector tells
        ("tên lửa", "vi"),
        # ă is Romanian too: these were taken for Vietnamese, cut into syllable pairs.
        ("păsări migratoare", "ro"),
        ("vânătoare de păsări", "ro"),
        ("țară", None),  # ț is no Vietnamese letter, and the detector is unsure
        ("ăn chay", "vi"),  # ă, the detector unsure: Vietnamese, as before
        # Yoruba and Igbo write ẹ ọ ị ụ too: these were taken for Vietnamese.
        ("ìrìn àjò àwọn ẹyẹ", "yo"),
        ("àwọn ẹyẹ tí ń ṣí lọ", "yo"),
        ("ụmụ nnụnụ na-efe efe", "ig"),
        ("tăng trưởng", "vi"),
    ],
)
def test_query_language_from_script(query: str, language: str | None) -> None:
    assert query_language(query) == language


def test_query_language_argument() -> None:
    base = {"query": "chim di cu", "seeds": "http://127.0.0.1:1/"}
    assert parse_arguments(base).language is None
    assert parse_arguments({**base, "language": "vi-VN"}).language == "vi"
    assert query_language("chim di cu", "vi") == "vi"
    with pytest.raises(ConfigError, match="language='xx'"):
        parse_arguments({**base, "language": "xx"})
    # tl, among the codes the refusal lists, was refused (taken for fil, which has no stop words)
    assert parse_arguments({**base, "language": "tl"}).language == "tl"
    assert parse_arguments({**base, "language": "fil"}).language == "tl"
    with pytest.raises(ConfigError, match="language="):
        parse_arguments({**base, "language": "farsi!"})


def test_the_languages_of_the_script_rules_are_accepted_and_checked() -> None:
    # The README's bigram languages without stop words (Lao, Myanmar, Khmer) were refused.
    base = {"query": "ນົກ ອົບພະຍົບ", "seeds": "http://127.0.0.1:1/"}
    for code in ("lo", "my", "km", "th"):
        assert parse_arguments({**base, "language": code}).language == code
    # Their declarations are checked against the text's script, as Thai's are.
    assert page_language(["lo"], TEXTS["en"]["on"]) == page_language(["th"], TEXTS["en"]["on"])


# -- the page record -------------------------------------------------------------------------


def test_an_older_sqlite_file_gains_the_language_column(tmp_path) -> None:
    path = tmp_path / "old.sqlite3"
    conn = sqlite3.connect(path)
    columns = ", ".join(name for name in PAGE_FIELDS if name != "language")
    conn.execute(f"CREATE TABLE pages ({columns}, UNIQUE (crawl_id, url))")
    conn.execute("INSERT INTO pages (crawl_id, url, title) VALUES ('c', 'http://a/', 'old')")
    conn.commit()
    conn.close()
    store = SqliteStore(path)
    try:
        store.save_pages([{"crawl_id": "c", "url": "http://b/", "language": "fa"}])
        languages = {page["url"]: page["language"] for page in store.pages("c")}
    finally:
        store.close()
    assert languages == {"http://a/": None, "http://b/": "fa"}


# -- a crawl of a site in five languages -----------------------------------------------------

# Persian pages about migratory birds and wetlands (the topic), written with varying letter
# forms, diacritics and ZWNJ as real pages are.
FA_BIRDS = [
    "پرندگان مهاجر هر پاییز از سیبری به تالاب‌های شمال ایران می‌آیند.",
    "درناهای سیبری در تالاب فریدونکنار زمستان را می‌گذرانند.",
    "غازها و اردک‌های مهاجر در تالاب انزلی دانه و گیاهان آبی می‌خورند.",
    "پرنده‌نگران در زمستان پرندگان آبزی تالاب‌ها را سرشماری می‌کنند.",
    "فلامینگوها در تالاب‌های کم‌عمق جنوب ایران لانه می‌سازند.",
    "شکار غیرقانونی پرندگان مهاجر در تالاب‌ها کاهش یافته است.",
    "پرندگان مهاجر در بهار برای جوجه‌آوری به شمال بازمی‌گردند.",
    "خشک شدن تالاب‌ها زیستگاه پرندگان مهاجر را تهدید می‌کند.",
    "پَرَندِگانِ مُهاجِر در مسیر کوچ خود در تالاب‌ها استراحت می‌کنند.",  # with harakat
    "اكنون تعداد پرندگان مهاجر در تالاب ميانكاله بيشتر است.",  # Arabic kaf and yeh
]
FA_MARKET = [
    "بازار بورس تهران امروز با افت شاخص کل همراه بود.",
    "سهام شرکت‌های خودروسازی بیشترین کاهش قیمت را داشتند.",
    "معامله‌گران منتظر تصمیم بانک مرکزی درباره نرخ بهره هستند.",
    "ارزش معاملات خرد در بازار سرمایه به پایین‌ترین سطح ماه رسید.",
    "قیمت دلار در بازار آزاد تهران افزایش یافت.",
    "شرکت‌های پتروشیمی سود فصلی خود را اعلام کردند.",
]
OTHER_BIRDS = {
    "en": [
        "Migratory birds fly south each autumn to winter in warm wetlands.",
        "Cranes and geese rest in the wetlands on their long migration.",
        "Birdwatchers count ducks and waders on the lakes every winter.",
        "Draining wetlands threatens the birds that stop there to feed.",
    ],
    "vi": [
        "Mỗi mùa thu chim di cư bay về đồng bằng sông Cửu Long để tránh rét.",
        "Sếu đầu đỏ tìm thức ăn trên những cánh đồng ngập nước.",
        "Các loài cò và vạc làm tổ trong rừng tràm vào mùa mưa.",
        "Người dân địa phương bảo vệ vườn chim trong mùa sinh sản.",
    ],
    "zh": [
        "每年秋天，候鸟从西伯利亚飞往南方的湿地过冬。",
        "丹顶鹤和大雁在湖泊和沼泽中觅食休息。",
        "观鸟爱好者每年冬天都会统计湿地里的水鸟数量。",
        "湿地的消失威胁着迁徙鸟类的栖息地。",
    ],
    "sk": [
        "Každú jeseň odlietajú sťahovavé vtáky z Európy do Afriky.",
        "Bociany a žeriavy odpočívajú na mokradiach počas dlhej cesty.",
        "Ornitológovia v zime sčítavajú kačice na jazerách a rybníkoch.",
        "Vysušovanie mokradí ohrozuje vtáky, ktoré sa tam zastavujú.",
    ],
}


def page_paths() -> dict[str, list[str]]:
    groups = {
        "fa-birds": len(FA_BIRDS) - 2,  # the last sentences join pages, see site_pages
        "fa-market": len(FA_MARKET),
        **{f"{language}-birds": len(OTHER_BIRDS[language]) for language in OTHER_BIRDS},
    }
    return {group: [f"/{group}/{i}" for i in range(count)] for group, count in groups.items()}


def site_pages() -> dict[str, tuple[str, dict[str, str]]]:
    """path -> (HTML, headers): 35 pages in five languages, linked across languages."""
    paths = page_paths()
    texts: dict[str, str] = {}
    for i, path in enumerate(paths["fa-birds"]):
        texts[path] = f"{FA_BIRDS[i]} {FA_BIRDS[(i + 3) % len(FA_BIRDS)]}"
    for i, path in enumerate(paths["fa-market"]):
        texts[path] = f"{FA_MARKET[i]} {FA_MARKET[(i + 1) % len(FA_MARKET)]}"
    for language, sentences in OTHER_BIRDS.items():
        for i, path in enumerate(paths[f"{language}-birds"]):
            texts[path] = " ".join(sentences[(i + k) % len(sentences)] for k in range(3))

    def link(path: str) -> str:
        return f'<a href="{path}">{texts[path][:40]}</a>'

    def html(path: str, body_links: list[str], nav_links: list[str], lang: str | None) -> str:
        lang_attr = f' lang="{lang}"' if lang else ""
        return (
            f"<!DOCTYPE html><html{lang_attr}><head><meta charset='utf-8'>"
            f"<title>{texts[path][:30]}</title></head><body>"
            f"<nav>{' '.join(map(link, nav_links))}</nav>"
            f"<p>{texts[path]}</p><ul>"
            + "".join(f"<li>{link(p)}</li>" for p in body_links)
            + "</ul></body></html>"
        )

    fa, market = paths["fa-birds"], paths["fa-market"]
    others = [path for language in OTHER_BIRDS for path in paths[f"{language}-birds"]]
    pages: dict[str, tuple[str, dict[str, str]]] = {}
    # The seed, a portal with a menu and no text of its own: a few Persian bird pages come last,
    # after pages in every other language and on the market.
    texts["/"] = ""
    pages["/"] = (html("/", [], [*others[::2], *market[:3], *fa[:2]], None), {})
    for group, group_paths in paths.items():
        language = group.split("-")[0]
        for i, path in enumerate(group_paths):
            # each page links on within its group, and to pages in other languages
            body = [
                group_paths[(i + 1) % len(group_paths)],
                group_paths[(i + 2) % len(group_paths)],
            ]
            if group == "fa-birds":  # one link off the topic, in another language or not
                body.append(others[i * 3 % len(others)] if i % 2 else market[i % len(market)])
                nav = []
            else:
                body += [others[(i * 3) % len(others)], market[i % len(market)], fa[i % len(fa)]]
                nav = [others[(i * 5 + 1) % len(others)]]
            headers: dict[str, str] = {}
            lang: str | None = language
            if language == "vi":  # declared by the header only
                headers, lang = {"Content-Language": "vi-VN"}, None
            elif language == "zh" or (language == "sk" and i % 2):  # not declared: detected
                lang = None
            elif language == "sk" or (group == "fa-market" and i == 0):
                lang = "en"  # a template's wrong declaration: the text decides
            pages[path] = (html(path, body, nav, lang), headers)
    return pages


class _Handler(BaseHTTPRequestHandler):
    pages: dict[str, tuple[str, dict[str, str]]] = {}

    def do_GET(self) -> None:
        found = self.pages.get(self.path)
        if found is None:
            self.send_error(404)
            return
        body, headers = found
        data = body.encode("utf-8")
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: the crawl's own records say what was fetched."""


@pytest.fixture
def mixed_site():
    handler = type("MixedSiteHandler", (_Handler,), {"pages": site_pages()})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    thread.join()
    server.server_close()


def test_persian_crawl_fetches_persian_on_topic_pages_first(tmp_path, mixed_site) -> None:
    crawl = run_crawl(
        tmp_path,
        {"strategy": "bestfirst", "query": TEXTS["fa"]["query"], "seeds": f"{mixed_site}/"},
        {"CONCURRENT_REQUESTS": 1, "CLOSESPIDER_PAGECOUNT": 20},
    )
    assert crawl.result.returncode == 0, crawl.result.stderr[-3000:]
    pages = crawl.pages()
    assert len(pages) >= 18  # robots.txt counts in the page budget
    groups = [page["url"].split("/")[3] for page in pages[1:]]
    # Eight Persian bird pages exist; the portal links to two of them, after 11 other pages,
    # and each of them links to two more and to one page off the topic.
    assert groups[:8].count("fa-birds") >= 6, groups
    assert groups[:12].count("fa-birds") == 8, groups

    by_group: dict[str, list[dict]] = {}
    for page in pages[1:]:
        by_group.setdefault(page["url"].split("/")[3], []).append(page)
    expected = {"fa-birds": "fa", "fa-market": "fa", "en-birds": "en", "vi-birds": "vi"}
    expected |= {"zh-birds": "zh", "sk-birds": "sk"}
    for group, records in by_group.items():
        assert {page["language"] for page in records} == {expected[group]}, group
    assert min(page["relevance"] for page in by_group["fa-birds"]) > max(
        page["relevance"] for page in pages[1:] if page["url"].split("/")[3] != "fa-birds"
    )


def test_slovak_pages_behind_a_template_english_declaration_are_slovak(
    tmp_path, mixed_site
) -> None:
    """Half the Slovak pages say lang="en" (see site_pages): each is stored, so tokenized and
    scored, as Slovak, like the Slovak pages that declare nothing."""
    crawl = run_crawl(
        tmp_path,
        {"strategy": "bestfirst", "query": TEXTS["sk"]["query"], "seeds": f"{mixed_site}/"},
        {"CONCURRENT_REQUESTS": 1, "CLOSESPIDER_PAGECOUNT": 14},
    )
    assert crawl.result.returncode == 0, crawl.result.stderr[-3000:]
    slovak = {
        page["url"].split("/", 3)[3]: page["language"]
        for page in crawl.pages()
        if "/sk-birds/" in page["url"]
    }
    # the portal links to sk-birds/0 and /2, the pages declared en
    assert slovak == dict.fromkeys([f"sk-birds/{i}" for i in range(4)], "sk")
