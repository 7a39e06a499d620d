"""Misconception diagnosis as students and instructors read it.

- `grouping`: failures grouped by cause (what a message says once its scenario's particulars are
  masked), and what a run covered: the reports' summary, and what a signature is made of;
- `hints`: the mistake each mutant embodies, read from its docstring's `Misconception:` paragraph;
- `words`: the sentence every report and page says it with; `counts`: how many students each is told.

The signatures (what each mutant fails) are made and matched by the audit (grader/audit/).
"""
