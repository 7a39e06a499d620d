"""Benchmark: the cost of the worker's protocol, by how a test drives the submission.

The reference scheduler runs a generated workload (a few dozen requests running at once) of 1,000 and
10,000 requests three ways: in this process, through proxies (one round trip per call) and as one
scenario (one message for the whole workload, `ns.scenario()`). Then an empty call is timed with no
object of the submission held, and with 10,000 held: a call must cost the same whatever the worker holds.

    python -m benchmarks.bench_protocol [--sizes 1000 10000] [--calls 2000]

The worker is started as the grader starts it (namespaces where the machine has them; as root, a
worker account: set GRADER_WORKER_UIDS to keep it apart from other gradings).
"""

from __future__ import annotations

import argparse
import importlib.util
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from grader.confined.limits import Limits
from grader.harness.client import Scenario
from tests.helpers import worker_for

ROOT = Path(__file__).resolve().parent.parent

REFERENCE = ROOT / "solutions" / "continuous_batching" / "scheduler.py"
EXTRA = '''

def nothing():
    return None


def many(n):
    return [Req(i, 1, 1) for i in range(n)]
'''

Workload = tuple[int, int, int, list[tuple[int, int, int, int]]]  # budget, seats, kv, [(rid, prompt, new, at)]


def workload(n: int) -> Workload:
    """n requests (prompts of 1-24 tokens, 1-4 new tokens) arriving at about the rate they are served,
    so that a few dozen run at once whatever n is."""
    rng = random.Random(n)
    window = max(4, n // 8)
    reqs = sorted(((rng.randint(1, 24), rng.randint(1, 4), 1 + rng.randrange(window)) for _ in range(n)),
                  key=lambda r: r[2])
    return 256, 32, 10 ** 9, [(rid, p, m, at) for rid, (p, m, at) in enumerate(reqs)]


def drive(names: Any, work: Workload) -> int:
    """Run the workload step by step with objects (local ones, or proxies); returns the steps taken."""
    budget, seats, kv, reqs = work
    sched = names["Scheduler"](budget, seats, kv)
    last = reqs[-1][3]
    i = step = 0
    while True:
        step += 1
        while i < len(reqs) and reqs[i][3] == step:
            rid, p, m, _ = reqs[i]
            sched.add(names["Req"](rid, p, m))
            i += 1
        plan = sched.schedule()
        if not plan and step > last:
            return step
        sched.complete(plan)


def scenario_of(client: Any, work: Workload, steps: int) -> Scenario:
    """The same run as one scenario; the number of steps comes from an in-process run."""
    budget, seats, kv, reqs = work
    sc = Scenario(client)
    sched = sc.new("Scheduler", budget, seats, kv)
    i = 0
    for step in range(1, steps + 1):
        while i < len(reqs) and reqs[i][3] == step:
            rid, p, m, _ = reqs[i]
            sc.call(sched, "add", sc.new("Req", rid, p, m))
            i += 1
        plan = sc.call(sched, "schedule")
        if step < steps:
            sc.call(sched, "complete", plan)
    return sc


def timed(action: Any) -> tuple[float, Any]:
    started = time.perf_counter()
    result = action()
    return time.perf_counter() - started, result


def empty_call(client: Any, calls: int) -> float:
    """The median of `calls` empty calls, in ms."""
    nothing = client.lookup("nothing")
    times = []
    for _ in range(calls):
        started = time.perf_counter()
        nothing()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()
    spec = importlib.util.spec_from_file_location("bench_reference", REFERENCE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    source = REFERENCE.read_text() + EXTRA
    limits = Limits(call_timeout_s=30, import_timeout_s=10)

    print(f"{'requests':>9} {'steps':>6} {'in-process':>11} {'proxies':>18} {'scenario':>18} {'operations':>11}")
    for n in args.sizes:
        work = workload(n)
        local_s, steps = timed(lambda: drive(vars(module), work))  # noqa: B023 (called at once)
        with worker_for(source, limits) as client:
            proxies_s, _ = timed(lambda: drive({"Scheduler": client.lookup("Scheduler"),
                                                "Req": client.lookup("Req")}, work))  # noqa: B023 (called at once)
        with worker_for(source, limits) as client:
            sc = scenario_of(client, work, steps)
            scenario_s, seen = timed(sc.run)
            assert seen.error is None and len(seen) == len(sc.ops)
        print(f"{n:>9,} {steps:>6} {local_s:>10.3f}s {proxies_s:>8.3f}s ({proxies_s / local_s:>5.0f}x) "
              f"{scenario_s:>8.3f}s ({scenario_s / local_s:>5.0f}x) {len(sc.ops):>11,}")

    with worker_for(source, limits) as client:
        empty_call(client, args.calls)  # warm up (caches, the CPU's clock) before anything is compared
        none_held = empty_call(client, args.calls)
        held = client.lookup("many")(10_000)
        assert len(held) == 10_000
        many_held = empty_call(client, args.calls)
    print(f"\nan empty call (median of {args.calls:,}): {none_held:.3f} ms with no object held, "
          f"{many_held:.3f} ms with 10,000 held ({many_held / none_held:.2f}x)")


if __name__ == "__main__":
    main()
