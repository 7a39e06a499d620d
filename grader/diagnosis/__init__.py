"""Misconception diagnosis: which hand-written mutant a graded submission's failures look like.

- `grouping`: failures grouped by cause (what a message says once its scenario's particulars are
  masked), and what a run covered: the reports' summary, and what a signature is made of;
- `hints`: the mistake each mutant embodies, read from its docstring's `Misconception:` paragraph;
- `signatures`: what each mutant fails, the file that keeps it (solutions/SLUG/misconceptions.json) and
  the fingerprint that tells a current file from a stale one;
- `build`: the signatures worked out by grading the mutants (`grader misconceptions SLUG`);
- `match`: a scorecard's failures against the signatures, after grading, on the host;
- `words`: the sentence every report and page says it with.
"""
