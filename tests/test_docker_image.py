"""The Docker grading image: built offline, tagged by content, and fit to run the harness sandboxed.

Skipped without a Docker engine, except with CI=true where that is a failure (see conftest.py).
"""

from __future__ import annotations

import errno
import re
from pathlib import Path

import pytest

from grader.sandbox.image import (
    IMAGE_DIRS,
    base_tag,
    harness_files,
    harness_tag,
    image_tag,
)

# The first build bootstraps Debian with mmdebstrap; leave it time on a slow mirror.
pytestmark = pytest.mark.timeout(900)

SANDBOXED = dict(network_mode="none", read_only=True, cap_drop=["ALL"], security_opt=["no-new-privileges"],
                 pids_limit=64, mem_limit="512m", remove=True)


def run(client, image: str, script: str) -> str:
    return client.containers.run(image, ["python3", "-c", script], **SANDBOXED).decode()


# --- the tag follows the harness code (no engine needed) ------------------------------------------


def write_package(root: Path, files: list[tuple[str, bytes]]) -> Path:
    for relative, data in files:
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return root / "grader"


def edit(package: Path) -> None:
    path = package / "harness" / "__init__.py"
    path.write_bytes(path.read_bytes() + b"\n# one more line\n")


def one_byte(package: Path) -> None:
    path = package / "__init__.py"
    data = bytearray(path.read_bytes())
    data[-1] ^= 1
    path.write_bytes(bytes(data))


def add_module(package: Path) -> None:
    (package / "harness" / "extra.py").write_text("X = 1\n")


def add_subpackage_module(package: Path) -> None:
    (package / "harness" / "sub").mkdir()
    (package / "harness" / "sub" / "deep.py").write_text("Y = 2\n")


def rename(package: Path) -> None:
    (package / "harness" / "__init__.py").rename(package / "harness" / "renamed.py")


def pyc(package: Path) -> None:
    (package / "harness" / "__pycache__").mkdir(exist_ok=True)
    (package / "harness" / "__pycache__" / "plugin.cpython-311.pyc").write_bytes(b"\x00" * 16)


def not_python(package: Path) -> None:
    (package / "harness" / "NOTES.md").write_text("not shipped\n")


def host_module(package: Path) -> None:
    (package / "cli.py").write_text("# host side, not in the image\n")


@pytest.mark.unit
@pytest.mark.parametrize("change", [edit, one_byte, add_module, add_subpackage_module, rename])
def test_tag_changes_when_harness_code_changes(tmp_path, change):
    files = harness_files()  # read once: others may be editing the real tree
    package = write_package(tmp_path, files)
    original = harness_tag(harness_files(package))
    assert original == harness_tag(files), "the tag depends on where the tree lives, not only on its content"
    change(package)
    assert harness_tag(harness_files(package)) != original


@pytest.mark.unit
@pytest.mark.parametrize("change", [pyc, not_python, host_module])
def test_tag_ignores_what_is_not_shipped(tmp_path, change):
    package = write_package(tmp_path, harness_files())
    original = harness_tag(harness_files(package))
    change(package)
    assert harness_tag(harness_files(package)) == original


@pytest.mark.unit
def test_tag_follows_the_base():
    files = harness_files()
    assert harness_tag(files, base="grader-base:0000000000000000") != harness_tag(files, base=base_tag())
    assert image_tag() == harness_tag(files)
    assert re.fullmatch(r"grader-harness:[0-9a-f]{16}", image_tag())
    assert re.fullmatch(r"grader-base:[0-9a-f]{16}", base_tag())


# --- the image itself ------------------------------------------------------------------------------


def test_image_builds_or_exists(docker_client, grading_image):
    assert grading_image.startswith("grader-harness:")
    image = docker_client.images.get(grading_image)
    assert grading_image in image.tags
    assert image.labels["org.grader.base"] == base_tag()
    docker_client.images.get(base_tag())


def test_container_runs_pytest_offline_and_read_only(docker_client, grading_image):
    out = run(docker_client, grading_image,
              "import pytest, pytest_timeout, hypothesis; print(pytest.__version__)")
    assert re.fullmatch(r"7\.2\.\d+", out.strip()), out


def test_container_has_no_network_and_a_read_only_root(docker_client, grading_image):
    out = run(docker_client, grading_image, """
import socket
print(",".join(sorted(name for _, name in socket.if_nameindex())))
try:
    open("/opt/grader/grader/planted.py", "w")
except OSError as exc:
    print(exc.errno)
else:
    print("writable")
""").split()
    assert out == ["lo", str(errno.EROFS)]


def test_image_layout(docker_client, grading_image):
    out = run(docker_client, grading_image, """
import os, stat, grader
print("module", grader.__file__)
paths = ["/job", "/work"]
for top, dirs, files in os.walk("/opt/grader"):
    paths += [os.path.join(top, name) for name in dirs + files]
for path in sorted(paths):
    st = os.lstat(path)
    kind = "d" if stat.S_ISDIR(st.st_mode) else "f" if stat.S_ISREG(st.st_mode) else "?"
    print(kind, oct(stat.S_IMODE(st.st_mode)), st.st_uid, st.st_gid, path)
""")
    lines = out.splitlines()
    assert lines[0] == "module /opt/grader/grader/__init__.py"
    entries = {line.split()[-1]: line.split()[:-1] for line in lines[1:]}
    for path, mode in IMAGE_DIRS:
        assert entries["/" + path.strip("/")] == ["d", oct(mode), "0", "0"]
    shipped = {path for path in entries if path.startswith("/opt/")}
    for path in shipped:
        kind = entries[path][0]
        assert entries[path] == [kind, "0o755" if kind == "d" else "0o644", "0", "0"], path
    files = harness_files()
    if harness_tag(files) == grading_image:  # unless the harness changed while the tests ran
        sources = {f"/opt/grader/{rel}" for rel, _ in files}
        compiled = {p for p in shipped if entries[p][0] == "f" and "/__pycache__/" in p}
        assert {p for p in shipped if entries[p][0] == "f"} - compiled == sources
        # each source compiled in the image itself (a grading's root is read-only), and nothing else
        assert {p.replace("/__pycache__", "").rsplit(".cpython-", 1)[0] + ".py" for p in compiled} == sources
