"""A real Kubernetes control plane on loopback, one per cluster the stacks name.

etcd, kube-apiserver (RBAC, service-account tokens, every admission plugin it enables by default, privileged
containers allowed as OpenShift's SCCs may allow them) and kube-controller-manager (StatefulSet, Job,
ServiceAccount, PersistentVolume binder, RBAC aggregation and the rest of its defaults). A small provisioner
stands in for the storage classes' CSI drivers: it makes a PersistentVolume for each claim of a class it serves,
and the controller-manager's binder binds them, as on a cluster.

Where the binaries are given (level 3 of the toolchain), the plane is a simulated cluster: kube-scheduler places
pods on Node objects (live/nodes.py builds them from the stack's node sets) and kwok plays their kubelets, with the
stages of live/kwok-stages.yaml (pods Running and Ready at once; a Job's pod ends when a test says how). Without
nodes, or without those binaries, pods stay Pending, which is what a stack must survive too.

Only loopback addresses are used (but by the real nodes' plane: live/realnodes.py). Each control plane has its own
etcd and ports, so Barcelona's and Cairo's namespaces of the same name never meet.
"""

from __future__ import annotations

import functools
import json
import os
import secrets
import signal
import socket
import ssl
import subprocess
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ADMIN_USER = "live-admin"
# The provisioner name the live tier's storage classes carry: the stand-in for nfs-csi, ceph-rbd, cephfs.
PROVISIONER = "live.gpu-training.local/hostpath"
KWOK_STAGES = Path(__file__).resolve().parent / "kwok-stages.yaml"
# The nodes kwok plays the kubelet of (live/nodes.py annotates each); any other node is left alone.
FAKE_NODES = "kwok.x-k8s.io/node=fake"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@functools.cache
def _tls() -> ssl.SSLContext:
    """One TLS context for every request: making one reads the system's CA store, 30 ms of CPU each time, and the
    provisioner and the tests' waits ask several times a second per plane."""
    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    return ctx


