"""Real nodes: a kubelet and containerd per node, each node in a network and mount namespace of its own, joined to a live
control plane beside kwok's nodes (docs/live.md "Real nodes").

The network, all of it in namespaces this run makes (gone with their last process): a switch (a bridge in a network
namespace of its own); the host's port on it (`Network.host`, in this process's namespace, where the API server,
CoreDNS and the registry stand-in listen); each node's eth0 on it, and the node's pods behind its own bridge (the CNI
bridge and host-local plugins), routed to from the host and from the other nodes. No namespace has a default route:
nothing a pod sends leaves the machine.

A node (`Node.start`):
- a holder process (`unshare --net --mount`) whose namespaces containerd and the kubelet enter (`nsenter`). In its mount
  namespace /run, /var/lib and /var/log are the node's own folders (the kubelet and containerd write fixed paths there);
  /proc/meminfo and /sys/devices/system/{cpu,node} are the node's files, so that its kubelet offers the CPU and memory
  of its Node in live/nodes.py (the node set's, or that module's defaults) instead of this machine's two cores; and the
  kernel settings a kubelet sets for the whole machine (KERNEL) read as it wants them, so it changes none of them.
- containerd 1.6 from Debian's package (live/packages.py): its root a hard-linked copy of the image's seed
  (live/image.py), CRI with runc under cgroupfs, `restrict_oom_score_adj` (runc cannot lower oom_score_adj without
  CAP_SYS_RESOURCE, which this machine's bounding set lacks), every registry mirrored to the registry stand-in, and
  RLIMIT_MEMLOCK 8 MiB, the limit CRI-O gives containers on OpenShift (KNOWLEDGE.md), which its containers inherit.
- the kubelet (from the control plane's k8s module): cgroupfs under a cgroup of its own in every v1 hierarchy
  (live/procs.py cgroup_path: what runs there is this run's), swap and cgroup v1 allowed, image GC off (the image is in
  no registry), anonymous AlwaysAllow on its own API (the API server's logs and exec), the host's CoreDNS as cluster DNS.
- then its Node gets the labels, taints and extended resources (GPUs, VFs) live/nodes.py gives it, as the cluster's
  admin and device plugins give them.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import yaml

from live import image, procs, toolchain
from live.controlplane import ControlPlane, free_port

CGROUPS = Path("/sys/fs/cgroup")
MEMLOCK = 8 * 1024 * 1024  # CRI-O's default memlock limit, soft and hard (KNOWLEDGE.md point 4)
# What the kubelet's container manager sets for the whole machine (pkg/kubelet/cm setupKernelTunables), as it wants them.
KERNEL = {"vm/overcommit_memory": "1", "vm/panic_on_oom": "0", "kernel/panic": "10", "kernel/panic_on_oops": "1",
          "kernel/keys/root_maxkeys": "1000000", "kernel/keys/root_maxbytes": "25000000"}  # fmt: skip
START_TIMEOUT = 120


class NodesError(Exception):
    """Why real nodes cannot run on this machine, in words that say what is missing."""


def check_machine() -> None:
    """What real nodes need of the machine: root, the namespace and network tools, cgroup v1 hierarchies to write."""
    if os.geteuid() != 0:
        raise NodesError("real nodes need root (namespaces, cgroups, mounts)")
    for tool in ("unshare", "nsenter", "ip", "mount", "sleep"):
        if shutil.which(tool) is None:
            raise NodesError(f"no `{tool}` on PATH (util-linux, iproute2)")
    if not (CGROUPS / "pids" / "cgroup.procs").exists() or not os.access(CGROUPS / "pids", os.W_OK):
        raise NodesError(f"no writable cgroup v1 hierarchies under {CGROUPS} (the kubelet runs under cgroupfs, v1)")
    soft, hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    if hard != resource.RLIM_INFINITY and hard < MEMLOCK:
        raise NodesError(f"this process's hard RLIMIT_MEMLOCK is {hard} B, under the {MEMLOCK} B a node's containers get")


def _run(*args: str) -> str:
    run = subprocess.run(list(args), capture_output=True, text=True, check=False, timeout=60)
    if run.returncode != 0:
        raise NodesError(f"`{' '.join(args)}`: {run.stderr.strip()[-400:]}")
    return run.stdout


def _inside(pid: int, *args: str, mount: bool = False) -> str:
    return _run("nsenter", f"--target={pid}", "--net", *(["--mount"] if mount else []), "--", *args)


def _holder(mount: bool) -> subprocess.Popen[bytes]:
    """A process in new namespaces (a network one; a mount one too), which keeps them while it lives."""
    ours = os.readlink("/proc/self/ns/net")
    proc = subprocess.Popen(["unshare", "--net", *(["--mount", "--propagation", "private"] if mount else []), "--", "sleep", "infinity"],
                            start_new_session=True)  # fmt: skip
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            if os.readlink(f"/proc/{proc.pid}/ns/net") != ours and os.readlink(f"/proc/{proc.pid}/exe").endswith("sleep"):
                return proc
        time.sleep(0.02)
    proc.kill()
    raise NodesError("unshare did not make its namespaces in 10 s")


def _end(proc: subprocess.Popen[bytes] | None, timeout: float = 20) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@dataclass
class Network:
    """The switch and the host's port on it; 10.N.0.0/16 with N a block no other run holds (a lock in the cache)."""

    block: int
    switch: subprocess.Popen[bytes]
    lock: IO[str]

    @property
    def host(self) -> str:
        return f"10.{self.block}.0.1"

    def node_ip(self, index: int) -> str:
        return f"10.{self.block}.0.{10 + index}"

    def pods(self, index: int) -> str:
        return f"10.{self.block}.{index}.0/24"

    def link(self, what: str) -> str:
        return f"lt{self.block}{what}"  # at most 15 characters, as the kernel wants them

    @classmethod
    def create(cls) -> Network:
        used = _run("ip", "-4", "addr") + _run("ip", "-4", "route")
        toolchain.CACHE.mkdir(parents=True, exist_ok=True)
        for block in range(128, 250):
            if re.search(rf"(^|\s)10\.{block}\.", used, re.MULTILINE):
                continue
            lock = (toolchain.CACHE / f".net-10.{block}.lock").open("a+")
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                lock.close()
                continue
            net = cls(block, _holder(mount=False), lock)
            try:
                net._wire()
            except BaseException:
                net.stop()
                raise
            return net
        raise NodesError("no free 10.N.0.0/16 block for the real nodes' network (128 to 249 all in use)")

    def _wire(self) -> None:
        pid = str(self.switch.pid)
        _inside(self.switch.pid, "ip", "link", "add", "name", "switch", "type", "bridge")
        _inside(self.switch.pid, "ip", "link", "set", "switch", "up")
        _run("ip", "link", "add", "name", self.link("h"), "type", "veth", "peer", "name", self.link("hs"))
        _run("ip", "link", "set", self.link("hs"), "netns", pid)
        _inside(self.switch.pid, "ip", "link", "set", self.link("hs"), "master", "switch", "up")
        _run("ip", "addr", "add", f"{self.host}/24", "dev", self.link("h"))
        _run("ip", "link", "set", self.link("h"), "up")

    def attach(self, index: int, node: int, others: list[int]) -> None:
        """Node `index`'s eth0 on the switch (its holder's pid `node`), and the routes to its pods and the others'."""
        inner, outer = self.link(f"n{index}"), self.link(f"n{index}s")
        _run("ip", "link", "add", "name", inner, "type", "veth", "peer", "name", outer)
        _run("ip", "link", "set", outer, "netns", str(self.switch.pid))
        _inside(self.switch.pid, "ip", "link", "set", outer, "master", "switch", "up")
        _run("ip", "link", "set", inner, "netns", str(node))
        _inside(node, "ip", "link", "set", "lo", "up")
        _inside(node, "ip", "link", "set", inner, "name", "eth0")
        _inside(node, "ip", "addr", "add", f"{self.node_ip(index)}/24", "dev", "eth0")
        _inside(node, "ip", "link", "set", "eth0", "up")
        for other in others:
            _inside(node, "ip", "route", "add", self.pods(other), "via", self.node_ip(other))
        _run("ip", "route", "add", self.pods(index), "via", self.node_ip(index), "dev", self.link("h"))

    def stop(self) -> None:
        _end(self.switch, 5)  # its veths, and the host's port with them, go with the namespace
        self.lock.close()


