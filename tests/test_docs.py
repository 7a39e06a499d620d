"""The docs stay true: the site builds with no broken link, the README is a short guide whose links
lead somewhere, and every command the CLI has is documented."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_site_builds_in_strict_mode_with_every_page_in_its_nav(tmp_path):
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml"),
                           "-d", str(tmp_path / "site")], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    # A page left out of the nav is built but nobody finds it: mkdocs only mentions it, so check here.
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    missing = [page.name for page in (ROOT / "docs").glob("*.md") if page.name not in nav]
    assert not missing, f"pages missing from mkdocs.yml's nav: {missing}"


def opening(page: Path) -> str:
    """The first paragraph under a page's title; "" where something else (a heading, a list, a code block,
    a table, a quote or HTML) comes first."""
    lines = page.read_text(encoding="utf-8").splitlines()
    assert lines and lines[0].startswith("# "), f"{page.name} does not start with its title"
    rest = "\n".join(lines[1:]).strip()
    first = rest.split("\n\n", 1)[0]
    if not first or re.match(r"(#|```|[-*+] |\d+\. |\||>|<)", first):
        return ""
    return " ".join(first.split())


@pytest.mark.unit
@pytest.mark.parametrize("page", sorted((ROOT / "docs").glob("*.md")), ids=lambda page: page.name)
def test_every_page_opens_by_saying_what_it_is_for(page):
    """Under its title, a page first says in a sentence what it is for (for whom, or for what), before any
    heading, list, table or example: a reader knows at once whether to read on."""
    paragraph = opening(page)
    assert paragraph, f"{page.name}: its title is followed by something other than a sentence"
    # The sentence that says it comes first, or second after a one-line definition ("A harness for ...").
    sentences = re.split(r"(?<=[.!?])\s", paragraph)[:2]
    assert any(re.search(r"\bfor\b", sentence, re.IGNORECASE) for sentence in sentences), \
        f"{page.name}: its opening does not say whom or what the page is for: {sentences[0]!r}"


@pytest.mark.unit
def test_the_opening_check_sees_a_page_that_starts_otherwise(tmp_path):
    page = tmp_path / "page.md"
    for start in ("```\ngrader --version\n```", "## A heading", "- a list", "| a | table |"):
        page.write_text(f"# A page\n\n{start}\n\nFor whoever reads it.\n", encoding="utf-8")
        assert opening(page) == ""
    page.write_text("# A page\n\nFor whoever reads it: what it\nsays.\n\n## More\n", encoding="utf-8")
    assert opening(page) == "For whoever reads it: what it says."


@pytest.mark.unit
def test_the_readme_is_a_short_guide_whose_links_lead_to_files_that_exist():
    assert len(README.splitlines()) <= 250
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README)
    local = [target for target in targets if "://" not in target]
    assert any(target.startswith("docs/") for target in local)
    broken = [target for target in local if not (ROOT / target).exists()]
    assert not broken, f"README links to missing files: {broken}"



def site_home(readme: str) -> str:
    """The docs site's home page: the README, with its links made the site's (`docs/x.md` is `x.md`) and a
    link to a file outside the site shown as its path."""
    def link(match: re.Match[str]) -> str:
        text, target = match.group(1), match.group(2)
        if "://" in target:
            return match.group(0)
        if target.startswith("docs/"):
            return f"[{text}]({target[len('docs/'):]})"
        return f"`{target}`" if text == target else f"{text} (`{target}`)"

    return re.sub(r"\[([^\]]+)\]\(([^)\s]+)\)", link, readme)


def test_the_site_home_is_the_readme_guide():
    """docs/index.md is the README as the site shows it, so the site's first page is the guide, and sends
    nobody to a README that is not in the site. `python -m tests.test_docs` writes it again."""
    home = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    assert home == site_home(README), "docs/index.md is not the README's guide: run python -m tests.test_docs"
    assert "README" not in home.replace("README.md`", "")  # only the exercise's statement, by its path

# The two commands of the README's quick start, byte for byte: a fresh machine's first grading (into a
# virtual environment: PEP 668), and the tests, the unit tier first, which `.ci/run` runs in stages.
GRADE_COMMAND = """\
sudo=$([ "$(id -u)" = 0 ] || echo sudo); $sudo apt-get update -qq && $sudo apt-get install -y -qq bubblewrap python3-venv \\
  && python3 -m venv .venv && . .venv/bin/activate \\
  && pip install -e . && grader grade solutions/continuous_batching/scheduler.py --exercise continuous_batching
