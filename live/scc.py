"""OpenShift's SCC admission on a live control plane (docs/live.md "SCC admission").

What OpenShift has, made here the way OpenShift makes it:

- **The default SCCs and their grants**, exactly as OpenShift ships them: the manifests of
  openshift/cluster-kube-apiserver-operator `bindata/bootkube/scc-manifests/` (live/openshift/scc-manifests/, copied
  unchanged; SOURCE.md there names the commit): the SCCs (restricted-v2, restricted, nonroot-v2, anyuid, privileged,
  ...), a `system:openshift:scc:NAME` ClusterRole for each, and the ClusterRoleBindings that let every authenticated
  user use restricted-v2 (and restricted-v3). config/openshift.py's table of SCC facts was read from these manifests.
- **Each project's allocation**: OpenShift's namespace security allocation controller (cluster-policy-controller,
  pkg/security/controller) writes `openshift.io/sa.scc.uid-range`, `openshift.io/sa.scc.supplemental-groups` and
  `openshift.io/sa.scc.mcs` on every namespace. That controller cannot be built here (it imports library-go's
  controller framework, which the module proxy does not serve, and keeps its state in a RangeAllocation that only
  openshift-apiserver serves), so `NamespaceAllocator` writes them, in its format and by its scheme: the default range
  `1000000000-1999999999/10000` (cmd/cluster-policy-controller/openshiftcontrolplane_config.go), the lowest free block
  for each new namespace, written `START/SIZE`; the MCS label of block i is the co-lex unranking of i x 5 (the default
  `mcsLabelsPerProject`) among the 2-category labels of `s0:/2` (pkg/security/mcs/label.go).
- **The admission plugin**: OpenShift's own (github.com/openshift/apiserver-library-go sccadmission), in a webhook
  main of ours (live/toolchain/k8s/sccadmission/main.go), registered as a mutating and a validating webhook for pods
  (`url:` on loopback with the tier's CA, as Kueue's are), failing closed as the in-process plugin cannot be skipped.
- **Pods made as a cluster makes them**: the control plane's controller-manager runs its controllers under their own
  service accounts (ControlPlane(controller_credentials=True)), so the StatefulSet and Job controllers create pods as
  `system:serviceaccount:kube-system:statefulset-controller` / `job-controller`, who may use restricted-v2 and
  restricted-v3 (every authenticated user may) and nothing else, as on OpenShift: the pod's service account's grants
  decide the rest.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import http.client
import json
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from live.controlplane import ControlPlane, _tls, free_port
from live.kueue import certificates

HERE = Path(__file__).resolve().parent
MANIFESTS = HERE / "openshift" / "scc-manifests"
WEBHOOK = "scc.security.openshift.io"  # the webhooks' name (the API server quotes it in a refusal)

# The annotations OpenShift's namespace security allocation controller writes (openshift/api security/v1/consts.go).
UID_RANGE = "openshift.io/sa.scc.uid-range"
SUPPLEMENTAL_GROUPS = "openshift.io/sa.scc.supplemental-groups"
MCS = "openshift.io/sa.scc.mcs"
# What admission writes on a pod it admits.
VALIDATED_SCC = "openshift.io/scc"
SUBJECT_TYPE = "security.openshift.io/validated-scc-subject-type"

# cluster-policy-controller's defaults (cmd/cluster-policy-controller/openshiftcontrolplane_config.go): UIDs
# 1000000000-1999999999 in blocks of 10000, MCS labels of 2 categories of 1024 under the prefix s0:, 5 labels per project.
UID_FIRST, UID_LAST, UID_BLOCK = 1_000_000_000, 1_999_999_999, 10_000
MCS_PREFIX, MCS_CATEGORIES, MCS_K, MCS_LABELS_PER_PROJECT = "s0:", 1024, 2, 5


# --- the manifests OpenShift ships ------------------------------------------------------------------------------


@functools.cache
def manifests() -> list[dict[str, Any]]:
    """Every object of OpenShift's SCC manifests, as shipped (SCCs, their use-roles, the default bindings); read once,
    never to be changed (copy one to edit it)."""
    return [yaml.safe_load(f.read_text()) for f in sorted(MANIFESTS.glob("*.yaml"))]


def shipped_sccs() -> dict[str, dict[str, Any]]:
    """OpenShift's default SCCs by name."""
    return {o["metadata"]["name"]: o for o in manifests() if o["kind"] == "SecurityContextConstraints"}