# --- a node -----------------------------------------------------------------------------------------------------------


def machine(folder: Path, cpu: int, memory_bytes: int) -> dict[str, Path]:
    """The files a node's kubelet reads as its machine's: {path on the machine: file or folder of the node}."""
    cpus = folder / "cpu"
    for i in range(cpu):  # no topology/ in them: cadvisor counts the CPUs and reports no topology, so the kubelet's
        (cpus / f"cpu{i}").mkdir(parents=True, exist_ok=True)  # CPU manager writes no cpuset of them (there are two)
    (folder / "node").mkdir(exist_ok=True)  # no NUMA node: cadvisor reads the topology of the CPUs above
    kb = memory_bytes // 1024
    (folder / "meminfo").write_text(f"MemTotal: {kb} kB\nMemFree: {kb} kB\nMemAvailable: {kb} kB\nSwapTotal: 0 kB\nSwapFree: 0 kB\n")
    files = {"/proc/meminfo": folder / "meminfo", "/sys/devices/system/cpu": cpus, "/sys/devices/system/node": folder / "node"}
    for name, value in KERNEL.items():
        (folder / "sys" / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / "sys" / name).write_text(value + "\n")
        files[f"/proc/sys/{name}"] = folder / "sys" / name
    return files


def quantity(value: str) -> int:
    """A Kubernetes quantity of CPU (whole cores) or memory (bytes), as live/nodes.py writes them."""
    units = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
    for unit, factor in units.items():
        if value.endswith(unit):
            return int(float(value[: -len(unit)]) * factor)
    return int(float(value[:-1]) / 1000) if value.endswith("m") else int(float(value))