"""
TEST_COMMAND = ". .venv/bin/activate && pip install -e '.[test]' && python -m pytest -m unit && python -m pytest"


@pytest.mark.unit
def test_the_readme_keeps_the_two_commands_ci_runs():
    assert GRADE_COMMAND in README
    lines = README.splitlines()
    test_line = lines[lines.index("# the tests: the quick tier first (about a minute, nothing started), then the whole suite") + 1]
    assert test_line == TEST_COMMAND
    # .ci/run runs the README's test command in stages, in the same virtual environment: the same install
    # (quietly), then the unit tests, the rest of the fast tests and the slow ones (together the whole suite).
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()]
    activate, install, unit, whole = TEST_COMMAND.split(" && ")
    assert "python3 -m venv .venv" in "\n".join(ci) and activate in ci
    assert install.replace("pip install", "pip install -q") in ci
    assert unit in ci
    stages = [line for line in ci if line.startswith(whole)]
    assert [stage[len(whole):].split(" -n ")[0].strip().removeprefix("-m ") for stage in stages] == [
        "unit", '"not slow and not unit"', "slow"], stages


def commands_in_help(*words: str) -> list[str]:
    """The subcommands `grader WORDS --help` lists, read from the help text as a user sees it."""
    done = subprocess.run([sys.executable, "-c", "import sys; from grader.__main__ import run; sys.exit(run())",
                           *words, "--help"], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert done.returncode == 0, done.stderr
    listed = done.stdout.split("positional arguments:", 1)[-1].split("\n\n", 1)[0]
    return re.findall(r"^    ([a-z][a-z-]*)(?:\s|$)", listed, flags=re.MULTILINE)


def test_every_command_is_documented_in_the_cli_page():
    cli = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    commands = commands_in_help()
    assert len(commands) >= 12 and {"grade", "serve", "roster"} <= set(commands)
    undocumented = [name for name in commands if f"grader {name}" not in cli]
    # Commands with commands of their own (`grader image build`, `grader roster import`) name each.
    for name in commands:
        undocumented += [f"{name} {sub}" for sub in commands_in_help(name) if f"grader {name} {sub}" not in cli]
    assert not undocumented, f"commands docs/cli.md does not show: {undocumented}"


# docs/layout.md against the tree. The rule, for the tree drawn in its first ``` block:
# - an entry is a line that starts at the margin with a path (`grader/core/`, `grader/cli.py`, `tests/course/`),
#   with the lines indented under it;
# - every folder directly under grader/ is an entry `grader/NAME/`, and every module loose at grader/'s top
#   (bar __init__.py) an entry `grader/NAME.py`; what is inside a folder (its modules, deeper folders such as
#   db/migrations) may be told in words;
# - every path the tree names exists: each path with a `/` in it (from the project's folder or, in a
#   folder's entry, from that folder: `files/`), and each file name such as `exercise.py` given in a
#   folder's entry (in that folder, or deeper in it);
# - `grader/cli` may be a module or a package, in the tree and in the doc: `grader/cli.py` and `grader/cli/`
#   both name it.
LAYOUT = ROOT / "docs" / "layout.md"
EITHER_WAY = {"grader/cli.py": "grader/cli/", "grader/cli/": "grader/cli.py"}


def layout_entries() -> dict[str, str]:
    """The tree's entries: each path at the margin, with its text and its indented lines."""
    text = LAYOUT.read_text(encoding="utf-8")
    block = text.split("```", 2)[1].split("\n", 1)[1]
    entries: dict[str, str] = {}
    current = None
    for line in block.splitlines():
        if line and not line[0].isspace():
            current = line.split()[0]
            assert current not in entries, f"docs/layout.md names {current} twice"
            entries[current] = line[len(current):]
        elif current is not None:
            entries[current] += "\n" + line
    return entries


def exists(path: str) -> bool:
    return (ROOT / path).exists() or (path in EITHER_WAY and (ROOT / EITHER_WAY[path]).exists())


def test_the_layout_names_every_folder_and_top_module_of_the_package():
    entries = layout_entries()
    package = ROOT / "grader"
    wanted = [f"grader/{p.name}/" for p in package.iterdir() if p.is_dir() and p.name != "__pycache__"]
    wanted += [f"grader/{p.name}" for p in package.glob("*.py") if p.name != "__init__.py"]
    assert len(wanted) >= 15
    missing = sorted(path for path in wanted if path not in entries and EITHER_WAY.get(path) not in entries)
    assert not missing, f"docs/layout.md does not name {missing}"


def test_every_path_the_layout_names_exists():
    entries = layout_entries()
    missing = []
    for entry, text in entries.items():
        for token in re.findall(r"[\w.-]+/[\w./<>-]*|[\w-]+\.py\b", entry + " " + text):
            token = token.rstrip(".")
            if "/" in token:
                if not exists(token) and not (entry.endswith("/") and (ROOT / entry / token).exists()):
                    missing.append(token)
            elif entry.endswith("/") and not any((ROOT / entry).rglob(token)):
                missing.append(f"{entry}{token}")
            elif not entry.endswith("/") and entry.rsplit("/", 1)[-1] != token:
                missing.append(f"{token} (named in {entry}'s line)")
    assert not missing, f"docs/layout.md names what is not there: {missing}"


def test_the_readme_shows_what_its_own_install_prints():
    """The README's example output is a grading after its plain `pip install -e .`: no Docker SDK, so the
    local sandbox, saying why. Graded here with the SDK out of reach, and compared line by line (the
    README cuts the list of premium tests short with `...`)."""
    shown = README.split("```text\n", 1)[1].split("```", 1)[0].splitlines()
    command = next(line for line in README.splitlines() if line.startswith("grader grade exercises/")
                   and "--tier free" in line).split(" | ")[0].split()
    assert command[-2:] == ["--json", "-"]
    code = "import sys; sys.modules['docker'] = None; from grader.__main__ import run; sys.exit(run(sys.argv[1:]))"
    done = subprocess.run([sys.executable, "-c", code, *command[1:-2]], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "COLUMNS": "5000", "NO_COLOR": "1"}, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    printed = [line.rstrip() for line in (done.stderr + done.stdout).splitlines() if line.strip()]
    assert printed[:len(shown) - 1] == shown[:-1]
    assert shown[-1].endswith(", ...") and printed[len(shown) - 1].startswith(shown[-1][:-len("...")])


if __name__ == "__main__":
    (ROOT / "docs" / "index.md").write_text(site_home(README), encoding="utf-8")