def install(plane: ControlPlane) -> None:
    """OpenShift's default SCCs, their ClusterRoles and default ClusterRoleBindings on `plane` (the SCC CRD first:
    live/clusters.py install_crds)."""
    order = {"SecurityContextConstraints": 0, "ClusterRole": 1, "ClusterRoleBinding": 2}
    for obj in sorted(manifests(), key=lambda o: order[o["kind"]]):
        plane.apply(obj)


# --- each project's allocation -------------------------------------------------------------------------------------


def uid_block(index: int) -> str:
    """The uid block the allocation controller gives the namespace it allocates block `index` to, as it writes it."""
    start = UID_FIRST + index * UID_BLOCK
    if index < 0 or start + UID_BLOCK - 1 > UID_LAST:
        raise ValueError(f"block {index} is outside {UID_FIRST}-{UID_LAST}/{UID_BLOCK}")
    return f"{start}/{UID_BLOCK}"


def _binomial(n: int, k: int) -> int:
    if n < k:
        return 0
    result = 1
    for d in range(1, k + 1):
        result = result * (n - d + 1) // d
    return result


def mcs_label(index: int) -> str:
    """The MCS label of block `index`: the categories of rank index x 5 in the co-lex order of the 2-subsets of
    c0..c1023, highest first, under s0: (cluster-policy-controller's DefaultMCSAllocation and mcs.Range.LabelAt)."""
    offset = index * MCS_LABELS_PER_PROJECT
    if offset >= _binomial(MCS_CATEGORIES, MCS_K):
        raise ValueError(f"block {index} is past the last MCS label")
    n, categories = MCS_CATEGORIES, []
    for i in range(MCS_K):
        while _binomial(n, MCS_K - i) > offset:
            n -= 1
        categories.append(n)
        offset -= _binomial(n, MCS_K - i)
    return MCS_PREFIX + ",".join(f"c{c}" for c in sorted(categories, reverse=True))


def allocation(index: int) -> dict[str, str]:
    """The three annotations of the namespace given block `index`."""
    block = uid_block(index)
    return {UID_RANGE: block, SUPPLEMENTAL_GROUPS: block, MCS: mcs_label(index)}


def block_index(annotation: str) -> int | None:
    """The block an existing uid-range annotation holds (the controller's repair counts these as taken)."""
    try:
        start, size = (int(x) for x in annotation.split("/"))
    except ValueError:
        return None
    if size != UID_BLOCK or (start - UID_FIRST) % UID_BLOCK or not UID_FIRST <= start <= UID_LAST:
        return None
    return (start - UID_FIRST) // UID_BLOCK