def v1_hierarchies() -> list[Path]:
    return sorted(p for p in CGROUPS.iterdir() if (p / "cgroup.procs").exists() and p.name != "unified")


@dataclass
class Node:
    """One real node: its Node object (live/nodes.py), its folder, the pieces it runs on."""

    spec: dict[str, Any]
    index: int
    folder: Path
    plane: ControlPlane
    network: Network
    kubelet: Path
    runtime_root: Path
    image: image.Image
    registry: str
    holder: subprocess.Popen[bytes] | None = None
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return str(self.spec["metadata"]["name"])

    @property
    def cgroup(self) -> str:
        return procs.cgroup_path(self.name)

    def start(self, others: list[int]) -> Node:
        try:
            self._prepare()
            self.holder = _holder(mount=True)
            self._mount()
            self.network.attach(self.index, self.holder.pid, others)
            self._make_cgroups()
            self._containerd()
            self._kubelet()
            self._register()
        except BaseException:
            self.stop()
            raise
        return self

    def _make_cgroups(self) -> None:
        for h in v1_hierarchies():
            where = h
            for part in Path(self.cgroup).parts[1:]:
                where = where / part
                where.mkdir(exist_ok=True)
                for f in ("cpuset.cpus", "cpuset.mems"):  # a new cpuset cgroup has neither until given its parent's
                    if (where / f).exists() and not (where / f).read_text().strip():
                        (where / f).write_text((where.parent / f).read_text())

    def _prepare(self) -> None:
        for d in ("run", "var-lib", "log", "cni", "machine", "kubelet-pki"):
            (self.folder / d).mkdir(parents=True, exist_ok=True)
        capacity = self.spec["status"]["capacity"]
        self.mounts = {
            "/run": self.folder / "run", "/var/lib": self.folder / "var-lib", "/var/log": self.folder / "log",
            **machine(self.folder / "machine", quantity(capacity["cpu"]), quantity(capacity["memory"])),
        }  # fmt: skip
        image.node_root(self.image, self.folder / "containerd" / "root")
        (self.folder / "cni" / "10-live.conflist").write_text(json.dumps({
            "cniVersion": "1.0.0", "name": "live", "plugins": [{
                "type": "bridge", "bridge": "cni0", "isGateway": True, "ipMasq": False, "hairpinMode": True,
                "ipam": {"type": "host-local", "ranges": [[{"subnet": self.network.pods(self.index)}]], "routes": [{"dst": "0.0.0.0/0"}]},
            }],
        }))  # fmt: skip
        (self.folder / "resolv.conf").write_text("")  # the pods' resolv.conf: the cluster DNS only, no search of this machine's

    def _mount(self) -> None:
        assert self.holder is not None
        for target, source in self.mounts.items():
            _inside(self.holder.pid, "mount", "--bind", str(source), target, mount=True)

    def _spawn(self, name: str, args: list[str], limit_memlock: bool = False) -> None:
        assert self.holder is not None

        def memlock() -> None:
            resource.setrlimit(resource.RLIMIT_MEMLOCK, (MEMLOCK, MEMLOCK))

        log = (self.folder / f"{name}.log").open("ab")
        self.procs[name] = (subprocess.Popen(
            ["nsenter", f"--target={self.holder.pid}", "--net", "--mount", "--", *args], stdout=log, stderr=subprocess.STDOUT,
            env=image.runtime_env(self.runtime_root), start_new_session=True, preexec_fn=memlock if limit_memlock else None,
        ))  # fmt: skip

    def _containerd(self) -> None:
        folder, rt = self.folder / "containerd", self.runtime_root
        cri = f"""[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{image.PAUSE}"
  restrict_oom_score_adj = true
  disable_apparmor = true
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{rt}/usr/lib/cni"
    conf_dir = "{self.folder / "cni"}"
  [plugins."io.containerd.grpc.v1.cri".registry.mirrors."*"]
    endpoint = ["{self.registry}"]
"""
        config = image.containerd_config(folder, rt, cri)
        self._spawn("containerd", [f"{rt}/usr/bin/containerd", "--config", str(config)], limit_memlock=True)
        image.wait_socket(self.procs["containerd"], folder / "containerd.sock", self.folder / "containerd.log")

    def _kubelet(self) -> None:
        config = {
            "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
            "address": self.network.node_ip(self.index), "readOnlyPort": 0,
            "containerRuntimeEndpoint": f"unix://{self.folder / 'containerd' / 'containerd.sock'}",
            "cgroupDriver": "cgroupfs", "cgroupRoot": self.cgroup, "cgroupsPerQOS": True,
            "failSwapOn": False, "failCgroupV1": False, "protectKernelDefaults": False, "makeIPTablesUtilChains": False,
            "imageGCHighThresholdPercent": 100, "imageGCLowThresholdPercent": 99,
            "evictionHard": {"memory.available": "1Mi", "nodefs.available": "1%", "imagefs.available": "1%", "nodefs.inodesFree": "1%"},
            "authentication": {"anonymous": {"enabled": True}, "webhook": {"enabled": False}},
            "authorization": {"mode": "AlwaysAllow"},
            "clusterDNS": [self.network.host], "clusterDomain": "cluster.local", "resolvConf": str(self.folder / "resolv.conf"),
            "serializeImagePulls": False, "shutdownGracePeriod": "0s", "rotateCertificates": False,
        }  # fmt: skip
        (self.folder / "kubelet.yaml").write_text(yaml.safe_dump(config))
        kubeconfig = yaml.safe_load(self.plane.kubeconfig.read_text())
        (self.folder / "kubelet.kubeconfig").write_text(yaml.safe_dump(kubeconfig))
        self._spawn("kubelet", [
            str(self.kubelet), f"--config={self.folder / 'kubelet.yaml'}", f"--kubeconfig={self.folder / 'kubelet.kubeconfig'}",
            f"--hostname-override={self.name}", f"--node-ip={self.network.node_ip(self.index)}",
            f"--cert-dir={self.folder / 'kubelet-pki'}", "--v=1",
        ])  # fmt: skip

    def _register(self) -> None:
        """Once the kubelet has registered its Node: the labels and taints, then the extended resources (capacity and
        allocatable: the kubelet keeps those it does not manage), then Ready."""
        path = f"/api/v1/nodes/{self.name}"
        self._wait(lambda: self.plane.get(path) is not None, "its Node registered")
        meta, spec = self.spec["metadata"], self.spec["spec"]
        self._patch(path, {"metadata": {"labels": meta["labels"]}, "spec": {"taints": spec["taints"] or None}})
        extended = {k: v for k, v in self.spec["status"]["capacity"].items() if k not in ("cpu", "memory", "pods")}
        if extended:
            self._patch(f"{path}/status", {"status": {"capacity": extended, "allocatable": extended}})

        def ready() -> bool:
            node = self.plane.get(path) or {}
            return any(c["type"] == "Ready" and c["status"] == "True" for c in node.get("status", {}).get("conditions") or [])

        self._wait(ready, "Ready")

    def _patch(self, path: str, body: dict[str, Any]) -> None:
        status, said = self.plane.request("PATCH", path, body, content_type="application/merge-patch+json")
        if status != 200:
            raise NodesError(f"{self.name}: PATCH {path}: {status} {said}")

    def _wait(self, done: Any, what: str) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while not done():
            for name, p in self.procs.items():
                if p.poll() is not None:
                    raise NodesError(f"{self.name}: {name} exited ({p.returncode}); see {self.folder / name}.log")
            if time.monotonic() > deadline:
                raise NodesError(f"{self.name}: not {what} after {START_TIMEOUT} s; logs in {self.folder}")
            time.sleep(0.2)

    def stop(self) -> None:
        """The kubelet, then every container (what runs in the node's cgroup), containerd and its shims (what runs in
        the node's network namespace), the holder; then the node's cgroups."""
        _end(self.procs.get("kubelet"))
        net = None
        if self.holder is not None:
            with contextlib.suppress(OSError):
                net = os.readlink(f"/proc/{self.holder.pid}/ns/net")
        for _ in range(100):
            left = [p for p in self._members(net) if self.holder is None or p != self.holder.pid]
            if not left:
                break
            for pid in left:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.05)
        for p in self.procs.values():
            _end(p, 5)
        _end(self.holder, 5)
        self._remove_cgroups()

    def containers(self) -> list[str]:
        """What runs in the node's pods (its kubelet's kubepods cgroup): `PID COMMAND` of each process."""
        root = CGROUPS / "pids" / self.cgroup.lstrip("/") / "kubepods"
        out = []
        for procs_file in sorted(root.rglob("cgroup.procs")) if root.exists() else []:
            for pid in procs_file.read_text().split():
                with contextlib.suppress(OSError):
                    command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                    out.append(f"{pid} {command}")
        return out

    def _members(self, net: str | None) -> set[int]:
        pids = set()
        root = CGROUPS / "pids" / self.cgroup.lstrip("/")
        for procs_file in root.rglob("cgroup.procs") if root.exists() else []:
            with contextlib.suppress(OSError):
                pids |= {int(p) for p in procs_file.read_text().split()}
        if net is not None:
            for entry in os.scandir("/proc"):
                if entry.name.isdigit():
                    with contextlib.suppress(OSError):
                        if os.readlink(f"/proc/{entry.name}/ns/net") == net:
                            pids.add(int(entry.name))
        return pids

    def _remove_cgroups(self) -> None:
        """The node's cgroups, deepest first, and the run's folders above them once empty."""
        for h in v1_hierarchies():
            top = h / self.cgroup.lstrip("/")
            found = sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True) if top.exists() else []
            for d in [*found, top, *top.parents[: len(Path(self.cgroup).parts) - 2]]:
                with contextlib.suppress(OSError):
                    d.rmdir()


