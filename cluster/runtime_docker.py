"""The `docker` runtime: one container per node on a private bridge network, each with its own address.

Containers run the node image (cluster/image.py) with the same command line
as local processes (`python -m sleuth.cluster.node …`), keep their data in a
named volume mounted at /data (it survives kill and restart), and get
NET_ADMIN so partitions can be made with iptables inside the node. The host
reaches every container by its address on the network.
"""

from __future__ import annotations

import docker
from docker.errors import APIError, NotFound


class DockerRuntime:
    name = "docker"
    python = "/opt/sleuth/bin/python"

    def __init__(self, cluster_name: str = "sleuth", subnet: str = "172.30.0.0/24",
                 project_root: str = ".", image: str | None = None):
        self.cluster, self.subnet, self.project_root = cluster_name, subnet, project_root
        self.image = image
        self.client = docker.from_env()
        self.net_name = f"{cluster_name}-net"
        self.cuts: list[str] = []

    @staticmethod
    def available() -> bool:
        try:
            docker.from_env(timeout=3).ping()
            return True
        except Exception:
            return False

    def data_path(self, name: str) -> str:
        return "/data"

    def _cname(self, name: str) -> str:
        return f"{self.cluster}-{name}"

    def _container(self, name: str):
        return self.client.containers.get(self._cname(name))

    def up_network(self, progress=print) -> None:
        try:
            self.client.networks.get(self.net_name)
        except NotFound:
            gateway = self.subnet.rsplit(".", 1)[0] + ".1"
            ipam = docker.types.IPAMConfig(pool_configs=[docker.types.IPAMPool(subnet=self.subnet, gateway=gateway)])
            self.client.networks.create(self.net_name, driver="bridge", ipam=ipam,
                                        labels={"sleuth.cluster": self.cluster})

    def start(self, name: str, argv: list[str], ip: str, env: dict | None = None) -> None:
        api = self.client.api
        net = api.create_networking_config({self.net_name: api.create_endpoint_config(ipv4_address=ip)})
        host = api.create_host_config(cap_add=["NET_ADMIN"],
                                      binds={f"{self._cname(name)}-data": {"bind": "/data", "mode": "rw"}})
        c = api.create_container(self.image, command=argv, name=self._cname(name), hostname=name,
                                 environment=env or {}, host_config=host, networking_config=net,
                                 labels={"sleuth.cluster": self.cluster, "sleuth.node": name})
        api.start(c["Id"])

    def kill(self, name: str) -> None:
        c = self._container(name)
        if c.status == "paused":
            c.unpause()
        try:
            c.kill()
        except APIError:
            pass
        c.wait(timeout=10)

    def restart(self, name: str) -> None:
        c = self._container(name)
        c.reload()
        if c.status in ("running", "paused"):
            self.kill(name)
        c.start()

    def stop(self, name: str) -> None:
        try:
            c = self._container(name)
            if c.status == "paused":
                c.unpause()
            c.stop(timeout=5)
        except NotFound:
            pass

    def pause(self, name: str) -> None:
        self._container(name).pause()

    def resume(self, name: str) -> None:
        self._container(name).unpause()

    def logs(self, name: str) -> str:
        try:
            return self._container(name).logs().decode(errors="replace")
        except NotFound:
            return ""

    def exec(self, name: str, argv: list[str]) -> tuple[int, str]:
        code, out = self._container(name).exec_run(argv)
        return code, out.decode(errors="replace")

    def cut(self, a: str, ip_a: str, b: str, ip_b: str) -> None:
        """Drop traffic between two containers, with iptables inside each (they have NET_ADMIN).
        A peer that is no container (a source's upstream on the host) is cut from the container's
        side alone: everything from its address is dropped there."""
        for node, peer in ((a, ip_b), (b, ip_a)):
            try:
                self._container(node)
            except NotFound:
                continue
            code, out = self.exec(node, ["iptables", "-I", "INPUT", "-s", peer, "-j", "DROP"])
            if code != 0:
                raise RuntimeError(f"iptables in {node}: {out.strip()}")
            self.cuts.append(node)

    def heal_cuts(self) -> None:
        for node in set(self.cuts):
            try:
                self.exec(node, ["iptables", "-F", "INPUT"])
            except Exception:
                pass
        self.cuts = []

    def nodes(self) -> list[dict]:
        out = []
        for c in self.client.containers.list(all=True, filters={"label": f"sleuth.cluster={self.cluster}"}):
            ip = (c.attrs["NetworkSettings"]["Networks"].get(self.net_name) or {}).get("IPAddress")
            state = {"running": "running", "paused": "paused"}.get(c.status, "down")
            out.append({"name": c.labels.get("sleuth.node"), "ip": ip, "state": state})
        return out

    def remove_all(self) -> None:
        for c in self.client.containers.list(all=True, filters={"label": f"sleuth.cluster={self.cluster}"}):
            c.remove(force=True, v=True)
            try:
                self.client.volumes.get(f"{self._cname(c.labels.get('sleuth.node'))}-data").remove(force=True)
            except NotFound:
                pass
        try:
            self.client.networks.get(self.net_name).remove()
        except NotFound:
            pass