class NamespaceAllocator:
    """Writes the allocation annotations on every namespace of `plane` that has none, as soon as it appears (a watch),
    with the lowest block no namespace holds. start() it; it stops with stop()."""

    def __init__(self, plane: ControlPlane) -> None:
        self.plane = plane
        self.taken: set[int] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"scc-allocator-{plane.name}", daemon=True)
        self._watching: http.client.HTTPSConnection | None = None
        self.errors: list[str] = []

    def start(self) -> NamespaceAllocator:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop, and end the open watch at once: the API server waits for a watch to end before it stops itself."""
        self._stop.set()
        watching = self._watching
        if watching is not None and watching.sock is not None:
            with contextlib.suppress(OSError):
                watching.sock.shutdown(socket.SHUT_RDWR)
        self._thread.join(timeout=5)

    def _run(self) -> None:
        version = ""
        while not self._stop.is_set():
            try:
                version = version or self._list()
                for event in self._watch(version):
                    if event.get("type") == "ERROR":  # the resourceVersion expired: list again
                        version = ""
                        break
                    version = event["object"]["metadata"]["resourceVersion"]
                    if event["type"] in ("ADDED", "MODIFIED"):
                        self._allocate(event["object"])
            except (OSError, http.client.HTTPException, ValueError, KeyError) as err:
                if self._stop.is_set():
                    return
                self.errors.append(str(err))
                version = ""
                self._stop.wait(0.5)

    def _list(self) -> str:
        found = self.plane.get("/api/v1/namespaces") or {}
        items = found.get("items", [])
        for ns in items:
            held = block_index((ns["metadata"].get("annotations") or {}).get(UID_RANGE, ""))
            if held is not None:
                self.taken.add(held)
        for ns in items:
            self._allocate(ns)
        return str(found.get("metadata", {}).get("resourceVersion", ""))

    def _watch(self, version: str) -> Iterator[dict[str, Any]]:
        """The namespace events after `version`, until the API server ends the watch (a minute) or stop() does."""
        conn = http.client.HTTPSConnection("127.0.0.1", self.plane.port, context=_tls(), timeout=120)
        self._watching = conn
        try:
            conn.request("GET", f"/api/v1/namespaces?watch=true&timeoutSeconds=60&resourceVersion={version}",
                         headers={"Authorization": f"Bearer {self.plane.token}"})  # fmt: skip
            response = conn.getresponse()
            if response.status != 200:
                raise ValueError(f"watching namespaces: {response.status} {response.read()[:300]!r}")
            for line in response:
                yield json.loads(line)
        finally:
            self._watching = None
            conn.close()

    def _allocate(self, ns: dict[str, Any]) -> None:
        meta = ns["metadata"]
        if UID_RANGE in (meta.get("annotations") or {}) or meta.get("deletionTimestamp"):
            return
        index = next(i for i in range(len(self.taken) + 1) if i not in self.taken)
        patch = {"metadata": {"annotations": allocation(index)}}
        status, body = self.plane.request(
            "PATCH", f"/api/v1/namespaces/{meta['name']}", patch, content_type="application/strategic-merge-patch+json"
        )
        if status == 200:
            self.taken.add(index)
        elif status != 404:
            raise ValueError(f"annotating namespace {meta['name']}: {status} {body}")


# --- the admission webhook ------------------------------------------------------------------------------------------


def webhook_configurations(port: int, ca: bytes) -> list[dict[str, Any]]:
    """The mutating (Admit) and validating (Validate) webhooks for pods, every namespace, failing closed."""
    bundle = base64.b64encode(ca).decode()

    def hook(path: str) -> dict[str, Any]:
        return {
            "name": WEBHOOK,
            "clientConfig": {"url": f"https://127.0.0.1:{port}/{path}", "caBundle": bundle},
            # The plugin's handler: CREATE and UPDATE of pods and of the subresources it judges (its shouldIgnore passes
            # over the others: status, binding, eviction, exec, attach, log, portforward, proxy; they are not sent).
            "rules": [
                {
                    "apiGroups": [""],
                    "apiVersions": ["v1"],
                    "operations": ["CREATE", "UPDATE"],
                    "resources": ["pods", "pods/ephemeralcontainers", "pods/resize"],
                }
            ],
            "failurePolicy": "Fail",
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            "timeoutSeconds": 30,
        }

    return [
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
         "metadata": {"name": WEBHOOK}, "webhooks": [{**hook("mutate"), "reinvocationPolicy": "Never"}]},
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
         "metadata": {"name": WEBHOOK}, "webhooks": [hook("validate")]},
    ]  # fmt: skip


class Admission:
    """OpenShift's SCC admission on `plane`: start() installs the default SCCs and grants, starts the namespace
    allocator and the webhook (one of the plane's processes, logged to scc-admission.log) and registers it."""

    def __init__(self, plane: ControlPlane, binary: Path) -> None:
        self.plane = plane
        self.binary = binary
        self.folder = plane.workdir / "scc-admission"
        self.port = free_port()
        self.allocator = NamespaceAllocator(plane)

    def start(self, timeout: float = 60) -> Admission:
        install(self.plane)
        self.allocator.start()
        ca = certificates(self.folder / "certs")
        self.plane.spawn("scc-admission", [
            str(self.binary), f"--kubeconfig={self.plane.workdir / 'admin.kubeconfig'}",
            f"--listen=127.0.0.1:{self.port}", f"--cert-dir={self.folder / 'certs'}",
        ])  # fmt: skip
        self.plane.wait_for(self._ready, timeout, f"SCC admission (log {self.plane.workdir / 'scc-admission.log'})")
        for hooks in webhook_configurations(self.port, ca):
            self.plane.apply(hooks)
        return self

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"https://127.0.0.1:{self.port}/readyz", context=_tls(), timeout=5) as resp:
                return bool(resp.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def wait_allocated(self, namespace: str, timeout: float = 30) -> dict[str, str]:
        """The namespace's allocation annotations, once written."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            annotations = ((self.plane.get(f"/api/v1/namespaces/{namespace}") or {}).get("metadata") or {}).get("annotations") or {}
            if UID_RANGE in annotations:
                return dict(annotations)
            time.sleep(0.1)
        said = self.allocator.errors[-3:]
        raise RuntimeError(f"{self.plane.name}: namespace {namespace} has no {UID_RANGE} after {timeout:.0f} s: {said}")

    def stop(self) -> None:
        self.allocator.stop()


# --- asking admission directly (a server-side dry run), as a controller ------------------------------------------

# The users the controller-manager creates pods as, when it runs its controllers under their own service accounts.
STATEFULSET_CONTROLLER = ("kube-system", "statefulset-controller")
JOB_CONTROLLER = ("kube-system", "job-controller")


def token_of(plane: ControlPlane, account: tuple[str, str], seconds: int = 3600) -> str:
    """A token of service account NAMESPACE/NAME (a TokenRequest): requests with it are that account's, with its groups."""
    namespace, name = account
    status, body = plane.request(
        "POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": seconds}},
    )  # fmt: skip
    if status != 201:
        raise RuntimeError(f"{plane.name}: a token of {namespace}/{name}: {status} {body}")
    return str(body["status"]["token"])


