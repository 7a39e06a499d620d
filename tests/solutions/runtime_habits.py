# Habits of a program written for one's own machine: it names the user it runs as (from the environment,
# getpass and the account database) and sizes a thread pool generously. Correct all the same.
import getpass
import os
import pwd
import time
from concurrent.futures import ThreadPoolExecutor

RUN_BY = f"{getpass.getuser()} ({pwd.getpwuid(os.getuid()).pw_name}, {os.environ['USER']})"

_plain_init = Scheduler.__init__


def _init_with_a_pool(self, *args, **kwargs):
    with ThreadPoolExecutor(max_workers=32) as pool:  # 32 threads at once: a pool sized for a big machine
        list(pool.map(time.sleep, [0.001] * 32))
    _plain_init(self, *args, **kwargs)
    self.owner = getpass.getuser()


Scheduler.__init__ = _init_with_a_pool
