"""An author's mutants kept as the change each makes: a unified diff against the reference.

solutions/<slug>/mutants/ holds, for each plausible bug, either the whole mutated file (`NN_name.py`,
as before) or the change alone (`NN_name.diff`: `--- a/<file>`, `+++ b/<file>`, hunks with their context),
where the mistake reads at a glance and an edit of the reference elsewhere leaves it as it is. A change
is applied to the reference as `patch` does: each hunk where its lines (context and removed) stand, at
the line it says or, the reference having moved, wherever they stand once; a hunk whose lines stand
nowhere, or in several places, is an ExerciseError naming the mutant and the hunk, never a guess.

The mutants made from changes are written to the grader's cache (grader/disk_cache.py) under a digest of
the reference and the change, so everything that reads a mutant's file (grading, the audit, the
signatures, the reports' tests) reads a file as before. `python -m grader.core.mutant_files SOLUTIONS_DIR`
turns whole-file mutants into changes, each checked to give back the very bytes it was made from.
"""

from __future__ import annotations

import difflib
import hashlib
import re
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from grader.disk_cache import cache_file

CHANGE_SUFFIX = ".diff"
HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


class ChangeError(ValueError):
    """A change that does not apply to the reference as it is: which mutant, which hunk, why."""


@dataclass
class Hunk:
    start: int  # the line the old text starts at, 1-based, as the change says
    old: list[str]  # context and removed lines, with their line ends
    new: list[str]  # context and added lines


def parse_change(text: str) -> list[Hunk]:
    """The hunks of a unified diff (the `---`/`+++` lines and anything before them are its header)."""
    hunks: list[Hunk] = []
    current: Hunk | None = None
    last = " "  # the sign of the line before: "\ No newline at end of file" is about it
    for line in text.splitlines(keepends=True):
        found = HUNK.match(line)
        if found:
            current = Hunk(int(found.group(1)), [], [])
            hunks.append(current)
        elif current is None:
            continue
        elif line.startswith("\\"):
            if last in " -" and current.old:
                current.old[-1] = current.old[-1].rstrip("\n")
            if last in " +" and current.new:
                current.new[-1] = current.new[-1].rstrip("\n")
        elif line[:1] in (" ", "-", "+"):
            last, body = line[0], line[1:]
            if last != "+":
                current.old.append(body)
            if last != "-":
                current.new.append(body)
        elif line.strip() == "":  # an empty context line whose leading space an editor took away
            last = " "
            current.old.append("\n")
            current.new.append("\n")
    return hunks


def apply_change(reference: str, change: str, name: str = "the change") -> str:
    """`reference` with each hunk of `change` applied, in order."""
    lines = reference.splitlines(keepends=True)
    offset = 0
    for number, hunk in enumerate(parse_change(change), 1):
        at = _find(lines, hunk, hunk.start - 1 + offset)
        if at is None:
            raise ChangeError(f"{name}: hunk {number} (line {hunk.start}) does not stand in the reference "
                              "as it is now, or stands in several places: write the change again against it")
        lines[at:at + len(hunk.old)] = hunk.new
        offset = at - (hunk.start - 1) + len(hunk.new) - len(hunk.old)
    return "".join(lines)


def _find(lines: list[str], hunk: Hunk, expected: int) -> int | None:
    """Where the hunk's old lines stand: at the expected line, else at the one place they stand."""
    size = len(hunk.old)
    if size == 0:
        return max(0, min(expected + 1 if expected >= 0 else 0, len(lines)))
    if expected >= 0 and lines[expected:expected + size] == hunk.old:
        return expected
    places = [k for k in range(len(lines) - size + 1) if lines[k:k + size] == hunk.old]
    return places[0] if len(places) == 1 else None


def make_change(reference: str, mutant: str, filename: str) -> str:
    """The unified diff that turns `reference` into `mutant` (three lines of context)."""
    diff = list(difflib.unified_diff(reference.splitlines(keepends=True), mutant.splitlines(keepends=True),
                                     f"a/{filename}", f"b/{filename}", n=3))
    out = []
    for line in diff:
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)


def mutant_paths(folder: Path, reference: Path) -> list[Path]:
    """The mutants of `folder`, in name order: a whole file as it is, a change as the file it makes."""
    found: list[Path] = []
    for path in sorted(folder.glob("*")):
        if path.suffix == ".py":
            found.append(path)
        elif path.suffix == CHANGE_SUFFIX:
            found.append(materialised(path, reference))
    return sorted(found, key=lambda path: path.stem)


def materialised(change: Path, reference: Path) -> Path:
    """The file `change` makes of `reference`, written once under a digest of both."""
    reference_text = reference.read_text(encoding="utf-8")
    change_text = change.read_text(encoding="utf-8")
    digest = hashlib.sha256(f"{reference_text}\0{change_text}".encode()).hexdigest()[:20]
    name = f"{change.stem}{reference.suffix or '.py'}"
    for folder in (cache_file(f"mutants/{digest}"), Path(tempfile.gettempdir()) / f"grader-mutants-{digest}"):
        path = folder / name
        if path.is_file():
            return path
        try:
            folder.mkdir(parents=True, exist_ok=True)
            partial = folder / f".{name}.partial"
            partial.write_text(apply_change(reference_text, change_text, str(change)), encoding="utf-8")
            partial.replace(path)
            return path
        except OSError:
            continue
    raise ChangeError(f"{change}: nowhere to write the mutant it makes (the cache and the temporary folder)")


def convert(folder: Path, reference: Path) -> list[str]:
    """Each whole-file mutant of `folder` turned into its change, kept only where the change gives back
    the very same bytes (then the whole file is removed); what was done, a line a mutant."""
    said: list[str] = []
    reference_text = reference.read_text(encoding="utf-8")
    for path in sorted(folder.glob("*.py")):
        text = path.read_text(encoding="utf-8")
        change = make_change(reference_text, text, reference.name)
        if apply_change(reference_text, change, str(path)).encode() != path.read_bytes():
            said.append(f"kept whole: {path.name} (its change would not give back the same bytes)")
            continue
        path.with_suffix(CHANGE_SUFFIX).write_text(change, encoding="utf-8")
        path.unlink()
        said.append(f"{path.name} -> {path.with_suffix(CHANGE_SUFFIX).name}")
    return said


def main(argv: list[str]) -> int:
    """`python -m grader.core.mutant_files SOLUTIONS/SLUG [...]`: convert each folder's whole-file mutants."""
    if not argv:
        print("usage: python -m grader.core.mutant_files SOLUTIONS/SLUG [SOLUTIONS/SLUG ...]", file=sys.stderr)
        return 2
    for solutions in map(Path, argv):
        references = list(solutions.glob("*.py"))
        if len(references) != 1 or not (solutions / "mutants").is_dir():
            print(f"{solutions}: not a solutions folder with one reference and mutants/", file=sys.stderr)
            return 1
        for line in convert(solutions / "mutants", references[0]):
            print(f"{solutions.name}: {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
