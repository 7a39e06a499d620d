"""Comparing a class's files: the pairs that share the most code beyond what the exercise gave them.

Each document's fingerprints (grader/similarity/winnow.py) lose every k-gram of the given code (the
stub, and any file the exercise lists as given), then every fingerprint that too many of the class
hold (code the exercise makes everyone write alike). What two documents still share is their
similarity: `a_share` of the first's fingerprints are the second's too, `b_share` the other way, and a
pair is ranked by the mean of the two, so that a copy padded with dead code still ranks high.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import combinations

from grader.core.scorecard import Scorecard
from grader.similarity.behaviour import Behaviour, compare_behaviour
from grader.similarity.tokens import Token, python_tokens
from grader.similarity.winnow import K, W, kgram_hashes, winnow

KINDS = ("student", "reference", "earlier")
MIN_SHARED = 4            # fingerprints two documents must share to be a pair at all
COMMON_AT_LEAST = 10      # a fingerprint this many of the class hold is never too common to count...
COMMON_SHARE = 0.1        # ... above that, one held by more than this share of the class is ignored
CLUSTER_SCORE = 0.6       # pairs at or above this score join their documents into one cluster
REGION_GAP = K + W        # token distance within which two shared fingerprints belong to one region
PLACES_PER_HASH = 4       # where one fingerprint occurs many times in a file, its first few places


@dataclass
class Document:
    label: str   # a student's id (or pseudonym), "reference", or "<source>/<student>" for an earlier term
    kind: str    # one of KINDS
    text: str
    submission_id: int | None = None
    card: Scorecard | None = None
    sha256: str = ""
    tokens: list[Token] = field(default_factory=list, repr=False)
    places: dict[int, list[int]] = field(default_factory=dict, repr=False)  # fingerprint: token indexes
    given_kgrams: int = 0   # k-grams of the file that are the exercise's given code
    common: int = 0         # fingerprints too many students hold (left out between students)

    @property
    def fingerprints(self) -> int:
        return len(self.places)


@dataclass(frozen=True)
class Region:
    """A stretch of code the two documents share: lines (first, last) in each, 1-based, inclusive."""
    a_lines: tuple[int, int]
    b_lines: tuple[int, int]
    fingerprints: int


@dataclass
class Pair:
    a: Document
    b: Document
    shared: int     # fingerprints the two hold
    a_total: int    # fingerprints of each that count for this pair (between students: not the common ones)
    b_total: int
    ignored: set[int] = field(repr=False)  # fingerprints left out of this pair as too common
    behaviour: Behaviour = field(default_factory=lambda: Behaviour("unknown"))
    regions: list[Region] = field(default_factory=list)

    @property
    def a_share(self) -> float:
        return min(1.0, self.shared / self.a_total) if self.a_total else 0.0

    @property
    def b_share(self) -> float:
        return min(1.0, self.shared / self.b_total) if self.b_total else 0.0

    @property
    def score(self) -> float:
        return (self.a_share + self.b_share) / 2


@dataclass
class Report:
    exercise: str
    documents: list[Document]
    pairs: list[Pair]               # ranked, most alike first
    clusters: list[list[str]]       # labels of documents joined by pairs at CLUSTER_SCORE or more
    common_limit: int               # a fingerprint more documents than this hold was ignored
    ignored_common: int             # how many fingerprints that was
    pairs_found: int                # pairs above MIN_SHARED before `limit` cut the list

    @property
    def students(self) -> int:
        return sum(1 for d in self.documents if d.kind == "student")

    @property
    def widely_shared(self) -> list[str]:
        """Students most of whose code is code more than `common_limit` of the class hold, which is left
        out between students: a solution passed round the class would hide there (compare with the
        reference and earlier terms, where it still counts)."""
        return sorted(d.label for d in self.documents
                      if d.kind == "student" and d.fingerprints >= MIN_SHARED and d.common * 2 >= d.fingerprints)


def fingerprint_document(document: Document, given: set[int]) -> None:
    document.tokens = python_tokens(document.text)
    hashes = kgram_hashes([t.text for t in document.tokens])
    document.given_kgrams = sum(1 for h in hashes if h in given)
    places: dict[int, list[int]] = {}
    for fp in winnow(hashes):
        if fp.hash not in given:
            spots = places.setdefault(fp.hash, [])
            if len(spots) < PLACES_PER_HASH:
                spots.append(fp.start)
    document.places = places


def given_kgrams(texts: Iterable[str]) -> set[int]:
    """Every k-gram of the given code, not only its fingerprints: any run of it in a student's file is
    left out, wherever the winnowing of that file happened to pick its fingerprints."""
    given: set[int] = set()
    for text in texts:
        given.update(kgram_hashes([t.text for t in python_tokens(text)]))
    return given


def comparable(a: Document, b: Document) -> bool:
    """Students are compared with each other and with the reference and earlier terms; the reference
    and earlier terms are not compared with each other."""
    return a.kind == "student" or b.kind == "student"


def compare(documents: Sequence[Document], given: Iterable[str] = (), exercise: str = "",
            limit: int | None = 200) -> Report:
    given_hashes = given_kgrams(given)
    for document in documents:
        fingerprint_document(document, given_hashes)
    students = sum(1 for d in documents if d.kind == "student")
    common_limit = max(COMMON_AT_LEAST, math.ceil(COMMON_SHARE * students))
    holders: dict[int, list[int]] = defaultdict(list)
    for index, document in enumerate(documents):
        for fingerprint in document.places:
            holders[fingerprint].append(index)
    too_common = {h for h, held in holders.items()
                  if sum(1 for i in held if documents[i].kind == "student") > common_limit}
    for document in documents:
        document.common = len(too_common.intersection(document.places))
    shared: Counter[tuple[int, int]] = Counter()
    for fingerprint, held in holders.items():
        common = fingerprint in too_common
        for i, j in combinations(held, 2):
            a, b = documents[i], documents[j]
            # Between two students, code much of the class holds says nothing of the two; against the
            # reference or an earlier term it is kept: a solution passed round a whole class is common too.
            if comparable(a, b) and not (common and a.kind == b.kind == "student"):
                shared[i, j] += 1
    pairs = []
    for (i, j), count in shared.items():
        if count >= MIN_SHARED:
            a, b = documents[i], documents[j]
            ignored = too_common if a.kind == b.kind == "student" else set()
            pairs.append(Pair(a, b, count, a.fingerprints - (a.common if ignored else 0),
                              b.fingerprints - (b.common if ignored else 0), ignored,
                              behaviour=compare_behaviour(a.card, b.card)))
    pairs.sort(key=lambda p: (-p.score, -p.shared, p.a.label, p.b.label))
    kept = pairs if limit is None else pairs[:limit]
    for pair in kept:
        pair.regions = regions(pair.a, pair.b, pair.ignored)
    return Report(exercise, list(documents), kept, clusters(pairs), common_limit, len(too_common), len(pairs))


def regions(a: Document, b: Document, ignored: set[int] | frozenset[int] = frozenset()) -> list[Region]:
    """The shared stretches of code: the places of the shared fingerprints, chained into runs that go
    forward in both files together. A function moved elsewhere in the copy is a region of its own."""
    both = (a.places.keys() & b.places.keys()) - ignored
    matches = sorted((ia, ib) for h in both for ia in a.places[h] for ib in b.places[h])
    runs: list[list[int]] = []  # [a first, b first, a last, b last, fingerprints]
    for ia, ib in matches:
        for run in reversed(runs[-4:]):
            if run[2] < ia <= run[2] + REGION_GAP and run[3] < ib <= run[3] + REGION_GAP:
                run[2], run[3], run[4] = ia, ib, run[4] + 1
                break
        else:
            runs.append([ia, ib, ia, ib, 1])
    found = [Region(_lines(a.tokens, run[0], run[2]), _lines(b.tokens, run[1], run[3]), run[4]) for run in runs]
    # Code that repeats within a file (two alike loops) matches twice: the larger region is kept, and
    # a region that overlaps it on either side is not shown.
    kept: list[Region] = []
    for region in sorted(found, key=lambda r: (-r.fingerprints, r.a_lines)):
        if not any(_overlap(region.a_lines, k.a_lines) or _overlap(region.b_lines, k.b_lines) for k in kept):
            kept.append(region)
    return sorted(kept, key=lambda r: r.a_lines)


def _overlap(one: tuple[int, int], other: tuple[int, int]) -> bool:
    return one[0] <= other[1] and other[0] <= one[1]


def _lines(tokens: Sequence[Token], first: int, last: int) -> tuple[int, int]:
    end = min(len(tokens) - 1, last + K - 1)
    return tokens[first].line, tokens[end].end_line


def clusters(pairs: Iterable[Pair]) -> list[list[str]]:
    """Groups of documents joined by alike pairs (a copied a copy: all three are one cluster)."""
    parent: dict[str, str] = {}

    def root(label: str) -> str:
        while parent.setdefault(label, label) != label:
            parent[label] = parent[parent[label]]
            label = parent[label]
        return label

    for pair in pairs:
        if pair.score >= CLUSTER_SCORE:
            parent[root(pair.a.label)] = root(pair.b.label)
    groups: dict[str, list[str]] = defaultdict(list)
    for label in parent:
        groups[root(label)].append(label)
    return sorted((sorted(g) for g in groups.values() if len(g) > 1), key=lambda g: (-len(g), g))
