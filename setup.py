"""Packaging for Scrapyd: `scrapyd-deploy` builds an egg of these packages."""

from setuptools import find_packages, setup

setup(
    name="focused",
    version="0.1.0",
    description="A topical crawler built on Scrapy",
    packages=find_packages(include=["focused*", "spiders*", "schedulers*", "pipelines*"]),
    include_package_data=True,
    python_requires=">=3.11",
    entry_points={"scrapy": ["settings = focused.settings"]},
)
