"""A standalone Spark cluster in containers: a master and two workers, the driver on this host.

    python -m sleuth.spark.standalone up --docker [--share DIR ...] [--workers 2]
    python -m sleuth.spark.standalone down --docker

(`make spark-up CLUSTER=docker` / `make spark-down CLUSTER=docker`.) Each daemon
runs in its own container, with its own filesystem: a worker's scratch
(`SPARK_LOCAL_DIRS`, /tmp, $HOME) is its own, as on separate machines. The
containers sit on a private docker network of their own (`sleuth-spark-<id>`);
the host reaches the master at its address there, and the executors reach the
driver at the host's address on that network. What they share is only the
directories given with `--share` (default: `$SLEUTH_HOME`, default ~/.sleuth,
and the current directory), bind-mounted at the same path in every container,
so a `file:` path means the same file on the driver and on every executor.

The image is built here with no registry, as the reference cluster's node image
is (`sleuth.cluster.image`): the reference cluster's Debian bookworm base
(debootstrap; Python 3.11) with Java 17 added by apt (`SPARK_PACKAGES`,
`image.ensure_layer`), and a venv at /opt/sleuth
installed offline from a wheelhouse built on the host: sleuth and all its
requirements with the `spark` extra, pinned to the versions the driver runs
(pyspark, pandas and pyarrow must match the driver's). Both are cached by
content hash. The venv is first on the containers' PATH, so executors run its
`python3` (the driver asks for `python3` on any master that is not local;
`PYSPARK_PYTHON` overrides that).

State (`cluster.json`: names, master URL) lives in `$SLEUTH_HOME/spark-docker`;
`up` is idempotent and `down` removes exactly the recorded containers and
network. Every wait is bounded.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
import urllib.request
import uuid

from sleuth.spark.standalone import _load  # one reader of a cluster's state file

SPARK_PACKAGES = ["openjdk-17-jre-headless"]  # added to the reference cluster's base (python3, venv, procps …)
PREFIX = "sleuth-spark-"
LABEL = "sleuth-spark"
MASTER_PORT, UI_PORT = 7077, 8080
SPARK_HOME = "/opt/spark"  # a link to the venv's pyspark, which holds Spark's jars and bin/spark-class


def project_root() -> str:
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def default_state() -> str:
    home = os.environ.get("SLEUTH_HOME") or os.path.join(os.path.expanduser("~"), ".sleuth")
    return os.path.join(home, "spark-docker")


def default_shares() -> list[str]:
    home = os.environ.get("SLEUTH_HOME") or os.path.join(os.path.expanduser("~"), ".sleuth")
    return [os.path.realpath(home), os.path.realpath(os.getcwd())]


def dockerfile(base: str) -> str:
    """The base, a venv at /opt/sleuth with sleuth's requirements (`deps/`: a layer docker keeps
    while they are unchanged), then sleuth itself (`sleuth/`: the layer a change of sleuth rebuilds)."""
    from sleuth.cluster.image import NODE_REQUIREMENTS

    pip = "/opt/sleuth/bin/pip install -q --no-compile --no-index"
    return (f"FROM {base}\nCOPY deps /wheels\n"
            f"RUN python3 -m venv /opt/sleuth && {pip} --find-links /wheels -r /wheels/{NODE_REQUIREMENTS} "
            f"&& rm -rf /wheels && ln -s /opt/sleuth/lib/python3*/site-packages/pyspark {SPARK_HOME}\n"
            f"COPY sleuth /wheels\nRUN {pip} --no-deps --find-links /wheels sleuth && rm -rf /wheels\n"
            f"ENV PATH=/opt/sleuth/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "
            f"SPARK_HOME={SPARK_HOME} HOME=/root\n")


def ensure_image(root: str | None = None, progress=print) -> str:
    """The Spark image's tag (`sleuth-spark:<hash>`), built unless it exists."""
    import glob

    from sleuth.cluster import image

    base = image.ensure_layer(SPARK_PACKAGES, "sleuth-spark-base", progress)
    with tempfile.TemporaryDirectory(prefix="sleuth-spark-image-") as ctx:
        deps, own = os.path.join(ctx, "deps"), os.path.join(ctx, "sleuth")
        os.makedirs(deps)
        os.makedirs(own)
        digest = image.wheelhouse(root or project_root(), deps, names=None, extras=("spark",), pin=True)
        for w in glob.glob(os.path.join(deps, "sleuth-*.whl")):
            os.rename(w, os.path.join(own, os.path.basename(w)))
        text = dockerfile(base)
        tag = f"sleuth-spark:{hashlib.sha256((base + digest + text).encode()).hexdigest()[:12]}"
        if image._exists(tag):
            return tag
        progress(f"building {tag} …")
        with open(os.path.join(ctx, "Dockerfile"), "w") as f:
            f.write(text)
        image._run(["docker", "build", "-q", "--rm", "--force-rm", "-t", tag, ctx])  # the SDK's build
        # could not parse this engine's output stream
    return tag




