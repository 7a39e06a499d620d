"""Req has 2,000 more properties, each reading as a new 4,000-character string: odd, but correct.

The grader copies scalar attributes of the objects a test holds into the harness after every call; a
grader that copied all of these would hold gigabytes. It must keep within its bounds, read what it did
not keep on demand, and still give full marks.
"""


def _text(i):
    return property(lambda self: f"{i:04d}" * 1000)


for _i in range(2000):
    setattr(Req, f"note_{_i}", _text(_i))
