"""Valid text from untrusted strings: what a submission (or the sandbox it ran in) hands the host.

Every string of a harness's results passes through the contract's cleaning before it reaches a
scorecard, and so a report, the store or the terminal: lone surrogates (which JSON can carry but UTF-8
cannot encode) are replaced, and text past a limit is cut with a visible count of what was cut. It is
defined once, in the contract (the record that crosses the boundary is checked there), and the rest
of the host takes it from here.
"""

from __future__ import annotations

from grader.harness.contract import REPLACEMENT, valid_data, valid_tail, valid_text, without_surrogates

__all__ = ["REPLACEMENT", "valid_data", "valid_tail", "valid_text", "without_surrogates"]
