"""Images the stack builds on the cluster: an ImageStream and a BuildConfig per image.

A BuildConfig's ConfigChange trigger starts a build only while it has never built (openshift
buildconfig controller: status.lastVersion == 0), so editing the Dockerfile of a BuildConfig would
never rebuild the image. The BuildConfig is therefore named NAME-DIGEST of its Dockerfile: a changed
Dockerfile is a new BuildConfig that builds once, into the same ImageStream tag, and the old one is
deleted. Pods reference NAME:TAG through the internal registry and get the new image when they next
start (a running training run is never restarted for it).
"""

from __future__ import annotations

import hashlib

from components.kube import MANAGED_BY, Sourced
from config.cluster import ImageBuild
from config.stack import ClusterConfig

DIGEST = 6


def build_config_name(build: ImageBuild) -> str:
    digest = hashlib.sha256(f"{build.tag}\n{build.dockerfile}".encode()).hexdigest()[:DIGEST]
    return f"{build.name}-{digest}"


def image_objects(config: ClusterConfig) -> list[Sourced]:
    objs: list[Sourced] = []
    for i, b in enumerate(config.images):
        meta = {"namespace": b.namespace, "labels": {**MANAGED_BY, "app.kubernetes.io/name": b.name}}
        stream = {"apiVersion": "image.openshift.io/v1", "kind": "ImageStream", "metadata": {"name": b.name, **meta}, "spec": {}}
        objs.append((("images", i), stream))
        objs.append(
            (
                ("images", i),
                {
                    "apiVersion": "build.openshift.io/v1",
                    "kind": "BuildConfig",
                    "metadata": {"name": build_config_name(b), **meta},
                    "spec": {
                        "runPolicy": "Serial",
                        "source": {"type": "Dockerfile", "dockerfile": b.dockerfile},
                        "strategy": {"type": "Docker", "dockerStrategy": {}},
                        "output": {"to": {"kind": "ImageStreamTag", "name": f"{b.name}:{b.tag}"}},
                        "triggers": [{"type": "ConfigChange"}],
                        "successfulBuildsHistoryLimit": 2,
                        "failedBuildsHistoryLimit": 2,
                    },
                },
            )
        )
    return objs
