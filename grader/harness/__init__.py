"""The trusted in-sandbox side: the pytest plugin, the worker protocol and the proxies.

Everything under `grader.harness` runs inside the sandbox and depends only on the standard library
and pytest (plus pytest-timeout), at the versions Debian bookworm ships. `worker.py` is the one module
that runs next to untrusted code, in a separate process, as a separate user where possible.
"""
