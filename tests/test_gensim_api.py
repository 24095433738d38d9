"""gensim imported without scipy.stats (focused.gensim_api), its names there when used."""

from __future__ import annotations

import subprocess
import sys

IN_A_FRESH_PROCESS = """
import sys
import focused.gensim_api
assert "gensim.models.nmf" in sys.modules and "scipy.stats" not in sys.modules

from gensim import matutils
from gensim.models import keyedvectors, nmf, poincare

# Each name of scipy.stats that gensim took as it loaded works, and imports the real module.
kl = matutils.kullback_leibler([0.5, 0.5], [0.9, 0.1])
assert "scipy.stats" in sys.modules
import scipy.stats
assert abs(kl - scipy.stats.entropy([0.5, 0.5], [0.9, 0.1])) < 1e-12
assert nmf.halfnorm.rvs(size=3, random_state=1).shape == (3,)
assert abs(poincare.spearmanr([1, 2, 3], [1, 2, 4])[0] - 1.0) < 1e-12
assert keyedvectors.stats.pearsonr([1, 2, 3], [2, 4, 6])[0] > 0.999
# Imported after gensim, scipy.stats is the real module, as the scipy package names it.
import scipy
assert scipy.stats is sys.modules["scipy.stats"] and type(scipy.stats.norm).__name__ == "norm_gen"
print("ok")
"""


def test_gensim_loads_without_scipy_stats_and_its_names_work_when_used():
    result = subprocess.run(
        [sys.executable, "-c", IN_A_FRESH_PROCESS], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0 and result.stdout == "ok\n", result.stderr[-3000:]


def test_scipy_stats_already_imported_is_the_one_gensim_gets():
    already = (
        "import sys, scipy.stats\n"
        "stats = sys.modules['scipy.stats']\n"
        "from focused.gensim_api import matutils\n"
        "assert sys.modules['scipy.stats'] is stats and matutils.entropy is stats.entropy\n"
        "print('ok')"
    )
    result = subprocess.run(
        [sys.executable, "-c", already], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0 and result.stdout == "ok\n", result.stderr[-3000:]
