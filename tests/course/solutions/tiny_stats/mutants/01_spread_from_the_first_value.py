"""spread() measures from the first value instead of the smallest."""


def mean(values: list[float]) -> float:
    if not values:
        raise ValueError("mean() of an empty list")
    return sum(values) / len(values)


def spread(values: list[float]) -> float:
    if not values:
        raise ValueError("spread() of an empty list")
    return max(values) - values[0]
