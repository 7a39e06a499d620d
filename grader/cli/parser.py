"""The parsers' own classes: help that states each default, `--version` worked out only when asked, and
each command's examples at the end of its `--help`."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from typing import Any


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Each option's help ends with its default when it has one worth saying (not None or False, and
    not already said); the epilog (the examples) keeps its lines."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if action.option_strings and action.default not in (None, False, argparse.SUPPRESS) and "default" not in text:
            text += " (default: %(default)s)"
        return text


class Parser(argparse.ArgumentParser):
    """The parser of `grader` and of every subcommand: add_subparsers makes subparsers of the parser's
    own class, so a subcommand added anywhere gets this formatter."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)


def version_text() -> str:
    from importlib.metadata import PackageNotFoundError, version

    import grader
    from grader.core.scorecard import SCHEMA_VERSION

    try:
        installed = version("grader")
    except PackageNotFoundError:  # run from a checkout that is not installed
        installed = grader.__version__
    return f"grader {installed} (scorecard schema {SCHEMA_VERSION})"


class VersionAction(argparse.Action):
    """--version, worked out only when asked (reading the package metadata is not free)."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        print(version_text())
        parser.exit()


def subcommands(parser: argparse.ArgumentParser, words: str = "") -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """(command words, parser) for every subcommand, nested ones too: `grade`, ..., `image build`."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                path = f"{words} {name}".strip()
                yield path, sub
                yield from subcommands(sub, path)


def add_examples(parser: argparse.ArgumentParser, examples: dict[str, list[str]]) -> None:
    """Each subcommand's real command lines (by its words after `grader`) as the epilog of its help."""
    for words, sub in subcommands(parser):
        if sub.epilog is None and words in examples:
            sub.epilog = "examples:\n" + "\n".join(f"  {line}" for line in examples[words])
