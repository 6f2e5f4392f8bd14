"""Kueue, the queue of a shared cluster, run against a live control plane (docs/live.md "Kueue").

The manager is built from sigs.k8s.io/kueue v0.17.0 (live/toolchain/kueue, level 3). Everything else it needs
comes from that same module's source in the Go module cache, as its release installs it:

- its CRDs (config/components/crd/bases), applied server-side: the Workload CRD is 1.4 MB, over the 256 KiB a
  client-side apply's last-applied annotation may hold. The CRDs the release gives a conversion webhook
  (config/components/crd/kustomization.yaml's patches) get it here too, at the manager's /convert;
- its webhooks (config/components/webhook/manifests.yaml), as `clientConfig.url: https://127.0.0.1:PORT/<path>`
  with the tier's own CA: the release's Service cannot be reached on loopback, and the internal cert management
  only issues the Service's DNS name (envtest registers Kueue's webhooks by URL the same way). Only the webhooks of
  what this manager serves are registered (its own kinds, and the batch/job, statefulset and pod integrations);
  those of jobs, StatefulSets and pods only in namespaces labelled MANAGED=true, the Red Hat build's opt-in: its
  pod webhook fails closed, and no other namespace of the plane may depend on it;
- a Configuration (apis/config/v1beta2): no leader election, metrics off, health probes on a loopback port,
  `internalCertManagement.enable: false` (the tier gives the serving certificate, in certDir),
  `integrations.frameworks: [batch/job, statefulset]` (the statefulset integration enables the pod integration
  itself: pkg/controller/jobs/statefulset's ImplicitlyEnabledFrameworkNames), `waitForPodsReady` with a short
  timeout and backoff (the tests wait for it), `managedJobsNamespaceSelector` on the same label, and the
  VisibilityOnDemand feature off (its API server reads certificates from the fixed path /visibility; nothing here
  uses that API).

One fixed path remains: with internal cert management off, cmd/kueue/main.go reads the metrics server's certificate
from /etc/kueue/metrics/certs (tls.crt, tls.key) and exits if it is absent, even with metrics off. The manager
runs in a mount namespace of its own (`unshare --mount --map-root-user`) where /etc is an overlay whose upper layer
is a folder of this plane's workdir holding that certificate: the manager sees /etc/kueue/metrics/certs, nothing
is written outside the tier's folders, and the host's /etc is untouched. This needs `unshare` and `mount`
(util-linux) and user namespaces with overlay mounts (Linux 5.11+, or root).

The manager runs as the plane's admin (as kube-scheduler and kwok do), not with the release's RBAC.
"""

from __future__ import annotations

import base64
import copy
import shutil
import subprocess
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from live import toolchain
from live.controlplane import ControlPlane, free_port

