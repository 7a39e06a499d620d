"""A source file as the tokens a copy keeps: what renaming, comments and layout cannot change.

Python's own tokenizer reads the file; every name that is not a keyword or a builtin becomes one token
(`v`), every number `0` and every string `s`, comments and blank lines are dropped, and indentation is
kept as the block structure it means. Renaming a variable, rewriting the comments or spacing the code
out again gives the same tokens. A file Python cannot tokenize (a syntax error, another language) is
read word by word instead, so it is still compared rather than skipped.
"""

from __future__ import annotations

import builtins
import io
import keyword
import re
import tokenize
from dataclasses import dataclass

KEPT_NAMES = frozenset(keyword.kwlist) | frozenset(keyword.softkwlist) | frozenset(dir(builtins))
NAME, NUMBER, STRING = "v", "0", "s"
BLOCK_START, BLOCK_END, STATEMENT_END = "{", "}", ";"
SKIPPED = {tokenize.COMMENT, tokenize.NL, tokenize.ENCODING, tokenize.ENDMARKER, tokenize.TYPE_COMMENT}
# For a file Python cannot tokenize: words, numbers, and runs of punctuation; `#` comments dropped.
FALLBACK = re.compile(r"[A-Za-z_]\w*|\d[\w.]*|\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'|[^\w\s]")
FALLBACK_COMMENT = re.compile(r"#[^\n]*")


@dataclass(frozen=True)
class Token:
    text: str   # the normalised token
    line: int   # 1-based line where it starts, in the file as handed in
    end_line: int


def python_tokens(source: str) -> list[Token]:
    """The normalised tokens of `source`; the word-by-word reading where Python cannot tokenize it."""
    found: list[Token] = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            text = _normalised(tok)
            if text is not None:
                found.append(Token(text, tok.start[0], tok.end[0]))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return fallback_tokens(source)
    return found


def _normalised(tok: tokenize.TokenInfo) -> str | None:
    if tok.type in SKIPPED:
        return None
    if tok.type == tokenize.NAME:
        return tok.string if tok.string in KEPT_NAMES else NAME
    if tok.type == tokenize.NUMBER:
        return NUMBER
    if tok.type == tokenize.STRING or tok.type == getattr(tokenize, "FSTRING_START", -1):
        return STRING
    if tok.type in (getattr(tokenize, "FSTRING_MIDDLE", -1), getattr(tokenize, "FSTRING_END", -1)):
        return None  # Python 3.12 splits an f-string: its start stands for the whole string
    if tok.type == tokenize.INDENT:
        return BLOCK_START
    if tok.type == tokenize.DEDENT:
        return BLOCK_END
    if tok.type == tokenize.NEWLINE:
        return STATEMENT_END
    return tok.string


def fallback_tokens(source: str) -> list[Token]:
    found: list[Token] = []
    for number, line in enumerate(source.splitlines(), start=1):
        for match in FALLBACK.finditer(FALLBACK_COMMENT.sub("", line) if "#" in line else line):
            word = match.group()
            if word[0].isalpha() or word[0] == "_":
                text = word if word in KEPT_NAMES else NAME
            elif word[0].isdigit():
                text = NUMBER
            elif word[0] in "\"'":
                text = STRING
            else:
                text = word
            found.append(Token(text, number, number))
    return found