# --- CoreDNS ---------------------------------------------------------------------------------------------------------


def start_dns(plane: ControlPlane, binary: Path, address: str) -> None:
    """CoreDNS's kubernetes plugin for cluster.local (and the pods' reverse names) on ADDRESS:53, one of the plane's
    processes; nothing else is answered (no forwarding: a pod's lookup of a name outside the cluster fails here)."""
    ready = free_port()
    corefile = plane.workdir / "Corefile"
    corefile.write_text(f"""cluster.local:53 {{
    bind {address}
    errors
    ready 127.0.0.1:{ready}
    kubernetes cluster.local in-addr.arpa {{
        kubeconfig {plane.workdir / "admin.kubeconfig"} {plane.name}
        pods insecure
    }}
}}
""")
    plane.spawn("coredns", [str(binary), "-conf", str(corefile)])

    def answering() -> bool:
        with urllib.request.urlopen(f"http://127.0.0.1:{ready}/ready", timeout=2) as resp:
            return bool(resp.status == 200)

    plane.wait_for(answering, 60, f"CoreDNS (log {plane.workdir / 'coredns.log'})")


# --- what a pod's container starts with -------------------------------------------------------------------------------


def bounding_set() -> int:
    """The capabilities the nodes' runtime can give (its bounding set, this process's: containerd inherits it)."""
    line = next(ln for ln in Path("/proc/self/status").read_text().splitlines() if ln.startswith("CapBnd:"))
    return int(line.split()[1], 16)


