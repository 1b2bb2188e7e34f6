"""The node image for the docker runtime, built here with no registry.

Two layers, each cached by a content hash:

1. `sleuth-base:<hash>`: a Debian bookworm root filesystem made by
   `debootstrap --variant=minbase` from the machine's own Debian mirror, with
   python3, iproute2, iptables and procps, turned into an image by
   `docker import`. Built once per machine (about a minute).
2. `sleuth-node:<hash>`: the base plus a venv at /opt/sleuth holding sleuth
   and its dependencies, installed offline from a wheelhouse built on the
   host (pip inside the image cannot verify PyPI's certificate). Rebuilt only
   when the wheels change.

`python -m sleuth.cluster.image` builds (or finds) the image and prints its tag.
"""

from __future__ import annotations

import glob
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile

PACKAGES = ["python3", "python3-venv", "iproute2", "iptables", "procps", "ca-certificates", "openssh-server"]


class ImageError(Exception):
    pass


def _run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if p.returncode != 0:
        raise ImageError(f"{' '.join(cmd[:3])} … failed: {(p.stderr or p.stdout).strip()[-800:]}")
    return p


def _client():
    import docker
    return docker.from_env()


def _exists(tag: str) -> bool:
    import docker
    try:
        _client().images.get(tag)
        return True
    except docker.errors.ImageNotFound:
        return False


def mirror() -> str:
    for path in glob.glob("/etc/apt/sources.list.d/*.sources"):
        text = open(path).read()
        for stanza in text.split("\n\n"):
            if re.search(r"^Suites:.*\bbookworm\b", stanza, re.M):
                m = re.search(r"^URIs:\s*(\S+)", stanza, re.M)
                if m:
                    return m.group(1)
    if os.path.exists("/etc/apt/sources.list"):
        m = re.search(r"^deb\s+(\S+)\s+bookworm\s", open("/etc/apt/sources.list").read(), re.M)
        if m:
            return m.group(1)
    return "http://deb.debian.org/debian"


def ensure_base(progress=print) -> str:
    tag = "sleuth-base:" + hashlib.sha256(" ".join(PACKAGES).encode()).hexdigest()[:12]
    if _exists(tag):
        return tag
    if not shutil.which("debootstrap"):
        progress("installing debootstrap …")
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        _run(["apt-get", "update", "-qq"], env=env)
        _run(["apt-get", "install", "-y", "-qq", "debootstrap"], env=env)
    with tempfile.TemporaryDirectory(prefix="sleuth-rootfs-") as tmp:
        root = os.path.join(tmp, "rootfs")
        progress(f"building the base root filesystem with debootstrap from {mirror()} (about a minute) …")
        _run(["debootstrap", "--variant=minbase", f"--include={','.join(PACKAGES)}", "bookworm", root, mirror()])
        shutil.rmtree(os.path.join(root, "var/cache/apt/archives"), ignore_errors=True)
        tar = os.path.join(tmp, "rootfs.tar")
        _run(["tar", "-C", root, "-cf", tar, "."])
        progress("docker import …")
        _run(["docker", "import", tar, tag])
    return tag


def wheelhouse(project_root: str, into: str) -> str:
    """Wheels of sleuth and its dependencies; returns their content hash."""
    _run([sys.executable, "-m", "pip", "wheel", "-q", "-w", into, project_root])
    h = hashlib.sha256()
    for path in sorted(glob.glob(os.path.join(into, "*.whl"))):
        h.update(os.path.basename(path).encode())
        if os.path.basename(path).startswith("sleuth-"):
            h.update(open(path, "rb").read())
    return h.hexdigest()[:12]


def ensure_image(project_root: str, *, progress=print) -> str:
    base = ensure_base(progress)
    with tempfile.TemporaryDirectory(prefix="sleuth-image-") as ctx:
        wheels = os.path.join(ctx, "wheels")
        os.makedirs(wheels)
        digest = wheelhouse(project_root, wheels)
        tag = f"sleuth-node:{hashlib.sha256((base + digest).encode()).hexdigest()[:12]}"
        if _exists(tag):
            return tag
        progress(f"building {tag} …")
        with open(os.path.join(ctx, "Dockerfile"), "w") as f:
            f.write(f"FROM {base}\nCOPY wheels /wheels\n"
                    "RUN python3 -m venv /opt/sleuth && /opt/sleuth/bin/pip install -q --no-index "
                    "--find-links /wheels sleuth && rm -rf /wheels\n")
        _client().images.build(path=ctx, tag=tag, rm=True, forcerm=True)
    return tag


if __name__ == "__main__":
    print(ensure_image(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                       progress=lambda m: print(m, file=sys.stderr)))
