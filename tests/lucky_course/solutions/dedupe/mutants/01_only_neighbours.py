"""Only a repeat right after its value is dropped.

Misconception: compares each value with the one before it only, so a value that comes back later is kept twice.
"""


def dedupe(values: list[int]) -> list[int]:
    kept: list[int] = []
    for value in values:
        if not kept or kept[-1] != value:
            kept.append(value)
    return kept
