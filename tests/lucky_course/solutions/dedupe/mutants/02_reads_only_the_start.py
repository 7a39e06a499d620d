"""Only the first 8 values are looked at (a cap meant for speed).

Misconception: stops reading the list after a fixed number of values, so a new value late in a long list is lost.
"""


def dedupe(values: list[int]) -> list[int]:
    seen: set[int] = set()
    kept = []
    for value in values[:8]:
        if value not in seen:
            seen.add(value)
            kept.append(value)
    return kept
