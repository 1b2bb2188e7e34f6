"""The Spark jobs on a standalone cluster in containers: a master and two workers, each with its own
filesystem, sharing only the test's directory (bind-mounted at the same path), the driver on the host.

One cluster for the module (`make spark-up CLUSTER=docker`'s code, image cached by content hash).
On it: a campaign of real runs judged by `judge_runs`, and a `sleuth sim` history checked by
`sleuth check --spark`, against the single-process checker's verdicts and anomaly types; a task's
file in its worker's /tmp is seen neither by the driver nor by the other worker; an input the
workers cannot read is bad input (exit 254 naming it).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from live import require_module

pytestmark = [pytest.mark.docker, pytest.mark.spark, pytest.mark.slow, pytest.mark.cluster]
require_module("pyspark", "Spark (pyspark)")
require_module("docker", "the Docker SDK")

SLEUTH = os.path.join(os.path.dirname(sys.executable), "sleuth")
SIM_TXNS = int(os.environ.get("SLEUTH_TEST_CLUSTER_TXNS", "200000"))


def driver_env(root: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYSPARK_PYTHON"}  # the workers' own python3
    env["SLEUTH_HOME"] = os.path.join(root, "home")
    return env


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    from sleuth.spark import cluster_docker

    root = os.path.realpath(str(tmp_path_factory.mktemp("spark-docker")))
    state = os.path.join(root, "state")
    t = time.monotonic()
    master = cluster_docker.up(state, shares=[root], say=lambda s: print(s, file=sys.stderr))
    print(f"cluster up in {time.monotonic() - t:.1f} s", file=sys.stderr)
    try:
        with open(os.path.join(state, "cluster.json")) as f:
            meta = json.load(f)
        yield {"master": master, "root": root, "meta": meta}
    finally:
        cluster_docker.down(state, say=lambda s: None)
    import docker

    client = docker.from_env()
    assert not client.containers.list(all=True, filters={"label": f"sleuth-spark={meta['name']}"})
    assert not client.networks.list(names=[meta["name"]])


DRIVER = """
import json, os, socket, sys
from sleuth.spark.jobs import judge_runs
from sleuth.spark.session import spark_session

master, out, scratch, runs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
spark = spark_session(master, "sleuth-test")  # judge_runs reuses this session

def task(it):  # a file in the executor's own /tmp
    with open(scratch, "w") as f:
        f.write(socket.gethostname())
    yield socket.gethostname()

hosts = sorted(set(spark.sparkContext.parallelize(range(8), 8).mapPartitions(task).collect()))
t = judge_runs(runs, out, campaign="test", master=master, say=lambda m: None)
cols = ["run_dir", "valid", "anomaly_types", "run_valid", "spark_agrees", "durability", "ops"]
print(json.dumps({"hosts": hosts, "table": json.loads(t[cols].to_json(orient="records"))}))
"""


@pytest.fixture(scope="module")
def judged(cluster):
    """A campaign of real runs judged by `judge_runs` on the cluster, in a driver process whose
    session first had every task write a file into its executor's /tmp."""
    from test_spark_jobs import sim_run, sleuth_run

    from sleuth.workloads import sim_list_append

    root = cluster["root"]
    env = driver_env(root)
    store = os.path.join(root, "store")
    runs = [sleuth_run(store, env, "--runtime", "local", "-w", "register", "--fault", "stale-read", "--seed", "1"),
            sleuth_run(store, env, "--runtime", "local", "-w", "list-append", "--seed", "0"),
            sim_run(os.path.join(root, "sims"), "si", "list-append", "strict-serializable",
                    lambda p: sim_list_append.write_sim(p, "snapshot-isolation", 1500, seed=3))]
    scratch = f"/tmp/sleuth-test-scratch-{os.getpid()}"
    t = time.monotonic()
    # the campaign's directory relative to the driver's working directory, which no executor shares
    p = subprocess.run([sys.executable, "-c", DRIVER, cluster["master"], "out", scratch, *runs],
                       capture_output=True, text=True, timeout=600, env=env, cwd=root)
    print(f"session and judge_runs on the cluster: {time.monotonic() - t:.1f} s", file=sys.stderr)
    assert p.returncode == 0, p.stderr[-3000:]
    out = json.loads(p.stdout.strip().splitlines()[-1])
    return {"runs": runs, "root": root, "scratch": scratch, "hosts": out["hosts"],
            "table": {r["run_dir"]: r for r in out["table"]}}


