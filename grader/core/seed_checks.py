"""What an exercise's suites draw their random workloads from, checked before anyone is graded.

A suite that takes the `seed` fixture draws per submission, from the exercise's key (grader/core/seeding.py):
without a key anyone who has the suite can work out every submission's workloads, so `audit` and
`package` refuse it. A suite that draws from a constant (`random.Random(7)`, `random.seed(7)`) gives
every submission the same workload, which a student can learn from the feedback and hard-code: both
commands warn, naming the line.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

from grader.core.exercise import Exercise
from grader.core.seeding import KEY_FILE, seed_key

# Calls that fix a generator's seed when given a constant: random.Random(7), random.seed(7),
# numpy's default_rng(7) / RandomState(7) / seed(7).
SEEDING_CALLS = {"Random", "seed", "default_rng", "RandomState", "SystemRandom"}


@dataclass
class SeedFindings:
    refusals: list[str] = field(default_factory=list)  # the exercise must not be graded or packaged so
    warnings: list[str] = field(default_factory=list)  # said to the author, who decides


def _name(node: ast.expr) -> str:
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def _suite_files(exercise: Exercise) -> list[Path]:
    files: set[Path] = set()
    for suite in exercise.suites.values():
        files.update(p for p in Path(suite.path).rglob("*.py") if "__pycache__" not in p.parts)
    return sorted(files)


def _takes_seed(node: ast.AST) -> bool:
    return isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test") \
        and any(arg.arg == "seed" for arg in node.args.args)


def seeded_tests(exercise: Exercise) -> set[str]:
    """The tests (by function name) that take the `seed` fixture: the only ones whose outcome may change
    with the seed. Every other test does the same on every seed."""
    names: set[str] = set()
    for path in _suite_files(exercise):
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        except (SyntaxError, UnicodeDecodeError, OSError):
            continue
        names.update(node.name for node in ast.walk(tree)
                     if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _takes_seed(node))
    return names


def check_seeds(exercise: Exercise) -> SeedFindings:
    findings = SeedFindings()
    uses_seed: list[str] = []
    for path in _suite_files(exercise):
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        except (SyntaxError, UnicodeDecodeError, OSError):
            continue  # the exercise's own loading reports a suite that does not parse
        shown = path.relative_to(exercise.root) if path.is_relative_to(exercise.root) else path
        for node in ast.walk(tree):
            if _takes_seed(node):
                assert isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                uses_seed.append(f"{shown}::{node.name}")
            if isinstance(node, ast.Call) and _name(node.func) in SEEDING_CALLS and node.args \
                    and isinstance(node.args[0], ast.Constant) and node.args[0].value is not None \
                    and _name(node.func) != "SystemRandom":
                call = ast.unparse(node)
                findings.warnings.append(
                    f"{shown}:{node.lineno}: {call} draws from a fixed seed: every submission gets the same "
                    "workload, which its feedback shows and a student can hard-code; take the `seed` fixture "
                    "and draw from it (random.Random(f\"...{seed}\"))")
    if uses_seed and not seed_key(exercise):
        key = exercise.root / "hidden_tests" / exercise.slug / KEY_FILE
        findings.refusals.append(
            f"{len(uses_seed)} test(s) draw from the `seed` fixture ({uses_seed[0]}{', ...' if len(uses_seed) > 1 else ''}) "
            f"but the exercise has no key: anyone with the suite can work out every submission's workloads. "
            f"Write any secret text into {key} (or set GRADER_SEED_KEY)")
    return findings
