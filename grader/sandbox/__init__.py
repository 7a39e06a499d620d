"""Host-side sandbox backends: they place a job in an isolated place, run the harness, read its results.

`layout` builds the job's files once; `local` writes them to a private folder, `docker` copies them
into a fresh container. Both implement `grader.core.backend.Backend`: they return the harness's raw results
for `grader.core.grading` to judge.
"""
