"""Images the stack builds on the cluster: an ImageStream and a BuildConfig per image. A ConfigChange trigger builds
only a BuildConfig that never built, so it is named NAME-DIGEST of its Dockerfile: a changed Dockerfile is a new
BuildConfig that builds once, into the same tag (pods get it when they next start)."""

import hashlib

from components.kube import MANAGED_BY, Sourced, managed
from config.stack import ClusterConfig

DIGEST = 6


def image_objects(config: ClusterConfig) -> list[Sourced]:
    objs: list[Sourced] = []
    for i, b in enumerate(config.images):
        labels = {**MANAGED_BY, "app.kubernetes.io/name": b.name}
        digest = hashlib.sha256(f"{b.tag}\n{b.dockerfile}".encode()).hexdigest()[:DIGEST]
        spec = {
            "runPolicy": "Serial",
            "source": {"type": "Dockerfile", "dockerfile": b.dockerfile},
            "strategy": {"type": "Docker", "dockerStrategy": {}},
            "output": {"to": {"kind": "ImageStreamTag", "name": f"{b.name}:{b.tag}"}},
            "triggers": [{"type": "ConfigChange"}],
            "successfulBuildsHistoryLimit": 2,
            "failedBuildsHistoryLimit": 2,
        }
        stream = managed("image.openshift.io/v1", "ImageStream", b.name, b.namespace, labels=labels, spec={})
        build = managed("build.openshift.io/v1", "BuildConfig", f"{b.name}-{digest}", b.namespace, labels=labels, spec=spec)
        objs += [(("images", i), stream), (("images", i), build)]
    return objs
