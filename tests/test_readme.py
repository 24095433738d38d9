"""The README's tables, links and command lines against the code they describe.

A newcomer copies defaults, parameter names and options from the README: each check here reads
the README as text and compares it with the settings module, the strategy registry, the spider's
arguments and the commands' option parsers, so that a renamed or retuned name fails here rather
than in a newcomer's crawl.
"""

from __future__ import annotations

import argparse
import re
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest
from scrapy.settings import Settings, default_settings

import focused.settings
from focused.arguments import GENERAL_ARGUMENTS
from focused.commands import crawls, forget, pages, recrawl, report, restore
from focused.encoder import DEFAULT_EXPORT_DIR
from focused.languages import known_languages
from focused.strategies import STRATEGIES, strategy_class

REPO = Path(__file__).resolve().parent.parent
README = (REPO / "README.md").read_text(encoding="utf-8")
MISSING = object()


def table_rows(text: str, header: str) -> list[list[str]]:
    """The rows of each Markdown table whose header row starts with ``header``, as cells."""
    rows: list[list[str]] = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if not line.startswith(f"| {header} |"):
            continue
        for row in lines[i + 2 :]:
            if not row.startswith("|"):
                break
            rows.append([cell.strip() for cell in row.strip("|").split(" | ")])
    return rows


def setting_default(name: str) -> Any:
    return getattr(focused.settings, name, getattr(default_settings, name, MISSING))


def words_default(cell: str) -> Any:
    """A default as the README writes it ("0 (off)", "1,000", "10 MiB", "`focused.sqlite3`")."""
    cell = re.sub(r" \(.*\)$", "", cell).replace("`", "").strip()
    if cell in ("none", "off"):
        return {"none": None, "off": False}[cell]
    if cell in ("True", "False"):
        return cell == "True"
    number = re.fullmatch(r"([\d,.]+)( s| MiB)?", cell)
    if number is None:
        return cell
    value = float(number.group(1).replace(",", ""))
    value = value * 1024 * 1024 if number.group(2) == " MiB" else value
    return int(value) if value.is_integer() else value


# Defaults the README gives in words, where settings.py has None for "computed at start".
SPELLED_OUT = {
    "ENCODER_EXPORT_DIR": ("~/.cache/focused/encoder", None),
    "ENCODER_STORE_DIR": ("ENCODER_EXPORT_DIR", None),
    "FOCUSED_CHROMIUM": ("/usr/bin/chromium when present", focused.settings.FOCUSED_CHROMIUM),
    "FOCUSED_UNSTORED_DIR": ("the folder of FOCUSED_DB", None),
}


def documented_settings() -> list[tuple[str, str]]:
    """(name, README default) for every row of the README's settings tables."""
    found = []
    for row in table_rows(README, "setting"):
        names = re.findall(r"`([A-Z][A-Z0-9_]+)`", row[0])
        # "none, `focused`" is the default of each of "`MONGO_URI`, `MONGO_DATABASE`".
        defaults = row[1].split(", ") if len(names) > 1 else [row[1]]
        found += zip(names, defaults, strict=True)
    return found


def test_the_settings_tables_were_read():
    names = {name for name, _ in documented_settings()}
    assert {"RELEVANCE_THRESHOLD", "CLOSESPIDER_RELEVANT", "HOST_WINDOW"} <= names


@pytest.mark.parametrize(("name", "cell"), documented_settings())
def test_a_documented_setting_has_the_readme_default(name, cell):
    value = setting_default(name)
    assert value is not MISSING, f"README names a setting {name} that nothing defines"
    if name in SPELLED_OUT:
        spelled, expected = SPELLED_OUT[name]
        assert (cell.replace("`", ""), value) == (spelled, expected)
    elif isinstance(value, list):
        assert [item.strip("` ") for item in re.split(r",\s*", cell)] == value
    else:
        assert words_default(cell) == value, f"README: {name} defaults to {cell}"


