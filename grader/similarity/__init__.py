"""Similarity across a class: which students handed in each other's work, with the given code left out.

    tokens.py     a file as normalised Python tokens (names, comments and layout do not count)
    winnow.py     winnowing: a document's fingerprints (MOSS's method)
    compare.py    the ranked pairs, their shared regions, the clusters
    behaviour.py  whether two submissions also fail the same tests with the same messages
    sources.py    documents from the store, a class folder, the reference and earlier terms
    view.py       the report as JSON, and its HTML pages

Everything runs on this machine with the standard library: no student's code is sent anywhere.
"""

from grader.similarity.compare import Document, Pair, Report, compare

__all__ = ["Document", "Pair", "Report", "compare"]