def predicted_start(pod: dict[str, Any], container: str = "training") -> dict[str, Any]:
    """The uid, CapEff and RLIMIT_MEMLOCK (soft and hard) the program's model says the container of `pod`, as admission
    admitted it, starts with (KNOWLEDGE.md, config/values.py): a privileged container holds every capability the runtime
    has; otherwise only uid 0 holds the capabilities added (after drop ALL, which every pod the program renders drops),
    a non-root uid none (no ambient set); the memlock limit is the runtime's, 8 MiB, whatever the capabilities."""
    spec = pod["spec"]
    c = next(c for c in spec["containers"] if c["name"] == container)
    ctx = c.get("securityContext") or {}
    uid = ctx.get("runAsUser", (spec.get("securityContext") or {}).get("runAsUser", 0))
    if ctx.get("privileged"):
        caps = bounding_set()
    elif uid != 0:
        caps = 0
    else:
        caps = sum(1 << CAPABILITIES[name] for name in (ctx.get("capabilities") or {}).get("add") or [])
    return {"uid": uid, "cap_eff": caps, "memlock": {"soft": MEMLOCK, "hard": MEMLOCK}}


# The capabilities the program's strategies add, by their bit (linux/capability.h).
CAPABILITIES = {"IPC_LOCK": 14, "SYS_RESOURCE": 24, "NET_BIND_SERVICE": 10, "NET_RAW": 13, "SYS_ADMIN": 21}
