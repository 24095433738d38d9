"""gensim imported without the rest of gensim, scipy.stats and smart_open
(focused.gensim_api), the rest there when used."""

from __future__ import annotations

import subprocess
import sys

import pytest

IN_A_FRESH_PROCESS = """
import sys
import focused.gensim_api
# The modules of the names a crawl uses, and no other model, index or scipy.stats.
assert "gensim.models.lsimodel" in sys.modules and "gensim.corpora.dictionary" in sys.modules
waiting = ("scipy.stats", "smart_open")
for other in ("gensim.models.word2vec", "gensim.models.nmf", "gensim.similarities", *waiting):
    assert other not in sys.modules, other

# gensim saves and loads a model with smart_open's open (a JOBDIR crawl's pause and resume).
import os, tempfile
from focused.gensim_api import Dictionary
with tempfile.TemporaryDirectory() as folder:
    path = os.path.join(folder, "dictionary")
    Dictionary([["albatross", "petrel"]]).save(path)
    assert Dictionary.load(path).token2id == {"albatross": 0, "petrel": 1}
assert "smart_open" in sys.modules  # the save imported the real module
import smart_open
assert smart_open.open.__module__ == "smart_open.smart_open_lib"

# A name of scipy.stats that gensim took as it loaded works, and imports the real module.
from gensim import matutils
kl = matutils.kullback_leibler([0.5, 0.5], [0.9, 0.1])
assert "scipy.stats" in sys.modules
import scipy.stats
assert abs(kl - scipy.stats.entropy([0.5, 0.5], [0.9, 0.1])) < 1e-12

# The rest of gensim is there when asked for, each package's __init__ run then, with the
# modules already loaded: the same classes.
from gensim.models import LsiModel, TfidfModel, Word2Vec, keyedvectors, nmf, poincare
from gensim.corpora import Dictionary, MmCorpus
from gensim.similarities import MatrixSimilarity
import gensim, gensim.parsing, importlib.metadata
assert LsiModel is focused.gensim_api.LsiModel and TfidfModel is focused.gensim_api.TfidfModel
assert Dictionary is focused.gensim_api.Dictionary
assert gensim.parsing.remove_stopwords is gensim.parsing.preprocessing.remove_stopwords
assert gensim.parsing.preprocessing.STOPWORDS is focused.gensim_api.STOPWORDS
assert gensim.__version__ == importlib.metadata.version("gensim")
assert Word2Vec.__name__ == "Word2Vec" and gensim.models.VocabTransform.__name__ == "VocabTransform"
assert nmf.halfnorm.rvs(size=3, random_state=1).shape == (3,)
assert abs(poincare.spearmanr([1, 2, 3], [1, 2, 4])[0] - 1.0) < 1e-12
assert keyedvectors.stats.pearsonr([1, 2, 3], [2, 4, 6])[0] > 0.999
try:
    gensim.models.no_such_name
except AttributeError:
    pass
else:
    raise AssertionError("a name gensim does not define")
# Imported after gensim, scipy.stats is the real module, as the scipy package names it.
import scipy
assert scipy.stats is sys.modules["scipy.stats"] and type(scipy.stats.norm).__name__ == "norm_gen"
print("ok")
"""


def test_gensim_loads_without_scipy_stats_and_smart_open_and_their_names_work_when_used():
    result = subprocess.run(
        [sys.executable, "-c", IN_A_FRESH_PROCESS], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0 and result.stdout == "ok\n", result.stderr[-3000:]


@pytest.mark.parametrize(
    ("module", "name", "gensims"),
    [("scipy.stats", "entropy", "matutils"), ("smart_open", "open", "utils")],
)
def test_a_module_already_imported_is_the_one_gensim_gets(module, name, gensims):
    already = (
        f"import sys, {module}\n"
        f"real = sys.modules['{module}']\n"
        f"import focused.gensim_api\n"
        f"from gensim import {gensims}\n"
        f"assert sys.modules['{module}'] is real and {gensims}.{name} is real.{name}\n"
        "print('ok')"
    )
    result = subprocess.run(
        [sys.executable, "-c", already], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0 and result.stdout == "ok\n", result.stderr[-3000:]
