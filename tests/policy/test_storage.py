"""The storage rules (policy/rules/storage.py) at the fields the config writes them: every mount point of a pod can be made
and every file the launcher writes there can be written (read-only mounts, the DeepSpeed hostfile), and a claim several
pods mount is one they can share. FOUND holds each case, located at its field."""

from __future__ import annotations

import pytest

from config.openshift import LAUNCHER_FILES
from tests import fixtures
from tests.fixtures import Edit, W, add_volume, both, mount
from tests.helpers import MOUNTS, assert_found, case_id, classify

# --- found where the config writes it: (class, case, fixture, edit, rule, its config path, a phrase of message or fix) ---

FOUND: list[tuple[str, str, str, Edit, str, str, str]] = [
    (
        MOUNTS,
        "read-only /tmp",
        "roce",
        mount("dev", 1, mount_path="/tmp", read_only=True),
        "mount-points",
        "workloads[dev].mounts[1].mount_path",
        "/tmp/launcher.env",
    ),
    (
        MOUNTS,
        "scripts at /tmp",
        "roce",
        lambda d: fixtures.workload(d, "train")["scripts"][0].update(mount_path="/tmp"),
        "mount-points",
        "workloads[train].scripts[0].mount_path",
        "the launcher writes",
    ),
    (
        MOUNTS,
        "read-only /opt over the launcher",
        "roce",
        mount("dev", 1, mount_path="/opt", read_only=True),
        "mount-points",
        "workloads[dev].mounts[1].mount_path",
        "a parent of /opt/launcher",
    ),
    (
        MOUNTS,
        "scripts at /opt",
        "roce",
        lambda d: fixtures.workload(d, "train")["scripts"][0].update(mount_path="/opt"),
        "mount-points",
        "workloads[train].scripts[0].mount_path",
        "parent of /opt/launcher",
    ),
    (
        MOUNTS,
        "read-only parent of another mount",
        "roce",
        both(mount("dev", 1, mount_path="/data", read_only=True), mount("dev", 0, mount_path="/data/ws")),
        "mount-points",
        "workloads[dev].mounts[1].mount_path",
        "a parent of /data/ws",
    ),
    *[
        (
            MOUNTS,
            f"hostfile {f}",
            "roce",
            W("dev", deepspeed_hostfile=f),
            "mount-points",
            "workloads[dev].deepspeed_hostfile",
            "the launcher itself writes",
        )
        for f in LAUNCHER_FILES
    ],
    (
        MOUNTS,
        "hostfile in a read-only mount",
        "roce",
        both(mount("dev", 1, read_only=True), W("dev", deepspeed_hostfile="/datasets/hosts")),
        "mount-points",
        "workloads[dev].deepspeed_hostfile",
        "mounted read-only",
    ),
    (
        MOUNTS,
        "hostfile on a mount point",
        "roce",
        W("dev", deepspeed_hostfile="/datasets"),
        "mount-points",
        "workloads[dev].deepspeed_hostfile",
        "(a directory)",
    ),
    (
        MOUNTS,
        "hostfile in the launcher's mount",
        "roce",
        W("dev", deepspeed_hostfile="/opt/launcher/hostfile"),
        "mount-points",
        "workloads[dev].deepspeed_hostfile",
        "read-only",
    ),
    (
        MOUNTS,
        "hostfile under /proc",
        "roce",
        W("dev", deepspeed_hostfile="/proc/hostfile"),
        "mount-points",
        "workloads[dev].deepspeed_hostfile",
        "under /proc",
    ),
    (
        MOUNTS,
        "an existing single-pod claim mounted by two pods",
        "roce",
        both(
            add_volume(name="old", mount_path="/old", existing=True, size=None, shared=False),
            lambda d: fixtures.workload(d, "dev")["mounts"].append({"volume": "old"}),
        ),
        "access-mode",
        "workloads[dev].mounts[2].volume",
        "all but one would stay ContainerCreating",
    ),
]
classify(FOUND)


@pytest.mark.parametrize("cls,case,fixture,edit,rule,path,phrase", FOUND, ids=[case_id(c) for c in FOUND])
def test_found_where_the_config_writes_it(cls: str, case: str, fixture: str, edit: Edit, rule: str, path: str, phrase: str) -> None:
    assert_found(fixture, edit, rule, path, phrase)