def test_campaign_of_real_runs_gives_the_runs_own_verdicts(judged):
    table, runs = judged["table"], judged["runs"]
    for d in runs:
        with open(os.path.join(d, "results.json")) as f:
            own = json.load(f)
        row = table[os.path.realpath(d)]
        valid = {True: "true", False: "false"}.get(own["valid"], "unknown")
        assert (row["valid"], row["anomaly_types"].split(",") if row["anomaly_types"] else []) == \
            (valid, sorted(own["anomaly-types"])), d
        assert row["spark_agrees"] and row["ops"] > 0, d
    assert [table[os.path.realpath(d)]["valid"] for d in runs] == ["false", "true", "false"]
    assert table[os.path.realpath(runs[1])]["durability"] == "ok"  # the audit read the nodes' data
    assert os.path.exists(os.path.join(judged["root"], "out", "campaign.parquet"))


def test_sim_history_gives_the_single_process_verdict(cluster):
    root = cluster["root"]
    env = driver_env(root)
    history = os.path.join(root, "si.jsonl")
    subprocess.run([SLEUTH, "sim", "--db", "snapshot-isolation", "--txns", str(SIM_TXNS), "--seed", "7",
                    "-o", history], check=True, capture_output=True, timeout=300)
    t = time.monotonic()
    one = subprocess.run([SLEUTH, "check", history, "-w", "list-append", "--json"], capture_output=True,
                         text=True, timeout=600, env=env)
    single = time.monotonic() - t
    t = time.monotonic()
    on = subprocess.run([SLEUTH, "check", "--spark", cluster["master"], "si.jsonl", "-w", "list-append", "--json"],
                        capture_output=True, text=True, timeout=900, env=env, cwd=root)  # a relative path
    print(f"{SIM_TXNS} txns: sleuth check {single:.1f} s, on the cluster {time.monotonic() - t:.1f} s",
          file=sys.stderr)
    assert one.returncode == 1, one.stderr[-2000:]
    assert on.returncode == 1, on.stderr[-3000:]
    a, b = json.loads(one.stdout), json.loads(on.stdout)
    assert b["valid"] is False and b["anomaly-types"] == a["anomaly-types"] and a["anomaly-types"]


def test_a_workers_scratch_is_its_own(cluster, judged):
    """Each task wrote a file into its worker's /tmp, then the campaign's jobs ran in the same
    session: the driver does not see the file, each worker holds only its own."""
    import docker

    hosts, scratch = judged["hosts"], judged["scratch"]
    assert hosts and set(hosts) <= {"worker-1", "worker-2"}, hosts
    assert not os.path.exists(scratch)  # the driver's /tmp
    client = docker.from_env()
    seen = {}
    for c in cluster["meta"]["containers"]:
        if "-worker-" in c:
            r = client.containers.get(c).exec_run(["cat", scratch])
            seen["worker-" + c.rsplit("-", 1)[-1]] = r.output.decode() if r.exit_code == 0 else None
    assert len(seen) == 2
    for host, content in seen.items():
        assert content == (host if host in hosts else None), seen  # each holds only its own


def test_an_input_the_workers_cannot_read_is_bad_input(cluster, tmp_path_factory):
    private = os.path.realpath(str(tmp_path_factory.mktemp("not-shared")))
    history = os.path.join(private, "h.jsonl")
    subprocess.run([SLEUTH, "sim", "--db", "serializable", "--txns", "200", "-o", history], check=True,
                   capture_output=True, timeout=60)
    p = subprocess.run([SLEUTH, "check", "--spark", cluster["master"], history, "-w", "list-append"],
                       capture_output=True, text=True, timeout=300, env=driver_env(cluster["root"]))
    assert p.returncode == 254, p.stderr[-3000:]
    assert history in p.stderr and "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) <= 3, p.stderr


def test_a_campaign_run_the_workers_cannot_read_is_bad_input(cluster, tmp_path_factory):
    """`sleuth campaign judge` of a directory of runs that is not mounted in the workers' containers:
    exit 254 naming the run's history, not "the Spark jobs failed" and the runs' own verdicts."""
    from test_spark_jobs import sim_run

    from sleuth.workloads import sim_list_append

    private = os.path.realpath(str(tmp_path_factory.mktemp("campaign-not-shared")))
    run = sim_run(private, "si", "list-append", "strict-serializable",
                  lambda p: sim_list_append.write_sim(p, "snapshot-isolation", 300, seed=3))
    p = subprocess.run([SLEUTH, "campaign", "judge", private, "--spark-master", cluster["master"], "--json"],
                       capture_output=True, text=True, timeout=300, env=driver_env(cluster["root"]))
    assert p.returncode == 254, p.stderr[-3000:]
    history = os.path.join(run, "history.jsonl")
    last = p.stderr.strip().splitlines()[-1]
    assert history in last and "cannot read" in last and "Traceback" not in p.stderr, p.stderr
    assert p.stdout == "", p.stdout  # progress and the error on stderr, nothing on stdout
