"""The docs stay true: the site builds with no broken link, the README is a short guide whose links
lead somewhere, and every command the CLI has is documented."""

from __future__ import annotations

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


@pytest.mark.unit
def test_the_readme_is_a_short_guide_whose_links_lead_to_files_that_exist():
    assert len(README.splitlines()) <= 250
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README)
    local = [target for target in targets if "://" not in target]
    assert any(target.startswith("docs/") for target in local)
    broken = [target for target in local if not (ROOT / target).exists()]
    assert not broken, f"README links to missing files: {broken}"


# The two commands of the README's quick start, byte for byte: a fresh machine's first grading, and the
# whole test suite, which `.ci/run` runs in stages.
GRADE_COMMAND = """\
{ command -v bwrap >/dev/null || { apt-get update -qq && apt-get install -y -qq bubblewrap python3; }; } \\
  && pip install -e . && grader grade solutions/continuous_batching/scheduler.py --exercise continuous_batching
"""
TEST_COMMAND = "pip install -e '.[test]' && python -m pytest"


@pytest.mark.unit
def test_the_readme_keeps_the_two_commands_ci_runs():
    assert GRADE_COMMAND in README
    lines = README.splitlines()
    test_line = lines[lines.index("# run the whole test suite") + 1]
    assert test_line == TEST_COMMAND
    # .ci/run runs the README's test command in stages: the same install (quietly), then the unit tests,
    # the rest of the fast tests and the slow ones, which together are the whole suite.
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()]
    install, pytest = TEST_COMMAND.split(" && ")
    assert install.replace("pip install", "pip install -q") in ci
    stages = [line for line in ci if line.startswith(pytest)]
    assert [stage[len(pytest):].split(" -n ")[0].strip().removeprefix("-m ") for stage in stages] == [
        "unit", '"not slow and not unit"', "slow"], stages


def commands_in_help(*words: str) -> list[str]:
    """The subcommands `grader WORDS --help` lists, read from the help text as a user sees it."""
    done = subprocess.run([sys.executable, "-c", "import sys; from grader.cli import main; sys.exit(main())",
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