def test_the_encoder_folder_the_readme_names_is_the_code_default():
    assert str(DEFAULT_EXPORT_DIR).replace(str(Path.home()), "~") == "~/.cache/focused/encoder"


def test_the_languages_tables_codes_are_accepted_by_the_language_argument():
    named = {
        code for row in table_rows(README, "language") for code in re.findall(r"`(\w\w)`", row[0])
    }
    assert {"fa", "zh", "lo", "vi", "sk"} <= named
    assert sorted(named - known_languages()) == []


def strategy_rows() -> dict[str, str]:
    """Strategy name -> its "parameters (default)" cell."""
    return {
        re.match(r"`(\w+)`", row[0]).group(1): row[2]
        for row in table_rows(README, "name")
        if len(row) == 4
    }


def test_the_strategies_table_lists_every_registered_strategy():
    assert sorted(strategy_rows()) == sorted(STRATEGIES)


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_a_strategys_parameters_and_defaults_are_the_readmes(name):
    cell = strategy_rows()[name]
    params = strategy_class(name).params
    if cell.startswith("as `"):  # "as `annealing`": the same parameters
        other = re.match(r"as `(\w+)`", cell).group(1)
        assert params == strategy_class(other).params
        return
    # "`name` (default...", the default being the first word in the parentheses.
    documented = dict(re.findall(r"`(\w+)` \(`?([\w.]+)", cell))
    assert sorted(documented) == sorted(params)
    for param, default in documented.items():
        expected = params[param].default
        assert type(expected)(default) == expected, f"{name}: {param} defaults to {default}"


def test_the_spider_arguments_table_is_the_spiders():
    rows = table_rows(README, "argument")
    named = [m.group(1) for row in rows if (m := re.fullmatch(r"`(\w+)`", row[0]))]
    assert sorted(named) == sorted(GENERAL_ARGUMENTS)


def headings(text: str) -> set[str]:
    """GitHub's anchors of the Markdown headings, outside code blocks."""
    anchors, in_code = set(), False
    for line in text.splitlines():
        in_code ^= line.startswith("```")
        if not in_code and re.match(r"#+ ", line):
            title = line.lstrip("#").strip().lower()
            anchors.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return anchors


DOCS = [
    "README.md",
    "ARCHITECTURE.md",
    "BENCHMARKS.md",
    *sorted(str(p.relative_to(REPO)) for p in (REPO / "docs").glob("*.md")),
]


def test_the_docs_folder_was_read():
    assert {"docs/hardening.md", "docs/input-checks.md", "docs/refresh.md"} <= set(DOCS)


@pytest.mark.parametrize("doc", DOCS)
def test_links_inside_the_repository_lead_somewhere(doc):
    path = REPO / doc
    broken = []
    for link in re.findall(r"\]\(([^)\s]+)\)", path.read_text(encoding="utf-8")):
        if re.match(r"\w+://", link):
            continue
        target, _, anchor = link.partition("#")
        file = (path.parent / target) if target else path
        if not file.exists() or (anchor and anchor not in headings(file.read_text())):
            broken.append(link)
    assert broken == []


COMMANDS = {
    "crawls": crawls,
    "pages": pages,
    "report": report,
    "recrawl": recrawl,
    "restore": restore,
    "forget": forget,
}


def command_lines() -> list[list[str]]:
    """The lines of the README's shell blocks that run a project command, as words."""
    lines, in_sh = [], False
    for line in README.splitlines():
        if line.strip().startswith("```"):
            in_sh = line.strip() == "```sh" and not in_sh
            continue
        if in_sh and line.startswith("scrapy "):
            words = shlex.split(line, comments=True)
            if words[1] in COMMANDS:
                lines.append(words)
    return lines


def test_the_command_lines_were_read():
    assert {words[1] for words in command_lines()} == set(COMMANDS)