MODULE = "sigs.k8s.io/kueue"
API = "kueue.x-k8s.io/v1beta2"
# A namespace whose jobs Kueue manages carries this label (=true): the Red Hat build of Kueue's opt-in, which
# scopes the webhooks of jobs, StatefulSets and pods and the manager's managedJobsNamespaceSelector alike.
MANAGED = "kueue.openshift.io/managed"
QUEUE_NAME = "kueue.x-k8s.io/queue-name"  # on a job or StatefulSet: the LocalQueue it waits in
JOB_UID = "kueue.x-k8s.io/job-uid"  # on a Workload: the uid of the job or StatefulSet it stands for
ADMISSION_GATE = "kueue.x-k8s.io/admission"  # the scheduling gate of a pod whose workload is not admitted
FRAMEWORKS = ["batch/job", "statefulset"]
# The (group, resource) pairs the webhooks of those frameworks (and of the pod integration they imply) serve.
FRAMEWORK_RESOURCES = {("batch", "jobs"), ("apps", "statefulsets"), ("", "pods")}
KUEUE_GROUP = "kueue.x-k8s.io"
METRICS_CERTS = "kueue/metrics/certs"  # under /etc: cmd/kueue/main.go's metricsCertPath
# libyaml's loader where PyYAML has it: the pure-Python one takes 8 s for the Workload CRD's 1.4 MB, libyaml 0.7 s.
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def source() -> Path:
    """The Kueue module's source folder (read-only, in the Go module cache), at the version live/toolchain/kueue pins."""
    module = toolchain.MODULES / "kueue"
    return toolchain.downloaded(MODULE, module, toolchain.path_of("kueue").parent / "download.log")


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def certificates(folder: Path) -> bytes:
    """A CA of the tier's own and a serving certificate for 127.0.0.1 signed by it (tls.crt, tls.key in `folder`,
    as controller-runtime's webhook server reads them); the CA's PEM, for the webhooks' caBundle."""
    folder.mkdir(parents=True, exist_ok=True)
    ca_key, ca_crt, csr, ext = folder / "ca.key", folder / "ca.crt", folder / "tls.csr", folder / "tls.ext"
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(ca_key), "-out", str(ca_crt), "-days", "2",
             "-subj", "/CN=live-kueue-ca",
             "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign")  # fmt: skip
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(folder / "tls.key"), "-out", str(csr), "-subj", "/CN=127.0.0.1")
    ext.write_text("subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n")
    _openssl("x509", "-req", "-in", str(csr), "-CA", str(ca_crt), "-CAkey", str(ca_key), "-CAcreateserial",
             "-out", str(folder / "tls.crt"), "-days", "2", "-extfile", str(ext))  # fmt: skip
    return ca_crt.read_bytes()


def configuration(webhook_port: int, probe_port: int, cert_dir: Path, pods_ready_timeout: int, backoff_seconds: int) -> dict[str, Any]:
    """The manager's Configuration (apis/config/v1beta2/configuration_types.go)."""
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": "kueue-system",  # names its webhook Service, which nothing here uses
        "leaderElection": {"leaderElect": False},
        "metrics": {"bindAddress": "0"},
        "health": {"healthProbeBindAddress": f"127.0.0.1:{probe_port}"},
        "webhook": {"host": "127.0.0.1", "port": webhook_port, "certDir": str(cert_dir)},
        "internalCertManagement": {"enable": False},
        "manageJobsWithoutQueueName": False,
        "managedJobsNamespaceSelector": {"matchLabels": {MANAGED: "true"}},
        # All-or-nothing: an admitted workload whose pods are not all Ready within the timeout is evicted and
        # requeued (after the backoff), releasing its quota: the deadlock of two half-started runs cannot last.
        "waitForPodsReady": {
            "timeout": f"{pods_ready_timeout}s",
            "blockAdmission": False,
            "requeuingStrategy": {"timestamp": "Eviction", "backoffBaseSeconds": backoff_seconds, "backoffMaxSeconds": 4 * backoff_seconds},
        },
        "integrations": {"frameworks": FRAMEWORKS},
        "featureGates": {"VisibilityOnDemand": False},
    }


def webhook_configurations(src: Path, port: int, ca: bytes) -> list[dict[str, Any]]:
    """The module's Mutating/ValidatingWebhookConfigurations, each webhook called at https://127.0.0.1:PORT/<its
    path> with the tier's CA; those of other frameworks left out (this manager does not serve them), those of jobs,
    StatefulSets and pods scoped to the managed namespaces."""
    bundle = base64.b64encode(ca).decode()
    out = []
    for doc in yaml.safe_load_all((src / "config/components/webhook/manifests.yaml").read_text()):
        doc = copy.deepcopy(doc)
        kept = []
        for hook in doc["webhooks"]:
            served = {(g, r.split("/")[0]) for rule in hook["rules"] for g in rule["apiGroups"] for r in rule["resources"]}
            if all(g == KUEUE_GROUP for g, _ in served):
                pass  # Kueue's own kinds: every namespace's Workloads, the cluster's queues and flavors
            elif served <= FRAMEWORK_RESOURCES:
                hook["namespaceSelector"] = {"matchLabels": {MANAGED: "true"}}
            else:
                continue
            hook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{hook['clientConfig']['service']['path']}", "caBundle": bundle}
            kept.append(hook)
        doc["webhooks"] = kept
        out.append(doc)
    return out


