# A solution that uses the whole of the exercise's process limit (`processes`, 32): every Scheduler starts a
# pool of 32 threads that are all running at once (each waits for the others) before it sets up. The
# grader's own processes under the worker's account (its fork servers, the next test's worker) must not
# take from that share. Correct all the same.
import threading

_plain_init = Scheduler.__init__
_THREADS = 32


def _init_after_a_full_pool(self, *args, **kwargs):
    everyone = threading.Barrier(_THREADS + 1)
    pool = [threading.Thread(target=everyone.wait, args=(30,)) for _ in range(_THREADS)]
    for thread in pool:
        thread.start()
    everyone.wait(30)  # all 32 threads are alive together here
    for thread in pool:
        thread.join()
    _plain_init(self, *args, **kwargs)


Scheduler.__init__ = _init_after_a_full_pool
