"""A stand-in for Ubuntu 22.04's image as the platforms use it: /usr/bin/python3 is Python 3.10.

No registry is reachable, so the image is the Debian stand-in (the grading image's base with the
packages a bundle installs) with a Python 3.10 of this machine (pyenv's, or any other build) copied to
/opt/python3.10 and made /usr/bin/python3, and the pure-Python packages the grader needs installed
for it, as a course's image prepared in advance has them. Debian's own python3 packages stay for
apt, under their own interpreter. Built once, kept by its tag.
"""

from __future__ import annotations

import hashlib
import io
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

PROJECT = Path(__file__).resolve().parent.parent
CHECK_PYTHON = PROJECT / "grader" / "bundles" / "files" / "check-python.sh"
PREFIX = "/opt/python3.10"
# What the bundle's grading imports (check-python.sh pins their versions).
PACKAGES = ("pytest", "pytest-timeout", "Jinja2", "rich", "tomli", "exceptiongroup", "hypothesis")
DOCKERFILE = f"""\
ARG BASE
FROM $BASE
COPY python {PREFIX}
# The interpreter's own rpath may be unreadable in the image: its library where the loader looks too.
RUN cp {PREFIX}/lib/libpython3.10.so.1.0 /usr/lib/x86_64-linux-gnu/ \\
 && ln -sf {PREFIX}/bin/python3.10 /usr/bin/python3.10 \\
 && ln -sf python3.10 /usr/bin/python3 \\
 && /usr/bin/python3 -c 'import sys; assert sys.version_info[:2] == (3, 10), sys.version'
"""


def python310() -> str | None:
    """A Python 3.10 that runs (a pyenv shim on the PATH may name one that is not installed)."""
    import shutil

    candidates = [str(path) for root in (Path.home() / ".pyenv" / "versions", Path("/opt/python")) if root.is_dir()
                  for path in sorted(root.glob("3.10*/bin/python3.10"))]
    candidates += [found for found in [shutil.which("python3.10")] if found]
    for candidate in candidates:
        if subprocess.run([candidate, "-c", "pass"], capture_output=True).returncode == 0:
            return candidate
    return None


def constraints() -> str:
    return subprocess.run(["sh", str(CHECK_PYTHON), "--constraints"], check=True, capture_output=True,
                          text=True).stdout


def install_packages(interpreter: str, target: Path) -> None:
    """The grader's pure-Python packages for `interpreter`, at check-python.sh's pinned versions."""
    with tempfile.NamedTemporaryFile("w", suffix=".txt") as pinned:
        pinned.write(constraints())
        pinned.flush()
        subprocess.run([interpreter, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                        "--no-warn-script-location", "--target", str(target), "-c", pinned.name, *PACKAGES],
                       check=True, capture_output=True, text=True)


def tag_for(base: str, interpreter: str) -> str:
    home = Path(interpreter).resolve().parent.parent
    version = subprocess.run([interpreter, "-c", "import sys; print(sys.version)"], check=True, capture_output=True,
                             text=True).stdout
    digest = hashlib.sha256(f"{base}\0{home}\0{version}\0{constraints()}\0{DOCKERFILE}".encode()).hexdigest()
    return f"grader-python310:{digest[:16]}"


def ensure_python310_base(client, base: str, say=print) -> str | None:
    """The stand-in's tag, built only if missing; None where this machine has no Python 3.10."""
    interpreter = python310()
    if interpreter is None:
        return None
    tag = tag_for(base, interpreter)
    try:
        client.images.get(tag)
        return tag
    except Exception:  # docker.errors.ImageNotFound
        pass
    say(f"building {tag}: {base} with {interpreter} as /usr/bin/python3")
    home = Path(interpreter).resolve().parent.parent
    with tempfile.TemporaryDirectory(prefix="python310-") as folder:
        site = Path(folder) / "site"
        install_packages(interpreter, site)
        context = io.BytesIO()
        with tarfile.open(fileobj=context, mode="w") as tar:
            dockerfile = DOCKERFILE.encode()
            info = tarfile.TarInfo("Dockerfile")
            info.size = len(dockerfile)
            tar.addfile(info, io.BytesIO(dockerfile))

            def readable(member: tarfile.TarInfo) -> tarfile.TarInfo | None:
                if "__pycache__" in member.name or "/test/" in member.name or member.name.endswith("/test"):
                    return None  # the standard library's own tests: a third of the tree, never imported
                member.uid = member.gid = 0
                member.uname = member.gname = "root"
                member.mode |= 0o444 | (0o111 if member.isdir() or member.mode & 0o100 else 0)
                return member

            tar.add(str(home), arcname="python", filter=readable)
            tar.add(str(site), arcname="python/lib/python3.10/site-packages", filter=readable)
        context.seek(0)
        client.images.build(fileobj=context, custom_context=True, tag=tag, buildargs={"BASE": base}, rm=True,
                            forcerm=True, network_mode="none")
    return tag


if __name__ == "__main__":
    sys.path.insert(0, str(PROJECT))
    from grader.bundles import packages_for
    from grader.core.exercise import load_exercise
    from grader.sandbox.engine import engine_client
    from grader.sandbox.image import ensure_base

    client = engine_client()
    print(ensure_python310_base(client, ensure_base(client, print, packages_for(load_exercise(os.environ.get(
        "EXERCISE", "continuous_batching"))))))
