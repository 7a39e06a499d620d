"""The trusted in-sandbox side: the pytest plugin, the proxies and the confinement of the workers.

Everything under `grader.harness` runs inside the sandbox and depends only on the standard library,
pytest and `grader.confined`, at the versions Debian bookworm ships. What runs next to untrusted code
(the zygote, the loader, the worker) is `grader.confined`, in processes of its own, as another user
where possible. The host imports `grader.harness.contract` alone.
"""
