"""Benchmark: how the crowd test's cost grows with the requests of its workload.

The hidden suite's crowd workload (hundreds of requests decoding at once under a large budget) is judged
at every step. Here it is made with N and 2N requests arriving at the same rate (so about as many are
live at once, and the run lasts twice as long), and the whole check (the reference's run and the
submission's replay, as `check_random` does it) is timed two ways: the submission in this benchmark's
own process (the floor: the check's own work) and through the sandbox's worker. Each case runs in a
cgroup of its own, cases alternating, medians of the rounds. A workload of no requests gives each case's
fixed cost (Python, the imports, a worker's start), taken off both: a cost linear in the requests shows
as a ratio (2N - 0) / (N - 0) near 2.

    python -m benchmarks.bench_crowd [--requests 600] [--rounds 3] [--helpers PATH]

`--helpers` times another version of the suite's helpers (another checkout's `_cb_helpers.py`).

Needs write access to the cgroup hierarchy (cgroup v2, or v1's cpuacct controller): run it as root.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from benchmarks.cpu import Measured, alternate, run_in_group

ROOT = Path(__file__).resolve().parent.parent

REFERENCE = ROOT / "solutions" / "continuous_batching" / "scheduler.py"
HELPERS = ROOT / "hidden_tests" / "continuous_batching" / "_cb_helpers.py"
ARRIVALS_A_STEP = 8  # with 8-24 new tokens each, fewer than the crowd's seats finish a step: no backlog grows


def workload(helpers: Any, requests: int) -> Any:
    """The crowd profile with `requests` requests arriving ARRIVALS_A_STEP a step."""
    helpers.PROFILES["bench"] = dict(helpers.PROFILES["crowd"], n=(requests, requests),
                                     window=max(4, requests // ARRIVALS_A_STEP))
    sc = helpers.random_scenario("bench", "bench")
    return replace(sc, max_seqs=max(sc.max_seqs, 300))


def one(case: str, requests: int, helpers_path: Path) -> None:
    """The work of one case: the check of one workload, as the crowd test does it."""
    from grader.confined.limits import Limits
    from grader.harness.client import Scenario
    from grader.harness.inprocess import LocalNamespace, load_module
    from tests.helpers import worker_for

    helpers = load_module(helpers_path, "_cb_helpers_bench")
    reference = vars(load_module(REFERENCE, "reference_bench"))
    sc = workload(helpers, requests)
    if case == "floor":
        helpers.run_submission(LocalNamespace(vars(load_module(REFERENCE, "submission_bench"))), sc,
                               helpers.run_reference(reference, sc))
        return

    class Names:  # the `ns` fixture's scenario side, over the worker
        def __init__(self, client: Any) -> None:
            self.client = client

        def scenario(self) -> Scenario:
            return Scenario(self.client, ["Scheduler", "Req"])

    with worker_for(REFERENCE.read_text(), Limits(call_timeout_s=60, import_timeout_s=10)) as client:
        helpers.run_submission(Names(client), sc, helpers.run_reference(reference, sc))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=600, help="N: the smaller workload's requests")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--helpers", type=Path, default=HELPERS, help="the suite helpers to time")
    parser.add_argument("--one", nargs=2, metavar=("CASE", "REQUESTS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        one(args.one[0], int(args.one[1]), args.helpers)
        return
    sizes = (0, args.requests, 2 * args.requests)
    names = [f"{case} {size}" for case in ("floor", "sandboxed") for size in sizes]

    def measure(name: str, number: int) -> Measured:
        case, size = name.split()
        found, _ = run_in_group(f"grader-bench-crowd-{number}-{case}-{size}",
                                lambda group: [sys.executable, "-m", "benchmarks.bench_crowd", "--one", case, size,
                                               "--helpers", str(args.helpers)], cwd=ROOT)
        return found

    series = alternate(names, args.rounds, measure)
    print(f"the crowd check ({args.helpers}), {sizes[1]} and {sizes[2]} requests arriving {ARRIVALS_A_STEP} "
          f"a step, medians of {args.rounds} rounds (CPU of each case's cgroup; 0: the fixed cost):")
    for case in ("floor", "sandboxed"):
        fixed, small, large = (series[f"{case} {size}"].median_cpu() for size in sizes)
        spreads = "  ".join(f"{size}: {series[f'{case} {size}'].median_cpu():6.2f} s "
                            f"({series[f'{case} {size}'].spread_cpu()})" for size in sizes)
        print(f"  {case:9s}  {spreads}  ratio {(large - fixed) / (small - fixed):.2f}")
    floor = series[f"floor {sizes[2]}"].median_cpu() - series["floor 0"].median_cpu()
    sandboxed = series[f"sandboxed {sizes[2]}"].median_cpu() - series["sandboxed 0"].median_cpu()
    print(f"  the check of {sizes[2]} requests, fixed costs taken off: sandboxed / floor {sandboxed / floor:.2f}x")


if __name__ == "__main__":
    main()
