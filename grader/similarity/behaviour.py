"""Whether two submissions also fail alike: the same tests, with the same messages.

Two independent solutions can share code by chance; the same wrong behaviour (the same tests failed
with the same words) is a stronger sign that they share one origin. Only tests both scorecards ran are
compared. A test whose workloads are drawn from the run's seed (`TestResult.seeded`) tests other
workloads for each submission, so two copies of one file can fail it differently or not both: where the
two fail a test of fixed workloads, only those are compared, and the drawn ones are counted apart.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from grader.core.scorecard import Scorecard


@dataclass(frozen=True)
class Behaviour:
    kind: str   # unknown, both-pass, same-failures, shared-failures, different
    both_failed: list[str] = field(default_factory=list)     # names of the tests both fail
    same_message: list[str] = field(default_factory=list)    # of those, the ones failed with one message
    only_a: int = 0
    only_b: int = 0
    drawn: int = 0  # failures of tests on drawn workloads left out of the comparison (either file's)

    @property
    def strong(self) -> bool:
        """The same failures, each with the same message: rarely a coincidence."""
        return self.kind == "same-failures" and len(self.same_message) == len(self.both_failed)

    def summary(self) -> str:
        if self.kind == "unknown":
            return "no scorecard to compare"
        if self.kind == "both-pass":
            return "both pass every test they ran"
        apart = (f"; {self.drawn} failure(s) on workloads drawn for each file not compared"
                 if self.drawn else "")
        if self.kind == "different":
            return (f"different results: {self.only_a} failure(s) of the first only, {self.only_b} of the "
                    f"second only{apart}")
        count = len(self.both_failed)
        said = f"{len(self.same_message)} with the same message"
        if self.kind == "same-failures":
            return f"both fail the same {count} test{'s' if count != 1 else ''}, {said}{apart}"
        return (f"both fail {count} test{'s' if count != 1 else ''} ({said}); {self.only_a} other failure(s) "
                f"of the first, {self.only_b} of the second{apart}")


def _failures(card: Scorecard, ran: set[str]) -> dict[str, tuple[str, str]]:
    return {t.id: (t.name, t.message) for t in card.tests if t.id in ran and t.status != "passed"}


def compare_behaviour(a: Scorecard | None, b: Scorecard | None) -> Behaviour:
    if a is None or b is None:
        return Behaviour("unknown")
    ran = {t.id for t in a.tests} & {t.id for t in b.tests}
    if not ran:
        return Behaviour("unknown")
    drawn = {t.id for t in (*a.tests, *b.tests) if t.seeded}
    fail_a, fail_b = _failures(a, ran), _failures(b, ran)
    if not fail_a and not fail_b:
        return Behaviour("both-pass")
    fixed_a = {k: v for k, v in fail_a.items() if k not in drawn}
    fixed_b = {k: v for k, v in fail_b.items() if k not in drawn}
    left_out = 0
    if fixed_a or fixed_b:
        # The failures on fixed workloads say how alike the two are; those on drawn ones are noise here.
        left_out = len((fail_a.keys() | fail_b.keys()) & drawn)
        fail_a, fail_b = fixed_a, fixed_b
    both = sorted(fail_a.keys() & fail_b.keys())
    only_a, only_b = len(fail_a.keys() - fail_b.keys()), len(fail_b.keys() - fail_a.keys())
    if not both:
        return Behaviour("different", only_a=only_a, only_b=only_b, drawn=left_out)
    names = [fail_a[test_id][0] for test_id in both]
    same = [fail_a[test_id][0] for test_id in both if fail_a[test_id][1] == fail_b[test_id][1]]
    kind = "same-failures" if not only_a and not only_b else "shared-failures"
    return Behaviour(kind, names, same, only_a, only_b, left_out)