def crds(src: Path, port: int, ca: bytes) -> list[dict[str, Any]]:
    """The module's CRDs; those its kustomization gives a conversion webhook get it at the manager's /convert."""
    crd_dir = src / "config/components/crd"
    kustomization = yaml.safe_load((crd_dir / "kustomization.yaml").read_text())
    converted = {yaml.safe_load((crd_dir / p["path"]).read_text())["metadata"]["name"] for p in kustomization.get("patches", [])}
    out = []
    for f in sorted((crd_dir / "bases").glob("*.yaml")):
        crd = yaml.load(f.read_text(), Loader=LOADER)  # noqa: S506 (a safe loader)
        if crd["metadata"]["name"] in converted:
            crd["spec"]["conversion"] = {
                "strategy": "Webhook",
                "webhook": {
                    "clientConfig": {"url": f"https://127.0.0.1:{port}/convert", "caBundle": base64.b64encode(ca).decode()},
                    "conversionReviewVersions": ["v1"],
                },
            }
        out.append(crd)
    return out


class Kueue:
    """Kueue's manager against `plane`: start() installs its CRDs and webhooks and runs it (one of the plane's
    processes: stopped with it, its log in the plane's workdir as kueue.log)."""

    def __init__(self, plane: ControlPlane, binary: Path, pods_ready_timeout: int = 20, backoff_seconds: int = 1) -> None:
        self.plane = plane
        self.binary = binary
        self.pods_ready_timeout = pods_ready_timeout
        self.backoff_seconds = backoff_seconds
        self.folder = plane.workdir / "kueue"
        self.webhook_port = free_port()
        self.probe_port = free_port()

    def start(self, timeout: float = 120) -> Kueue:
        for tool in ("unshare", "mount", "openssl"):
            if shutil.which(tool) is None:
                raise RuntimeError(f'Kueue\'s manager needs `{tool}` on PATH (docs/live.md "Kueue")')
        src = source()
        certs = self.folder / "certs"
        ca = certificates(certs)
        # The metrics certificate, where the manager insists on it, in the upper layer of its private /etc.
        upper, work = self.folder / "etc-upper", self.folder / "etc-work"
        (upper / METRICS_CERTS).mkdir(parents=True, exist_ok=True)
        work.mkdir(parents=True, exist_ok=True)
        for name in ("tls.crt", "tls.key"):
            shutil.copyfile(certs / name, upper / METRICS_CERTS / name)
        if any(c in str(p) for p in (upper, work) for c in ",:"):
            raise RuntimeError(f"{self.folder}: an overlay mount cannot name a folder with ',' or ':' in its path")
        config = self.folder / "config.yaml"
        settings = configuration(self.webhook_port, self.probe_port, certs, self.pods_ready_timeout, self.backoff_seconds)
        config.write_text(yaml.safe_dump(settings))

        definitions = crds(src, self.webhook_port, ca)
        for definition in definitions:
            self.plane.apply(definition)
        for hooks in webhook_configurations(src, self.webhook_port, ca):
            self.plane.apply(hooks)
        for definition in definitions:  # the manager watches every one of its kinds from the start
            self.plane.wait_crd(definition["spec"]["group"], definition["spec"]["names"]["plural"], timeout)

        script = 'mount -t overlay overlay -o "lowerdir=/etc,upperdir=$1,workdir=$2" /etc && exec "$3" --config="$4" --kubeconfig="$5"'
        self.plane.spawn("kueue", [
            "unshare", "--mount", "--map-root-user", "sh", "-c", script, "kueue",
            str(upper), str(work), str(self.binary), str(config), str(self.plane.workdir / "admin.kubeconfig"),
        ])  # fmt: skip
        # Ready once its webhook server listens (cmd/kueue/main.go setupProbeEndpoints): from then on the API server's
        # calls to its webhooks are answered.
        self.plane.wait_for(self._ready, timeout, f"Kueue's manager (log {self.plane.workdir / 'kueue.log'})")
        return self

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.probe_port}/readyz", timeout=5) as resp:
                return bool(resp.status == 200)
        except (urllib.error.URLError, OSError):
            return False