def pod_of(owner: dict[str, Any], index: int = 0) -> dict[str, Any]:
    """The pod a StatefulSet's or Job's controller makes from `owner`'s template (its name, labels, annotations and
    spec; a StatefulSet's claim templates as the claims' volumes), for a dry run of its admission."""
    meta, spec = owner["metadata"], owner["spec"]
    template = spec["template"]
    pod_spec = json.loads(json.dumps(template["spec"]))
    name = f"{meta['name']}-{index}"
    if owner["kind"] == "StatefulSet":
        claims = [{"name": t["metadata"]["name"], "persistentVolumeClaim": {"claimName": f"{t['metadata']['name']}-{name}"}}
                  for t in spec.get("volumeClaimTemplates") or []]  # fmt: skip
        pod_spec["volumes"] = [*claims, *(pod_spec.get("volumes") or [])]
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": meta["namespace"], "labels": dict(template["metadata"].get("labels") or {}),
                     "annotations": dict(template["metadata"].get("annotations") or {})},
        "spec": pod_spec,
    }  # fmt: skip


def refusal(plane: ControlPlane, namespace: str, owner: str) -> str:
    """The newest FailedCreate event of the StatefulSet or Job `owner` (what `oc describe` shows: admission's refusal of
    a pod its controller made), '' if there is none."""
    query = f"fieldSelector=involvedObject.name%3D{owner},reason%3DFailedCreate"
    events = (plane.get(f"/api/v1/namespaces/{namespace}/events?{query}") or {}).get("items", [])
    newest = max(events, key=lambda e: e.get("lastTimestamp") or e.get("eventTime") or "", default=None)
    return str(newest["message"]) if newest else ""


class Verdict:
    """What admission answered for one pod: admitted (and under which SCC, the pod as admitted) or refused (its message)."""

    def __init__(self, status: int, body: Any) -> None:
        self.admitted = status == 201
        self.pod: dict[str, Any] = body if self.admitted else {}
        self.scc: str | None = (self.pod.get("metadata", {}).get("annotations") or {}).get(VALIDATED_SCC) if self.admitted else None
        self.message: str = "" if self.admitted else str(body.get("message") if isinstance(body, dict) else body)

    def __repr__(self) -> str:
        return f"admitted under {self.scc}" if self.admitted else f"refused: {self.message}"


def dry_run(pod: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The request that asks admission about creating `pod` without storing it: its path (dryRun=All, so every admission
    webhook is called and nothing is stored) and body. The pod is named by the API server after its name (a pod of that
    name may exist: a dry run is refused as a create would be)."""
    meta = {k: v for k, v in pod["metadata"].items() if k != "name"}
    name = pod["metadata"].get("name")
    meta["generateName"] = f"{name}-" if name else pod["metadata"].get("generateName", "pod-")
    return f"/api/v1/namespaces/{meta['namespace']}/pods?dryRun=All", {**pod, "metadata": meta}


def review(plane: ControlPlane, pod: dict[str, Any], token: str) -> Verdict:
    """Admission's verdict on creating `pod` as the token's identity: a server-side dry run (`dry_run`). One request,
    about 20 ms on loopback."""
    path, body = dry_run(pod)
    req = urllib.request.Request(f"{plane.server}{path}", data=json.dumps(body).encode(), method="POST")
    req.add_header("Authorization", f"Bearer {token}")
    req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, context=_tls(), timeout=60) as resp:
            return Verdict(resp.status, json.loads(resp.read()))
    except urllib.error.HTTPError as err:
        raw = err.read()
        return Verdict(err.code, json.loads(raw) if raw[:1] == b"{" else raw.decode())
