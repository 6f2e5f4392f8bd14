"""The SR-IOV network operator on a live control plane: its CRDs, and its own SriovNetwork controller.

Both come from the operator's Go module (github.com/k8snetworkplumbingwg/sriov-network-operator v1.5.0, pinned in
live/toolchain/sriov/): the build copies `config/crd/bases` and `bindata/manifests/cni-config` (the NAD template the
controller renders) beside the binary, which is the operator's `controllers.SriovNetworkReconciler` and
`SriovIBNetworkReconciler` in a small main of ours (live/toolchain/sriov/main.go says why not the operator's main).

The controller runs as the operator's Deployment runs it on OpenShift: in `openshift-sriov-network-operator`
(NAMESPACE: it reads SriovNetworks only there) with RESOURCE_PREFIX `openshift.io` (the prefix of the NAD's
`k8s.v1.cni.cncf.io/resourceName`). It is the cluster's admin (the plane's kubeconfig), as the operator's
ClusterRole lets it write NADs in every namespace. Nothing of the node side runs: no config daemon, no device plugin.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from live import toolchain
from live.controlplane import ControlPlane

NAMESPACE = "openshift-sriov-network-operator"
RESOURCE_PREFIX = "openshift.io"
GROUP = "sriovnetwork.openshift.io"
# The controllers our main starts; each logs "Starting workers" with its name once its caches are synced.
CONTROLLERS = ("sriovnetwork", "sriovibnetwork")


def assets(binary: Path) -> dict[str, Path]:
    """The operator's CRD manifests and NAD templates its build put beside `binary` (toolchain.SRIOV_ASSETS)."""
    found = {name: binary.parent / name for name in toolchain.SRIOV_ASSETS}
    missing = [str(p) for p in found.values() if not p.is_dir()]
    if missing:
        raise FileNotFoundError(
            f"the SR-IOV operator's files are not beside its controller ({', '.join(missing)}): "
            f"remove {binary} and run `python -m live.toolchain` to build it again with them"
        )
    return found


def crds(binary: Path) -> list[dict[str, Any]]:
    """Every CRD the operator's module ships, as the manifests give them."""
    return [yaml.safe_load(f.read_text()) for f in sorted(assets(binary)["crds"].glob("*.yaml"))]


def install_crds(plane: ControlPlane, binary: Path) -> list[str]:
    """Apply the operator's CRDs (server-side) and wait until each is Established; their names."""
    applied = crds(binary)
    for crd in applied:
        plane.apply(crd)
    for crd in applied:
        plane.wait_crd(crd["spec"]["group"], crd["spec"]["names"]["plural"])
    return [crd["metadata"]["name"] for crd in applied]


def ensure_namespace(plane: ControlPlane, name: str) -> None:
    plane.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})


@dataclass
class Controller:
    """The operator's SriovNetwork controller against `plane`: start() it, stop() it; its log is `log`."""

    plane: ControlPlane
    binary: Path
    proc: subprocess.Popen[bytes] | None = None
    log: Path = field(init=False)

    def __post_init__(self) -> None:
        self.log = self.plane.workdir / "sriov-network-controller.log"

    def start(self, timeout: float = 60) -> Controller:
        ensure_namespace(self.plane, NAMESPACE)
        env = {**os.environ, "NAMESPACE": NAMESPACE, "RESOURCE_PREFIX": RESOURCE_PREFIX}
        offset = self.log.stat().st_size if self.log.exists() else 0
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [str(self.binary), f"--kubeconfig={self.plane.workdir / 'admin.kubeconfig'}",
                 f"--manifests={assets(self.binary)['cni-config']}"],
                stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True,
            )  # fmt: skip
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            said = self.log.read_bytes()[offset:].decode(errors="replace")
            started = [line for line in said.splitlines() if "Starting workers" in line]
            if all(any(f'"{c}"' in line for line in started) for c in CONTROLLERS):
                return self
            if self.proc.poll() is not None:
                raise RuntimeError(f"the SR-IOV controller exited ({self.proc.returncode}): {said.strip()[-2000:]}")
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"the SR-IOV controller did not start its workers in {timeout:.0f} s; log {self.log}")

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.proc = None