# --- what Kueue says of a workload ------------------------------------------------------------------------------


def workload_of(plane: ControlPlane, namespace: str, uid: str) -> dict[str, Any] | None:
    """The Workload Kueue made for the job or StatefulSet of `uid`, if there is one yet."""
    found = (plane.get(f"/apis/{API}/namespaces/{namespace}/workloads?labelSelector={JOB_UID}%3D{uid}") or {}).get("items", [])
    return dict(found[0]) if found else None


def condition(obj: dict[str, Any] | None, kind: str) -> dict[str, Any]:
    """The status condition `kind` of `obj` ({} when it has none)."""
    for c in (obj or {}).get("status", {}).get("conditions", []):
        if c.get("type") == kind:
            return dict(c)
    return {}


def holds(obj: dict[str, Any] | None, kind: str) -> bool:
    return condition(obj, kind).get("status") == "True"


KUEUE_12232 = "kueue#12232 (github.com/kubernetes-sigs/kueue/issues/12232, fixed after v0.17.0)"


def orphaned(plane: ControlPlane, namespace: str) -> list[dict[str, Any]]:
    """The namespace's Workloads that hold quota for a StatefulSet at 0 replicas (or gone) and have no owner left: what
    Kueue v0.17.0 can leave behind when a queued StatefulSet is stopped. At 0 replicas Kueue takes the StatefulSet's
    owner reference off its Workload; the pods, its other owners, are deleted at the same time, and when the garbage
    collector takes their references off first (the StatefulSet still listed), the Workload ends with no owner at all:
    nothing ever collects it, and it holds its quota until someone deletes it (KUEUE_12232)."""
    sets = (plane.get(f"/apis/apps/v1/namespaces/{namespace}/statefulsets") or {}).get("items", [])
    stopped = {s["metadata"]["uid"] for s in sets if s.get("spec", {}).get("replicas", 1) == 0}
    present = {s["metadata"]["uid"] for s in sets}
    out = []
    for wl in (plane.get(f"/apis/{API}/namespaces/{namespace}/workloads") or {}).get("items", []):
        meta = wl["metadata"]
        uid = meta.get("labels", {}).get(JOB_UID, "")
        if meta.get("ownerReferences") or meta.get("deletionTimestamp") or not holds(wl, "QuotaReserved"):
            continue
        if uid in stopped or uid not in present:
            out.append(dict(wl))
    return out


def delete_orphaned(plane: ControlPlane, namespace: str, said: Callable[[], tuple[int, str]]) -> list[str]:
    """Deletes what `orphaned` finds, as an admin does (`oc delete workload NAME -n NAMESPACE`), once `said()` (what
    `python -m stacks status` says of the stopped workload: its exit code and line) names each with that command and
    exits 1; an AssertionError, nothing deleted, when it does not. Their names ([] and `said` not asked: none found)."""
    names = [str(wl["metadata"]["name"]) for wl in orphaned(plane, namespace)]
    if names:
        code, line = said()
        unnamed = [name for name in names if f"workloads.kueue.x-k8s.io {name} -n {namespace}`" not in line]
        assert code == 1 and not unnamed, (
            f"status does not name (exit {code}) the Workload(s) {unnamed or names} Kueue left holding quota ({KUEUE_12232}):\n{line}"
        )
    for name in names:
        plane.request("DELETE", f"/apis/{API}/namespaces/{namespace}/workloads/{name}")
    return names
