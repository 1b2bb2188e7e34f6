"""The node image for the docker runtime, built here with no registry.

Two layers, each cached by a content hash:

1. `sleuth-base:<hash>`: a Debian bookworm root filesystem made by
   `debootstrap --variant=minbase` from the machine's own Debian mirror, with
   python3, iproute2, iptables and procps, turned into an image by
   `docker import`. Built once per machine (about a minute).
2. `sleuth-node:<hash>`: the base plus a venv at /opt/sleuth holding sleuth
   and what a node needs, installed offline from a wheelhouse built on the
   host (pip inside the image cannot verify PyPI's certificate). Rebuilt only
   when the wheels change.

A node needs only a few of sleuth's dependencies (`NODE_PACKAGES`); the
checkers, reports, CLI and runtimes need the rest (matplotlib, scipy,
paramiko, docker, jinja2 …), which a node never imports. So the wheelhouse
holds the sleuth wheel built `--no-deps` plus wheels of `NODE_PACKAGES`
only, at the versions sleuth's own metadata requires (written to
`node-requirements.txt` beside them), and `install_command` installs exactly
that: the same for the docker image and the ssh runtime.

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
import zipfile

PACKAGES = ["python3", "python3-venv", "iproute2", "iptables", "procps", "ca-certificates", "openssh-server"]

# What a node process imports beyond the standard library (cluster/node.py and the roles it
# runs): orjson (storage log and RPC), pyarrow (sealed Parquet), sqlglot (the coordinator's
# SQL). The one list of them; their versions come from sleuth's own requirements.
NODE_PACKAGES = ("orjson", "pyarrow", "sqlglot", "psycopg2-binary")  # the last: source nodes
NODE_REQUIREMENTS = "node-requirements.txt"


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


def ensure_base(progress=print, packages: list[str] = PACKAGES, name: str = "sleuth-base") -> str:
    """A Debian bookworm image of `packages` (debootstrap, `docker import`), tagged by their hash."""
    tag = f"{name}:" + hashlib.sha256(" ".join(packages).encode()).hexdigest()[:12]
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
        _run(["debootstrap", "--variant=minbase", f"--include={','.join(packages)}", "bookworm", root, mirror()])
        shutil.rmtree(os.path.join(root, "var/cache/apt/archives"), ignore_errors=True)
        tar = os.path.join(tmp, "rootfs.tar")
        _run(["tar", "-C", root, "-cf", tar, "."])
        progress("docker import …")
        _run(["docker", "import", tar, tag])
    return tag


def ensure_layer(packages: list[str], name: str, progress=print) -> str:
    """The base image (`ensure_base`) plus Debian `packages`, installed by apt in a container of
    the base from the same mirror and committed, tagged by the base and the packages' hash:
    seconds where a root filesystem of its own takes debootstrap minutes."""
    base = ensure_base(progress)
    tag = f"{name}:" + hashlib.sha256(" ".join([base, *packages]).encode()).hexdigest()[:12]
    if _exists(tag):
        return tag
    progress(f"adding {', '.join(packages)} to {base} (apt from {mirror()}) …")
    script = (f"echo 'deb {mirror()} bookworm main' > /etc/apt/sources.list && apt-get update -qq && "
              "DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "
              + " ".join(packages) + " && rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb")
    container = _client().containers.run(base, ["sh", "-c", script], detach=True)
    try:
        code = container.wait(timeout=900)["StatusCode"]
        if code != 0:
            out = container.logs().decode(errors="replace").strip()[-800:]
            raise ImageError(f"apt-get install {' '.join(packages)} in {base} exited {code}: {out}")
        container.commit(repository=name, tag=tag.split(":", 1)[1])
    finally:
        container.remove(force=True)
    return tag


def node_requirements(sleuth_wheel: str, names=NODE_PACKAGES, extras: tuple[str, ...] = ()) -> list[str]:
    """sleuth's own requirements (the wheel's Requires-Dist) of the packages a node needs.

    A Requires-Dist value is `name[extras] specifiers[; marker]` (PEP 508); the name is
    all we match on, and a requirement with a marker (an extra's) is none of a node's.
    `names=None`: every requirement without a marker, and those of the given `extras`
    (`extra == "spark"`), in the wheel's order."""
    with zipfile.ZipFile(sleuth_wheel) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        lines = z.read(meta).decode().splitlines()
    out = {}
    for line in lines:
        if line.startswith("Requires-Dist:"):
            req = line.split(":", 1)[1].strip()
            name = re.match(r"[A-Za-z0-9._-]+", req).group(0).lower()
            if names is None:
                m = re.search(r"""extra\s*==\s*["']([^"']+)["']""", req)
                if ";" not in req or (m and m.group(1) in extras):
                    out[name] = req.split(";")[0].strip()
            elif name in names and ";" not in req:
                out[name] = req
    if names is None:
        return list(out.values())
    missing = set(names) - set(out)
    if missing:
        raise ImageError(f"sleuth's metadata does not require {', '.join(sorted(missing))}")
    return [out[n] for n in names]


def pinned(req: str) -> str:
    """`req` pinned to the version installed here (the driver's: Spark's executors must run
    the same pyspark, pandas and pyarrow as the driver), or as it is if none is installed."""
    from importlib import metadata

    name, extras = re.match(r"([A-Za-z0-9._-]+)(\[[^\]]*\])?", req).groups()
    try:
        return f"{name}{extras or ''}=={metadata.version(name)}"
    except metadata.PackageNotFoundError:
        return req


def wheelhouse(project_root: str, into: str, names=NODE_PACKAGES, extras: tuple[str, ...] = (),
               pin: bool = False) -> str:
    """The sleuth wheel (no dependencies) and wheels of what a node needs, with the list
    of those in `node-requirements.txt`; returns their content hash. `names`, `extras`: as
    `node_requirements`; `pin`: at the versions installed here (`pinned`)."""
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", into, project_root])
    (sleuth_wheel,) = glob.glob(os.path.join(into, "sleuth-*.whl"))
    reqs = os.path.join(into, NODE_REQUIREMENTS)
    wanted = node_requirements(sleuth_wheel, names, extras)
    with open(reqs, "w") as f:
        f.write("".join((pinned(r) if pin else r) + "\n" for r in wanted))
    _run([sys.executable, "-m", "pip", "wheel", "-q", "-w", into, "-r", reqs])
    h = hashlib.sha256(open(reqs, "rb").read())
    for path in sorted(glob.glob(os.path.join(into, "*.whl"))):
        h.update(os.path.basename(path).encode())
        if os.path.basename(path).startswith("sleuth-"):  # its files, not the zip's timestamps
            with zipfile.ZipFile(path) as z:
                for name in sorted(z.namelist()):
                    h.update(name.encode() + b"\0" + z.read(name))
    return h.hexdigest()[:12]


def install_command(pip: str, wheels: str) -> str:
    """The shell command that installs a node from a wheelhouse, offline: the node's
    requirements, then sleuth itself without its other dependencies."""
    return (f"{pip} install -q --no-compile --no-index --find-links {wheels} -r {wheels}/{NODE_REQUIREMENTS} && "
            f"{pip} install -q --no-compile --no-index --no-deps --find-links {wheels} sleuth")


def dockerfile(base: str) -> str:
    """The node image: the base, and a venv at /opt/sleuth installed from the wheelhouse."""
    return (f"FROM {base}\nCOPY wheels /wheels\n"
            f"RUN python3 -m venv /opt/sleuth && {install_command('/opt/sleuth/bin/pip', '/wheels')} "
            "&& rm -rf /wheels\n")


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
            f.write(dockerfile(base))
        _client().images.build(path=ctx, tag=tag, rm=True, forcerm=True)
    return tag


if __name__ == "__main__":
    print(ensure_image(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                       progress=lambda m: print(m, file=sys.stderr)))
