"""The confined side: the code that runs in the worker processes, beside the submission.

What this package holds is exactly what ships into the confinement (one zip with `grader/__init__.py`):
the zygote and loader that import a submission and fork workers, the worker that answers the harness,
the wire protocol both speak, the limits and clocks a worker is held to, the seccomp filter. It imports
only the standard library and itself (a test checks it): a worker can trust nothing else on its path,
and nothing else is there. The harness (`grader.harness`) drives it from outside the confinement.
"""
