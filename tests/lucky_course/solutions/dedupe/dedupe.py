"""Dedupe: the reference solution."""


def dedupe(values: list[int]) -> list[int]:
    seen: set[int] = set()
    kept = []
    for value in values:
        if value not in seen:
            seen.add(value)
            kept.append(value)
    return kept
