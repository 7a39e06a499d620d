"""Fresh Debian 12, Debian 13 and Ubuntu 24.04 machines, as containers, for the README's two commands.

Each is bootstrapped by mmdebstrap from its own archive (no registry is reachable here): the `apt`
variant with only what a fresh server is sure to have beside it and the README's words need, `sudo`,
`passwd` (a user who may use sudo, `ana`, is made) and `ca-certificates`. No Python: the README's command
must bring it (python3-venv pulls python3 in). The certificate authorities this machine trusts are copied
in, so that pip reaches PyPI through whatever proxy this machine's network puts in between, as a fresh
machine on the same network would be set up to. Built once, kept by a tag that changes with the recipe.

Ubuntu's archive is signed with Ubuntu's keys, which Debian 12 does not package: the keyring is taken from
Ubuntu's own `ubuntu-keyring` package, checked against the SHA-256 pinned here before it is trusted.
"""

from __future__ import annotations

import hashlib
import io
import subprocess
import tarfile
import tempfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from grader.sandbox.image import MERGED_USR_HOOKS  # the hook the grading image's base uses too

PROJECT = Path(__file__).resolve().parent.parent
RECIPE_VERSION = 1
PACKAGES = ("ca-certificates", "sudo", "passwd")
SUDO_USER = "ana"
LOCAL_AUTHORITIES = Path("/usr/local/share/ca-certificates")

UBUNTU_MIRROR = "http://archive.ubuntu.com/ubuntu"
UBUNTU_KEYRING_DEB = "pool/main/u/ubuntu-keyring/ubuntu-keyring_2023.11.28.1_all.deb"
UBUNTU_KEYRING_SHA256 = "36de43b15853ccae0028e9a767613770c704833f82586f28eb262f0311adb8a8"


@dataclass(frozen=True)
class Machine:
    name: str  # as the README says it: "Debian 13"
    suite: str
    mirror: str = "http://deb.debian.org/debian"
    components: str = "main"
    ubuntu: bool = False


MACHINES = {
    "debian-12": Machine("Debian 12", "bookworm"),
    "debian-13": Machine("Debian 13", "trixie"),
    "ubuntu-24.04": Machine("Ubuntu 24.04", "noble", UBUNTU_MIRROR, "main,universe", ubuntu=True),
}


def _authorities() -> list[Path]:
    return sorted(LOCAL_AUTHORITIES.glob("*.crt")) if LOCAL_AUTHORITIES.is_dir() else []


def tag_for(machine: Machine) -> str:
    recipe = f"{RECIPE_VERSION}\0{machine}\0{PACKAGES}\0{SUDO_USER}"
    recipe += "".join(f"\0{path.name}\0{path.read_bytes().hex()}" for path in _authorities())
    return f"grader-fresh-{machine.suite}:{hashlib.sha256(recipe.encode()).hexdigest()[:16]}"


def _ubuntu_keyring(folder: Path) -> Path:
    """Ubuntu's archive keyring, from the pinned package, into `folder`."""
    with urllib.request.urlopen(f"{UBUNTU_MIRROR}/{UBUNTU_KEYRING_DEB}", timeout=120) as answer:
        package = answer.read()
    digest = hashlib.sha256(package).hexdigest()
    if digest != UBUNTU_KEYRING_SHA256:
        raise RuntimeError(f"ubuntu-keyring's package has SHA-256 {digest}, not the pinned {UBUNTU_KEYRING_SHA256}")
    deb = folder / "ubuntu-keyring.deb"
    deb.write_bytes(package)
    subprocess.run(["dpkg-deb", "-x", str(deb), str(folder / "keyring")], check=True, capture_output=True)
    return folder / "keyring" / "usr" / "share" / "keyrings" / "ubuntu-archive-keyring.gpg"


def _exists(tag: str) -> bool:
    return subprocess.run(["docker", "image", "inspect", tag], capture_output=True, timeout=60).returncode == 0


def ensure_machine(key: str) -> str:
    """The tag of the machine's image, bootstrapped if missing (30-60 s, most of it downloads)."""
    machine = MACHINES[key]
    tag = tag_for(machine)
    if _exists(tag):
        return tag
    with tempfile.TemporaryDirectory(prefix="grader-fresh-") as scratch:
        folder = Path(scratch)
        folder.chmod(0o755)  # apt reads the keyring as its own unprivileged account (_apt)
        authorities = folder / "authorities"
        authorities.mkdir()
        for path in _authorities():
            (authorities / path.name).write_bytes(path.read_bytes())
        hooks = [
            f'--customize-hook=copy-in {" ".join(str(p) for p in sorted(authorities.iterdir()))} '
            f"{LOCAL_AUTHORITIES}" if any(authorities.iterdir()) else "",
            '--customize-hook=chroot "$1" update-ca-certificates',
            f'--customize-hook=chroot "$1" useradd --create-home --shell /bin/bash {SUDO_USER}',
            f"--customize-hook=echo '{SUDO_USER} ALL=(ALL) NOPASSWD:ALL' > \"$1/etc/sudoers.d/{SUDO_USER}\"",
        ]
        options = ["--variant=apt", f"--components={machine.components}", f"--include={','.join(PACKAGES)}",
                   *[hook for hook in hooks if hook]]
        if machine.ubuntu:  # its /usr is merged by its own package, which Debian's hook would clash with
            options.append(f"--keyring={_ubuntu_keyring(folder)}")
        else:
            options.append(f"--hook-dir={MERGED_USR_HOOKS}")
        rootfs = folder / "rootfs.tar"
        built = subprocess.run(["mmdebstrap", *options, machine.suite, str(rootfs), machine.mirror],
                               capture_output=True, text=True, timeout=1200)
        if built.returncode != 0:
            raise RuntimeError(f"mmdebstrap {machine.suite} failed:\n{built.stdout[-3000:]}{built.stderr[-3000:]}")
        subprocess.run(["docker", "import", "--change", "CMD [\"sleep\", \"infinity\"]", str(rootfs), tag],
                       check=True, capture_output=True, timeout=600)
    return tag


def project_archive() -> bytes:
    """The project's files as a fresh clone has them (those git tracks, as they are in the work tree)."""
    names = subprocess.run(["git", "-C", str(PROJECT), "ls-files", "-z"], check=True, capture_output=True
                           ).stdout.decode().split("\0")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for name in names:
            path = PROJECT / name
            if name and path.is_file():
                archive.add(path, arcname=f"grader/{name}", recursive=False)
    return buffer.getvalue()
