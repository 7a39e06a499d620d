"""Grade every golden case afresh and write its scorecard to tests/golden/NAME.json."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from tests.golden import CASES, grade_all, path


def main() -> int:
    with tempfile.TemporaryDirectory() as folder:
        cards = grade_all(Path(folder))
    for name in CASES:
        cards[name].write(path(name))
        print(f"{path(name)}: {cards[name].status}, {cards[name].score}/{cards[name].max_score}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
