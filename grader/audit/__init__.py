"""An exercise's suites put to the proof, and what its mutants fail written down for the diagnosis.

- `audit`: the reference, the stub and every mutant graded, judged (`grader audit`); `view`: on the terminal;
- `mutate`: the mutants made from a correct solution; `identity`: a mutant's key, kept across edits
  that do not touch it, and a stale equivalence declaration's likeliest meaning;
- `gradings`: one grading of each mutant on each seed, kept on disk for `audit` and `misconceptions` alike;
- `signatures`: what each mutant fails, the file that keeps it and when it is current; `build`: its
  making (`grader misconceptions SLUG`); `match`: a graded card's failures against it.
"""
