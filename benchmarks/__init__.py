"""The benchmarks: each a module of this package, run from the project's folder, which `python -m` puts
first on the path (so `grader`, `tests.helpers` and the exercises are this checkout's):

    python -m benchmarks.bench_batch --count 40

docs/benchmarks.md says what each measures and shows its figures.
"""
