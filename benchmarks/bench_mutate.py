"""Benchmark: making the audit's mutants, in mutants a second, as the reference grows.

The reference (`--exercise`'s) is made 1, 2 and 4 times as long by appending copies of its top-level
classes and functions under new names, and `generate_mutants` makes every mutant of each. Each size is
measured in CPU time of this process (`time.process_time`: on a machine shared with other work, wall
time says more of the others than of this), the best of `--rounds`, the sizes in a new order each
round. Beside each figure, the same generator of another checkout (`--before DIR`, a `git worktree` of
an earlier commit; its `grader/audit/mutate.py`, or `grader/course/mutate.py` where it was before)
measured in the same rounds, or, without it, the figures of 0.11.0 recorded below. Generation that
grows with the file's size keeps its mutants a second as the file grows; one that grows with its
square halves them at each doubling.

    python -m benchmarks.bench_mutate [--exercise paged_kv_cache] [--rounds 3] [--before DIR]
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import random
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from grader.core.exercise import load_exercise

ROOT = Path(__file__).resolve().parent.parent
SIZES = (1, 2, 4)
# 0.11.0's generator (grader/course/mutate.py) on paged_kv_cache's reference made 1, 2 and 4 times as
# long (113, 221 and 437 lines; 185, 370 and 740 mutants): CPU seconds, the best of 3, on the project's
# 2-core machine shared with seven other builds (docs/benchmarks.md).
RECORDED_S = {1: 0.78, 2: 3.46, 4: 13.25}


def scaled(text: str, copies: int) -> str:
    """`text` and `copies - 1` copies of its top-level classes and functions, each under new names."""
    tree = ast.parse(text)
    defined = [node for node in tree.body if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))]
    if not defined:
        raise SystemExit("the reference defines no class or function to copy")
    names = [node.name for node in defined]
    first = min(min([node.lineno, *(d.lineno for d in node.decorator_list)]) for node in defined)
    body = "".join(text.splitlines(keepends=True)[first - 1:])
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, names)) + r")\b")
    copies_text = [pattern.sub(lambda m, k=k: f"{m.group(1)}{k}", body) for k in range(2, copies + 1)]  # type: ignore[misc]
    return "\n\n".join([text.rstrip("\n"), *copies_text]) + "\n"


def generator_of(checkout: Path) -> Callable[[str], list[Any]]:
    """`generate_mutants` of another checkout, loaded from its file (it needs the standard library and,
    from 0.12 on, grader.audit.identity: this checkout's, the same keys' code)."""
    for relative in ("grader/audit/mutate.py", "grader/course/mutate.py"):
        path = checkout / relative
        if path.is_file():
            spec = importlib.util.spec_from_file_location("before_mutate", path)
            assert spec is not None and spec.loader is not None
            module: ModuleType = importlib.util.module_from_spec(spec)
            sys.modules["before_mutate"] = module  # a dataclass looks its module up by name
            spec.loader.exec_module(module)
            made: Callable[[str], list[Any]] = module.generate_mutants
            return made
    raise SystemExit(f"{checkout}: no grader/audit/mutate.py nor grader/course/mutate.py")


def cpu_seconds(generate: Callable[[str], list[Any]], text: str) -> tuple[float, int]:
    started = time.process_time()
    count = len(generate(text))
    return time.process_time() - started, count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--exercise", default="paged_kv_cache")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--before", type=Path, help="another checkout, measured beside this one")
    args = parser.parse_args()
    from grader.audit.mutate import generate_mutants

    exercise = load_exercise(args.exercise, ROOT)
    texts = {size: scaled(exercise.reference.read_text(encoding="utf-8"), size) for size in SIZES}
    cases: dict[str, Callable[[str], list[Any]]] = {"now": generate_mutants}
    if args.before is not None:
        cases["before"] = generator_of(args.before.resolve())
    best: dict[tuple[str, int], float] = {}
    counts: dict[tuple[str, int], int] = {}
    for _ in range(args.rounds):
        order = [(case, size) for case in cases for size in SIZES]
        random.shuffle(order)
        for case, size in order:
            seconds, count = cpu_seconds(cases[case], texts[size])
            best[case, size] = min(seconds, best.get((case, size), seconds))
            counts[case, size] = count
    print(f"{exercise.slug}'s reference made 1, 2 and 4 times as long; CPU of this process, the best of "
          f"{args.rounds} rounds")
    before = "before (--before)" if args.before is not None else "0.11.0 (recorded)"
    print(f"  {'lines':>5} {'mutants':>7} | {'now: s':>7} {'mutants/s':>9} | {before + ': s':>22} {'mutants/s':>9}")
    for size in SIZES:
        lines = len(texts[size].splitlines())
        now, count = best["now", size], counts["now", size]
        then = best["before", size] if args.before is not None else RECORDED_S[size]
        print(f"  {lines:>5} {count:>7} | {now:>7.2f} {count / now:>9.0f} | {then:>22.2f} {count / then:>9.0f}")
    growth = best["now", SIZES[-1]] / best["now", SIZES[0]]
    print(f"  now: {growth:.1f}x the CPU for {SIZES[-1]}x the lines (linear: {SIZES[-1]}x; the square: "
          f"{SIZES[-1] ** 2}x)")


if __name__ == "__main__":
    main()