@dataclass
class ControlPlane:
    """One cluster's control plane: start() it, use `kubeconfig` (context `name`), stop() it."""

    name: str
    workdir: Path
    bin: dict[str, Path]
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    port: int = 0
    token: str = ""
    # The controller-manager's controllers each under their own service account (kube-system:statefulset-controller,
    # ...), as on OpenShift, instead of all as the plane's admin: SCC admission (live/scc.py) judges the user who creates
    # a pod, and the admin may use every SCC.
    controller_credentials: bool = False
    # Where the API server listens: loopback, or the host's address on the real nodes' network (live/realnodes.py), so
    # their kubelets reach it; and where the provisioner's volumes are (a folder both real nodes see).
    address: str = "127.0.0.1"
    volume_root: str = "/live"
    _stop: threading.Event = field(default_factory=threading.Event)

    @property
    def server(self) -> str:
        return f"https://{self.address}:{self.port}"

    @property
    def kubeconfig(self) -> Path:
        return self.workdir / "kubeconfig"

    def spawn(self, name: str, args: list[str]) -> None:
        """A process of this plane, logged to WORKDIR/NAME.log, watched by wait_for and stopped by stop() (the last
        started first): the plane's own, and those a test adds (live/kueue.py)."""
        log = (self.workdir / f"{name}.log").open("ab")
        self.procs.append(subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True))

    def _keys(self) -> tuple[Path, Path]:
        key, pub = self.workdir / "sa.key", self.workdir / "sa.pub"
        if not key.exists():
            subprocess.run(["openssl", "genrsa", "-out", str(key), "2048"], check=True, capture_output=True)
            subprocess.run(["openssl", "rsa", "-in", str(key), "-pubout", "-out", str(pub)], check=True, capture_output=True)
        return key, pub

    def start(self, timeout: float = 120) -> ControlPlane:
        """Every process started and the API ready; on any failure the processes started so far are stopped first."""
        try:
            return self._start(timeout)
        except BaseException:
            self.stop()
            raise

    def _start(self, timeout: float) -> ControlPlane:
        self.workdir.mkdir(parents=True, exist_ok=True)
        key, pub = self._keys()
        self.token = secrets.token_hex(16)
        tokens = self.workdir / "tokens.csv"
        tokens.write_text(f'{self.token},{ADMIN_USER},{ADMIN_USER},"system:masters"\n')
        etcd_port, peer_port, self.port = free_port(), free_port(), free_port()
        self.spawn("etcd", [
            str(self.bin["etcd"]), "--data-dir", str(self.workdir / "etcd"),
            "--listen-client-url", f"http://127.0.0.1:{etcd_port}", "--listen-peer-url", f"http://127.0.0.1:{peer_port}",
        ])  # fmt: skip
        self.spawn("kube-apiserver", [
            str(self.bin["kube-apiserver"]),
            f"--etcd-servers=http://127.0.0.1:{etcd_port}",
            f"--bind-address={self.address}", f"--advertise-address={self.address}", f"--secure-port={self.port}",
            f"--cert-dir={self.workdir / 'certs'}",
            f"--token-auth-file={tokens}",
            "--authorization-mode=RBAC",
            "--allow-privileged=true",
            "--service-account-issuer=https://kubernetes.default.svc",
            f"--service-account-key-file={pub}", f"--service-account-signing-key-file={key}",
            "--service-cluster-ip-range=10.96.0.0/16",
            "--enable-priority-and-fairness=false",
            # A real node's kubelet (live/realnodes.py) is reached at its address, never by its name: a name would be
            # asked of this machine's resolver.
            "--kubelet-preferred-address-types=InternalIP",
            "--profiling=false",
        ])  # fmt: skip
        self._write_kubeconfig()
        self._wait_ready(timeout)
        self.spawn("kube-controller-manager", [
            str(self.bin["kube-controller-manager"]),
            f"--kubeconfig={self.workdir / 'admin.kubeconfig'}",
            f"--service-account-private-key-file={key}",
            "--leader-elect=false", "--secure-port=0",
            "--controllers=*",
            f"--use-service-account-credentials={str(self.controller_credentials).lower()}",
            # Client-side rate limits well above the defaults (20/s): the differential test's cases make a thousand pods
            # at once, which the StatefulSet and Job controllers would otherwise create at 20 a second.
            "--kube-api-qps=500", "--kube-api-burst=1000", "--concurrent-statefulset-syncs=20", "--concurrent-job-syncs=20",
        ])  # fmt: skip
        admin = self.workdir / "admin.kubeconfig"
        if "kube-scheduler" in self.bin:
            self.spawn("kube-scheduler", [
                str(self.bin["kube-scheduler"]), f"--kubeconfig={admin}",
                f"--authentication-kubeconfig={admin}", f"--authorization-kubeconfig={admin}",
                "--leader-elect=false", "--bind-address=127.0.0.1", f"--secure-port={free_port()}",
                "--kube-api-qps=500", "--kube-api-burst=1000",  # binds a thousand pods at once (the differential test)
            ])  # fmt: skip
        if "kwok" in self.bin:
            # No --node-port and no --server-address: kwok serves nothing (no logs, no exec), it only writes status.
            self.spawn("kwok", [
                str(self.bin["kwok"]), f"--kubeconfig={admin}", f"--config={KWOK_STAGES}",
                "--manage-all-nodes=false", f"--manage-nodes-with-annotation-selector={FAKE_NODES}",
                # Each node holds a lease, renewed as a kubelet renews it (the kubelet's 40 s): the node lifecycle
                # controller reads it, and without one it would mark the nodes unreachable and evict their pods.
                "--node-lease-duration-seconds=40",
            ])  # fmt: skip
        threading.Thread(target=self._provision_forever, name=f"provisioner-{self.name}", daemon=True).start()
        self.wait_for(lambda: self.get("/api/v1/namespaces/default/serviceaccounts/default") is not None, timeout, "the controller-manager")
        return self

    def make_nodes(self, nodes: list[dict[str, Any]], timeout: float = 60) -> None:
        """Register `nodes` as their kubelet would (the object, then its status: capacity and allocatable), and wait
        until kwok has made every one Ready."""
        for n in nodes:
            status, body = self.request("POST", "/api/v1/nodes", n)
            if status not in (201, 409):
                raise RuntimeError(f"{self.name}: creating Node {n['metadata']['name']}: {status} {body}")
            status, body = self.request(
                "PATCH", f"/api/v1/nodes/{n['metadata']['name']}/status?fieldManager=live-kubelet&force=true",
                {"apiVersion": "v1", "kind": "Node", "metadata": {"name": n["metadata"]["name"]}, "status": n["status"]},
                content_type="application/apply-patch+yaml",
            )  # fmt: skip
            if status != 200:
                raise RuntimeError(f"{self.name}: the status of Node {n['metadata']['name']}: {status} {body}")
        names = {n["metadata"]["name"] for n in nodes}

        def ready() -> bool:
            live = (self.get("/api/v1/nodes") or {}).get("items", [])
            up = {
                n["metadata"]["name"] for n in live
                if any(c["type"] == "Ready" and c["status"] == "True" for c in n.get("status", {}).get("conditions", []))
            }  # fmt: skip
            return names <= up

        self.wait_for(ready, timeout, f"kwok's nodes ({len(names)})")

    def _write_kubeconfig(self) -> None:
        # The context carries the cluster's name, as the stack files expect (kubernetes:context).
        def config(context: str) -> dict[str, Any]:
            return {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": context, "cluster": {"server": self.server, "insecure-skip-tls-verify": True}}],
                "users": [{"name": f"{context}-admin", "user": {"token": self.token}}],
                "contexts": [{"name": context, "context": {"cluster": context, "user": f"{context}-admin"}}],
                "current-context": context,
            }

        self.kubeconfig.write_text(yaml.safe_dump(config(self.name)))
        (self.workdir / "admin.kubeconfig").write_text(yaml.safe_dump(config(self.name)))

    def wait_for(self, ready: Any, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for p in self.procs:
                if p.poll() is not None:
                    raise RuntimeError(f"{self.name}: {Path(str(p.args[0])).name} exited ({p.returncode}); see {self.workdir}")  # type: ignore[index]
            try:
                if ready():
                    return
            except (OSError, urllib.error.URLError):
                pass
            time.sleep(0.5)
        raise RuntimeError(f"{self.name}: {what} not ready after {timeout:.0f} s; logs in {self.workdir}")

    def _wait_ready(self, timeout: float) -> None:
        self.wait_for(lambda: self.request("GET", "/readyz")[0] == 200, timeout, "kube-apiserver")

    # --- the API, for fixtures and the provisioner (the tests drive kubectl and pulumi, not this) ----------

    def request(self, method: str, path: str, body: Any = None, content_type: str = "application/json") -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.server + path, data=data, method=method)
        req.add_header("Authorization", f"Bearer {self.token}")
        if data is not None:
            req.add_header("Content-Type", content_type)
        try:
            with urllib.request.urlopen(req, context=_tls(), timeout=30) as resp:
                raw = resp.read()
                return resp.status, (json.loads(raw) if raw[:1] in (b"{", b"[") else raw.decode())
        except urllib.error.HTTPError as err:
            raw = err.read()
            return err.code, (json.loads(raw) if raw[:1] == b"{" else raw.decode())

    def get(self, path: str) -> Any:
        status, body = self.request("GET", path)
        return body if status == 200 else None

    def apply(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Server-side apply of one object as the fixture's field manager (what an admin or an operator made)."""
        path = api_path(obj)
        status, body = self.request(
            "PATCH", f"{path}?fieldManager=live-fixture&force=true", obj, content_type="application/apply-patch+yaml"
        )
        if status not in (200, 201):
            raise RuntimeError(f"{self.name}: applying {obj['kind']} {obj['metadata'].get('name')}: {status} {body}")
        return dict(body)

    def delete(self, obj: dict[str, Any]) -> None:
        self.request("DELETE", api_path(obj))

    def kubectl(
        self, *args: str, token: str | None = None, check: bool = True, input: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        cmd = [str(self.bin["kubectl"]), f"--kubeconfig={self.kubeconfig}", f"--context={self.name}"]
        if token:
            cmd.append(f"--token={token}")
        return subprocess.run([*cmd, *args], capture_output=True, text=True, check=check, input=input, timeout=120)

    def wait_crd(self, group: str, plural: str, timeout: float = 60) -> None:
        def established() -> bool:
            crd = self.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{plural}.{group}") or {}
            # `conditions` is absent, or null, until the API server has looked at the CRD.
            return any(c["type"] == "Established" and c["status"] == "True" for c in crd.get("status", {}).get("conditions") or [])

        self.wait_for(established, timeout, f"CRD {plural}.{group}")

    # --- a stand-in for the storage classes' provisioners ----------------------------------------------

    def _provision_forever(self) -> None:
        while not self._stop.wait(1.0):
            try:
                self.provision_once()
            except (OSError, urllib.error.URLError, KeyError, TypeError):
                continue

    def provision_once(self) -> None:
        claims = (self.get("/api/v1/persistentvolumeclaims") or {}).get("items", [])
        if all(c["spec"].get("volumeName") or c.get("status", {}).get("phase") == "Bound" for c in claims):
            return  # nothing to provision: the classes need not be read (this runs every second on every plane)
        classes = {
            c["metadata"]["name"]: c
            for c in (self.get("/apis/storage.k8s.io/v1/storageclasses") or {}).get("items", [])
            if c.get("provisioner") == PROVISIONER
        }
        for claim in claims:
            try:
                self._provision(claim, classes)
            except (OSError, urllib.error.URLError, KeyError, TypeError):
                continue  # tried again next round; a claim that cannot be served never holds up the claims after it

    def _provision(self, claim: dict[str, Any], classes: dict[str, dict[str, Any]]) -> None:
        spec, meta = claim["spec"], claim["metadata"]
        sc = classes.get(spec.get("storageClassName") or "")
        if sc is None or spec.get("volumeName") or claim.get("status", {}).get("phase") == "Bound":
            return
        if sc.get("volumeBindingMode") == "WaitForFirstConsumer" and "volume.kubernetes.io/selected-node" not in meta.get(
            "annotations", {}
        ):
            return  # provisioned once the scheduler has picked the node of a pod that uses it, as a CSI driver does
        pv_name = f"pvc-{meta['uid']}"
        if self.volume_root != "/live":  # real nodes mount it: made as an NFS CSI driver makes its folders, any uid may write
            folder = Path(self.volume_root) / meta["namespace"] / meta["name"]
            folder.mkdir(parents=True, exist_ok=True)
            folder.chmod(0o777)
        self.request("POST", "/api/v1/persistentvolumes", {
            "apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": pv_name, "annotations": {"pv.kubernetes.io/provisioned-by": PROVISIONER}},
            "spec": {
                "capacity": {"storage": spec["resources"]["requests"]["storage"]},
                "accessModes": spec["accessModes"],
                "persistentVolumeReclaimPolicy": sc.get("reclaimPolicy", "Delete"),
                "storageClassName": sc["metadata"]["name"],
                "hostPath": {"path": f"{self.volume_root}/{meta['namespace']}/{meta['name']}"},
                "claimRef": {"namespace": meta["namespace"], "name": meta["name"], "uid": meta["uid"]},
            },
        })  # fmt: skip

    def stop(self) -> None:
        """Each process in the reverse order of its start, and each gone before the next is asked: a kube-apiserver
        whose etcd is stopping with it takes half a minute to end, one stopped before its etcd about a second."""
        self._stop.set()
        for p in reversed(self.procs):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        self.procs.clear()


CLUSTER_SCOPED = {"Namespace", "StorageClass", "SecurityContextConstraints", "ClusterRole", "ClusterRoleBinding",
                  "CustomResourceDefinition", "PersistentVolume", "MachineConfig",
                  "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration", "ResourceFlavor", "ClusterQueue"}  # fmt: skip
PLURALS = {
    "SecurityContextConstraints": "securitycontextconstraints",
    "NetworkAttachmentDefinition": "network-attachment-definitions",
    "StorageClass": "storageclasses",
    "NetworkPolicy": "networkpolicies",
}


def api_path(obj: dict[str, Any]) -> str:
    api, kind, meta = obj["apiVersion"], obj["kind"], obj["metadata"]
    prefix = f"/api/{api}" if "/" not in api else f"/apis/{api}"
    plural = PLURALS.get(kind) or kind.lower() + "s"
    ns = "" if kind in CLUSTER_SCOPED else f"/namespaces/{meta.get('namespace', 'default')}"
    return f"{prefix}{ns}/{plural}/{meta['name']}"


def kubeconfig_of(planes: list[ControlPlane], path: Path) -> Path:
    """One kubeconfig with every control plane's context (the stack files name them)."""
    merged: dict[str, Any] = {"apiVersion": "v1", "kind": "Config", "clusters": [], "users": [], "contexts": []}
    for p in planes:
        one = yaml.safe_load(p.kubeconfig.read_text())
        for key in ("clusters", "users", "contexts"):
            merged[key] += one[key]
    merged["current-context"] = planes[0].name if planes else ""
    path.write_text(yaml.safe_dump(merged))
    return path