@pytest.mark.parametrize("words", command_lines(), ids=" ".join)
def test_a_readme_command_line_uses_the_commands_options(words):
    parser = argparse.ArgumentParser()
    command = COMMANDS[words[1]].Command()
    command.settings = Settings()
    command.add_options(parser)
    _, unknown = parser.parse_known_args(words[2:])
    assert [word for word in unknown if word.startswith("-")] == []


def test_a_pip_install_of_the_project_is_editable():
    # `scrapy` imports the project from site-packages before the repository it runs in.
    installs = re.findall(r"pip install ([^`\n#]*)", README)
    of_the_project = [words for words in installs if re.search(r"(^| )'?\.(\[|'| |$)", words)]
    assert of_the_project
    assert [words for words in of_the_project if not words.startswith("-e ")] == []


def test_every_module_of_focused_has_a_row_in_the_architecture_layout():
    layout = (REPO / "ARCHITECTURE.md").read_text(encoding="utf-8")
    rows = set(re.findall(r"^\| `(focused/\w+\.py)`", layout, re.M))
    modules = {
        str(path.relative_to(REPO))
        for path in (REPO / "focused").glob("*.py")
        if path.name != "__init__.py"
    }
    assert sorted(modules - rows) == []


def test_the_strategies_storing_no_link_relevance_are_those_that_never_read_it():
    listed = re.search(r"`link_relevance` \(.*?none with (.*?), which never\s", README, re.S)
    named = set(re.findall(r"`(\w+)`", listed.group(1)))
    # hybrid is named with then=dfs and astar with h_weight=0: with their defaults they read them.
    assert "`hybrid` with `then=dfs`" in listed.group(1)
    assert re.search(r"`astar` with\s+`h_weight=0`", listed.group(1))
    never = {name for name in STRATEGIES if not strategy_class(name).reads_link_scores}
    assert named == never | {"hybrid", "astar"}


def docstring_parameters(name: str) -> dict[str, str]:
    """Parameter -> default as a strategy's module docstring gives them: its "Parameters:"
    section (``name (type, default X)``), else inline (````name`` default X``)."""
    doc = sys.modules[strategy_class(name).__module__].__doc__
    if "\nParameters:\n" in doc:
        section = doc.split("\nParameters:\n", 1)[1]
        return dict(re.findall(r"^    (\w+) \([^\n]*?default `*([\w.]+)", section, re.M))
    return dict(re.findall(r"``(\w+)``\s+default\s+`*([\w.]+)", doc))


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_a_strategy_modules_docstring_gives_its_parameters_and_defaults(name):
    params = strategy_class(name).params
    documented = docstring_parameters(name)
    if not params:
        assert "No parameters" in sys.modules[strategy_class(name).__module__].__doc__
    assert sorted(documented) == sorted(params)
    for param, default in documented.items():
        expected = params[param].default
        assert type(expected)(default) == expected, f"{name}: {param} defaults to {default}"


def test_every_setting_of_the_project_is_named_in_the_readme_or_the_docs():
    # A setting a user can give that no page names is one a newcomer never learns of.
    docs = README + "".join(p.read_text(encoding="utf-8") for p in (REPO / "docs").glob("*.md"))
    ours = [
        name
        for name in dir(focused.settings)
        if name.isupper() and not hasattr(default_settings, name)
    ]
    assert "RELEVANCE_THRESHOLD" in ours
    assert [name for name in ours if not re.search(rf"`[^`\n]*\b{name}\b", docs)] == []


def test_apt_get_runs_as_root_where_there_is_no_sudo():
    # CI, containers and a Debian installed with a root password run the commands as root, and
    # have no sudo: `sudo apt-get` there ends with "sudo: command not found".
    shell_blocks = re.findall(r"```sh\n(.*?)```", README, flags=re.DOTALL)
    apt_gets = [line for block in shell_blocks for line in block.splitlines() if "apt-get" in line]
    assert apt_gets
    assert [line for line in apt_gets if re.search(r"(?<!command -v )\bsudo ", line)] == []