def _ip(container, network: str) -> str:
    container.reload()
    return container.attrs["NetworkSettings"]["Networks"][network]["IPAddress"]


def _master_json(ip: str) -> dict:
    with urllib.request.urlopen(f"http://{ip}:{UI_PORT}/json/", timeout=2) as r:
        return json.load(r)


def _running(meta: dict) -> bool:
    import docker

    client = docker.from_env()
    try:
        return all(client.containers.get(c).status == "running" for c in meta["containers"])
    except docker.errors.NotFound:
        return False


def up(state: str | None = None, shares: list[str] | None = None, workers: int = 2, cores: int = 1,
       memory: str = "1536m", timeout: float = 120.0, say=print) -> str:
    """Start the master and `workers` workers unless they run; return the master URL."""
    import docker

    state = state or default_state()
    meta = _load(state)
    if meta and _running(meta):
        say(f"spark: already up at {meta['master']} (containers {', '.join(meta['containers'])})")
        return meta["master"]
    if meta:
        down(state, say=lambda m: None)
    shares = sorted({os.path.realpath(s) for s in (shares or default_shares())})
    for s in shares:
        os.makedirs(s, exist_ok=True)
    tag = ensure_image(progress=say)
    client = docker.from_env()
    name = PREFIX + uuid.uuid4().hex[:8]
    os.makedirs(state, exist_ok=True)
    meta = {"name": name, "image": tag, "network": name, "containers": [], "shares": shares, "master": None}

    def save() -> None:
        with open(os.path.join(state, "cluster.json"), "w") as f:
            json.dump(meta, f)

    save()
    volumes = {s: {"bind": s, "mode": "rw"} for s in shares}
    common = dict(detach=True, network=name, volumes=volumes, labels={LABEL: name}, init=True)
    try:
        client.networks.create(name, driver="bridge", labels={LABEL: name})
        spark_class = f"{SPARK_HOME}/bin/spark-class"
        master = client.containers.run(
            tag, ["sh", "-c", f'exec {spark_class} org.apache.spark.deploy.master.Master --host "$(hostname -i)" '
                              f"--port {MASTER_PORT} --webui-port {UI_PORT}"],
            name=f"{name}-master", hostname="master", **common)
        meta["containers"].append(master.name)
        save()
        ip = _ip(master, name)
        meta["master"] = url = f"spark://{ip}:{MASTER_PORT}"
        meta["master_ui"] = f"http://{ip}:{UI_PORT}"
        save()
        _wait(lambda: _master_json(ip).get("status") == "ALIVE", timeout, master)
        for i in range(1, workers + 1):
            w = client.containers.run(
                tag, ["sh", "-c", f'exec {spark_class} org.apache.spark.deploy.worker.Worker {url} '
                                  f'--host "$(hostname -i)" --cores {cores} --memory {memory} '
                                  "--work-dir /tmp/spark-work"],
                name=f"{name}-worker-{i}", hostname=f"worker-{i}",
                environment={"SPARK_LOCAL_DIRS": "/tmp/spark-local"}, **common)
            meta["containers"].append(w.name)
            save()
        _wait(lambda: sum(w.get("state") == "ALIVE" for w in _master_json(ip).get("workers", [])) >= workers,
              timeout, master)
    except BaseException:
        down(state, say=lambda m: None)
        raise
    say(f"spark: up at {url} ({workers} workers of {cores} core(s), master UI {meta['master_ui']}; "
        f"shared: {', '.join(shares)})")
    return url


def _wait(ok, timeout: float, container) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if ok():
                return
        except OSError:
            pass
        container.reload()
        if container.status not in ("created", "running"):
            break
        time.sleep(0.5)
    logs = container.logs(tail=20).decode(errors="replace")
    raise RuntimeError(f"spark in {container.name} not ready after {timeout:.0f} s: {logs.strip()[-1500:]}")


def down(state: str | None = None, say=print) -> None:
    """Remove the recorded containers and network; idempotent."""
    import docker

    state = state or default_state()
    meta = _load(state)
    if not meta:
        say(f"spark: not running (state {state})")
        return
    client = docker.from_env()
    for c in reversed(meta["containers"]):
        try:
            client.containers.get(c).remove(force=True)
        except docker.errors.NotFound:
            pass
    try:
        client.networks.get(meta["network"]).remove()
    except docker.errors.NotFound:
        pass
    os.remove(os.path.join(state, "cluster.json"))
    say(f"spark: down ({meta['name']} removed)")
