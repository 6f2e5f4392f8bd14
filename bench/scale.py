"""Generated stacks of a given size, for the scale curve of `make bench` and the timing test of the largest stack the
config model accepts (tests/config/test_bounds.py, tests/cli/test_check.py).

A stack here is what a large site would write: RDMA workloads over SR-IOV with per-pod claims, a TCP variant of every
fourth, Jobs among them, spread over namespaces, on GPU nodes counted (`count`) or named in pinned sets. As many
workloads run as fit on the nodes with room to spare (the others are stopped), so `check` passes and times the work of
a stack that deploys, not the reporting of a capacity error.
"""

from __future__ import annotations

import json
import random
import statistics
import time
from typing import Any

from config.stack import ClusterConfig
from config.values import (
    MAX_ACCEPTED_WARNINGS,
    MAX_ACCESS_MODES,
    MAX_ARGS,
    MAX_ATTACHMENTS,
    MAX_BANDWIDTH_CHECKS,
    MAX_CAPABILITIES,
    MAX_CLUSTER_NODES,
    MAX_DEVICES,
    MAX_ENV,
    MAX_EXISTING,
    MAX_HAND_MADE,
    MAX_IMAGES,
    MAX_MOUNTS,
    MAX_NAMED_NODES,
    MAX_NAMESPACES,
    MAX_NODE_POLICIES,
    MAX_NODE_SETS,
    MAX_NOTES,
    MAX_OBSERVATIONS,
    MAX_POD_TEMPLATES,
    MAX_POLICY_PFS,
    MAX_PORTS,
    MAX_PVC_FIXES,
    MAX_SCRIPT_FILES,
    MAX_SCRIPT_MOUNTS,
    MAX_SCRIPTS,
    MAX_SECRET_ENV,
    MAX_SELECTOR,
    MAX_SERVICE_ACCOUNTS,
    MAX_STORAGE_CLASSES,
    MAX_TCP_VARIANTS,
    MAX_TOLERATIONS,
    MAX_VOLUMES,
    MAX_WORKLOADS,
)
from policy.placement import Budget, Group, place
from stacks import validate

GPUS_PER_NODE = 8
NAMED_SETS = 4
SHAPES = [(1, 8), (2, 4), (4, 8), (1, 2), (2, 8), (1, 1), (3, 4), (1, 4)]
"""(pods, GPUs per pod) of the generated workloads, in turn."""
IMAGE = "nvcr.io/nvidia/pytorch:25.08-py3@sha256:" + "0123456789abcdef" * 4


def _attachment(i: int) -> dict[str, Any]:
    config = {"name": f"port{i}-network", "type": "sriov", "ipam": {"type": "whereabouts", "range": f"10.1.{i}.0/24"}}
    return {
        "network": f"port{i}-network",
        "resource": f"openshift.io/port{i}rdma",
        "interface": f"net{i}",
        "cni_config": json.dumps(config, separators=(",", ":")),
    }


def data(workloads: int, nodes: int, named: bool = False, variants: int | None = None) -> dict[str, Any]:
    """A stack of `workloads` workloads on `nodes` GPU nodes (named in four pinned sets, or one count set), with a TCP
    variant on every fourth workload (`variants`: that many instead, on the first StatefulSets)."""
    if named:
        sets = [[f"gpu-{k}-{i:04d}" for i in range(nodes // NAMED_SETS)] for k in range(NAMED_SETS)]
        node_sets = [{"name": f"set-{k}", "nodes": names, "gpus_per_node": GPUS_PER_NODE} for k, names in enumerate(sets)]
    else:
        sets = [[""] * nodes]
        node_sets = [{"name": "pool", "count": nodes, "gpus_per_node": GPUS_PER_NODE}]
    namespaces = [f"team-{k}" for k in range(4)]
    out = _workloads(workloads, sets, namespaces, named, variants)
    return {
        "name": f"scale-{workloads}-{nodes}" + ("-named" if named else "") + ("" if variants is None else f"-v{variants}"),
        "description": "a generated stack (bench/scale.py)",
        "gpu_model": "H100",
        "node_sets": node_sets,
        "gpu_tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "fabric": {
            "link_layer": "roce-v2",
            "nic": "ConnectX-7",
            "link_gbps": 400,
            "devices": ["mlx5_0", "mlx5_1"],
            "attachments": [_attachment(1), _attachment(2)],
        },
        "storage_classes": [
            {"name": "ceph-rbd", "access_modes": ["ReadWriteOnce"]},
            {"name": "cephfs", "access_modes": ["ReadWriteMany", "ReadWriteOnce"]},
        ],
        "namespaces": namespaces,
        "security": {
            "scc": "gpu-rdma",
            "create": True,
            "service_accounts": [{"name": "trainer", "namespace": ns} for ns in namespaces],
        },
        "volumes": [
            v
            for ns in namespaces
            for v in (
                {
                    "name": "workspace",
                    "namespace": ns,
                    "mount_path": "/workspace",
                    "size": "10Gi",
                    "storage_class": "ceph-rbd",
                    "shared": False,
                },
                {"name": "datasets", "namespace": ns, "mount_path": "/datasets", "size": "50Gi", "storage_class": "cephfs"},
            )
        ],
        "workloads": out,
    }


def _workloads(workloads: int, sets: list[list[str]], namespaces: list[str], named: bool, variants: int | None) -> list[dict[str, Any]]:
    """The workloads of `data`, each running only where a first-fit placement on the nodes of `sets` finds it room."""
    free = [[GPUS_PER_NODE] * len(names) for names in sets]  # the free GPUs of each node of each set, as placed so far
    out = []
    made = 0  # TCP variants so far
    for i in range(workloads):
        pods, gpus = SHAPES[i % len(SHAPES)]
        where = free[i % len(free)]
        pods = min(pods, len(where))
        # Placed first fit, one pod per node, on the nodes with the most free GPUs: a workload runs where that finds room,
        # so a placement of every running pod exists and the preflight's capacity rule passes.
        room = sorted(range(len(where)), key=lambda n: -where[n])[:pods]
        running = all(where[n] >= gpus for n in room)
        for n in room if running else ():
            where[n] -= gpus
        ns = namespaces[i % len(namespaces)]
        job = i % 5 == 4
        w: dict[str, Any] = {
            "name": f"w-{i:03d}",
            "namespace": ns,
            "user": f"user-{i % 17}",
            "kind": "job" if job else "statefulset",
            "state": "running" if running else "stopped",
            "image": IMAGE,
            "service_account": "trainer",
            "nodes": pods,
            "gpus_per_node": gpus,
            "transport": "rdma",
            "memory": "64Gi",
            "mounts": [{"volume": "datasets"}] if job else [{"volume": "workspace"}, {"volume": "datasets"}],
            "env": {"NCCL_DEBUG": "WARN"},
        }
        if named:
            w["node_set"] = f"set-{i % NAMED_SETS}"
        wanted = (i % 4 == 0) if variants is None else made < variants
        if wanted and not job:
            w["tcp_variants"] = [{"name": f"w-{i:03d}-tcp"}]
            made += 1
        out.append(w)
    return out


def config(workloads: int, nodes: int, named: bool = False, variants: int | None = None) -> ClusterConfig:
    return validate(data(workloads, nodes, named, variants), "bench/scale.py")


def largest() -> dict[str, Any]:
    """The largest stack the bounds accept: every list and dict of the model at its bound (docs/reference.md "Bounds").
    MAX_WORKLOADS workloads, TCP variants and bandwidth checks up to MAX_POD_TEMPLATES pod templates, on MAX_CLUSTER_NODES
    nodes in MAX_NODE_SETS sets, MAX_NAMED_NODES of them named (the pods of the count set carry every name, to avoid
    them); each workload with as many tolerations, selectors, variables, mounts, scripts, ports and arguments as it may
    have, and the stack with as many volumes, classes, accounts, scripts, images, fixes, hand-made objects, accepted
    warnings and notes. As many workloads run as fit, as in `data`."""
    variants = MAX_POD_TEMPLATES - MAX_WORKLOADS - MAX_BANDWIDTH_CHECKS
    stack = data(MAX_WORKLOADS, MAX_CLUSTER_NODES - MAX_NAMED_NODES, variants=0)
    stack["name"] = "scale-largest"
    namespaces = [f"team-{k}" for k in range(MAX_NAMESPACES)]
    used = stack["namespaces"]  # the workloads' (4), the others empty
    stack["namespaces"] = namespaces
    _largest_cluster(stack)
    _largest_lists(stack, used)
    stack["defaults"] = {
        "nccl_env_rdma": {f"NCCL_RDMA_{k}": "1" for k in range(MAX_ENV)},
        "nccl_env_tcp": {f"NCCL_TCP_{k}": "1" for k in range(MAX_ENV)},
    }
    env = {f"VAR_{k}": "1" for k in range(MAX_ENV)}
    _largest_workloads(stack["workloads"], used, variants, env)
    stack["bandwidth_checks"] = _largest_bandwidth_checks(used, env)
    _largest_records(stack)
    fresh: dict[str, Any] = json.loads(json.dumps(stack))  # no value shared between entries: a YAML dump holds no aliases
    return fresh


def _largest_cluster(stack: dict[str, Any]) -> None:
    """The cluster side of `largest`: node sets, tolerations, selector, fabric, storage classes and claim fixes at their bounds."""
    # Node sets: the count set of the workloads first, then the named nodes, one set holding what the others do not.
    names = [f"gpu-{i:04d}" for i in range(MAX_NAMED_NODES)]
    first = MAX_NAMED_NODES - (MAX_NODE_SETS - 2)
    groups = [names[:first]] + [[n] for n in names[first:]]
    # Every named set with its SR-IOV node policies at their bound: one SriovNetworkNodePolicy per policy and node.
    policies = [
        {"resource": f"openshift.io/port{p}rdma", "pf_names": [f"p{p}f{f}" for f in range(MAX_POLICY_PFS)], "num_vfs": 8}
        for p in range(1, MAX_NODE_POLICIES + 1)
    ]
    stack["node_sets"] += [
        {"name": f"set-{k}", "nodes": g, "gpus_per_node": GPUS_PER_NODE, "node_policies": policies, "node_reboot_reason": "VFs"}
        for k, g in enumerate(groups)
    ]
    # Node labels on a set no workload runs on: the bound is held, and no pod template changes.
    stack["node_sets"][1]["labels"] = {f"example.com/pool-{k}": "set-0" for k in range(MAX_SELECTOR)}
    stack["gpu_tolerations"] += [{"key": f"example.com/taint-{k}", "operator": "Exists"} for k in range(MAX_TOLERATIONS - 1)]
    stack["gpu_node_selector"] = {f"example.com/gpu-{k}": "true" for k in range(MAX_SELECTOR)}
    fabric = stack["fabric"]
    fabric["devices"] = [f"mlx5_{k}" for k in range(MAX_DEVICES)]
    fabric["attachments"] = [_attachment(k) for k in range(1, MAX_ATTACHMENTS + 1)]
    fabric["device_observations"] = [{"source": f"a seed, table {k}", "devices": fabric["devices"]} for k in range(MAX_OBSERVATIONS)]
    modes = ["ReadWriteOnce", "ReadWriteMany"] * (MAX_ACCESS_MODES // 2)  # the two the model knows, repeated to the bound
    stack["storage_classes"] += [{"name": f"class-{k}", "access_modes": modes} for k in range(MAX_STORAGE_CLASSES - 2)]
    served = [c["name"] for c in stack["storage_classes"]]
    fix = {"namespace": "nfs", "storage_class": "ceph-rbd", "reason": "made without a class", "serves_storage_classes": served}
    stack["pvc_fixes"] = [{**fix, "pvc": f"root-{k}"} for k in range(MAX_PVC_FIXES)]


def _largest_lists(stack: dict[str, Any], used: list[str]) -> None:
    """The stack's lists of `largest`, spread over the namespaces in `used`: accounts, existing objects, volumes, scripts, images."""
    per = MAX_SERVICE_ACCOUNTS // len(used)
    security = stack["security"]
    security["service_accounts"] = [{"name": "trainer" if k == 0 else f"sa-{k}", "namespace": ns} for ns in used for k in range(per)]
    security["existing_allowed_capabilities"] = ["IPC_LOCK"] + [
        f"EXTRA_{chr(65 + k // 26)}{chr(65 + k % 26)}" for k in range(MAX_CAPABILITIES - 1)
    ]
    per = MAX_EXISTING // len(used)
    stack["existing"] = {
        kind: [{"namespace": ns, "name": f"{kind.replace('_', '-')[:-1]}-{k}"} for ns in used for k in range(per)]
        for kind in ("secrets", "config_maps", "image_streams")
    }
    # Volumes: the workspace and datasets of `data` and shared ones up to the bound, MAX_MOUNTS mounted by each workload.
    extra = MAX_VOLUMES // len(used) - 2
    stack["volumes"] += [
        {"name": f"data-{k}", "namespace": ns, "mount_path": f"/data/{k}", "size": "1Gi", "storage_class": "cephfs"}
        for ns in used
        for k in range(extra)
    ]
    per = MAX_SCRIPTS // len(used)
    files = {f"step-{k}.sh": f"echo {k}\n" for k in range(MAX_SCRIPT_FILES)}
    stack["scripts"] = [{"name": f"scripts-{k}", "namespace": ns, "files": files} for ns in used for k in range(per)]
    per = MAX_IMAGES // len(used)
    stack["images"] = [{"name": f"image-{k}", "namespace": ns, "dockerfile": f"FROM {IMAGE}\n"} for ns in used for k in range(per)]


def _largest_workloads(workloads: list[dict[str, Any]], used: list[str], variants: int, env: dict[str, str]) -> None:
    """Each workload of `largest` at its bounds, and `variants` TCP variants on the first StatefulSets."""
    args = ["sleep", "infinity"] + [f"--arg-{k}" for k in range(MAX_ARGS - 2)]
    made = 0
    for w in workloads:
        ns = w["namespace"]
        own = [m["volume"] for m in w["mounts"]]
        w["mounts"] = [{"volume": v} for v in own + [f"data-{k}" for k in range(MAX_MOUNTS - len(own))]]
        w["tolerations"] = [{"key": f"example.com/own-{k}", "operator": "Exists"} for k in range(MAX_TOLERATIONS)]
        w["node_selector"] = {f"example.com/own-{k}": "true" for k in range(MAX_SELECTOR)}
        w["env"] = env
        w["secret_env"] = {f"SECRET_{k}": {"secret": f"secret-{k}", "key": "token"} for k in range(MAX_SECRET_ENV)}
        w["scripts"] = [{"config_map": f"scripts-{k}", "mount_path": f"/scripts/{k}"} for k in range(MAX_SCRIPT_MOUNTS)]
        w["ports"] = [{"name": f"port-{k}", "port": 9000 + k, "route": True} for k in range(MAX_PORTS)]
        w["args"] = args
        if w["kind"] == "statefulset" and made < variants:
            w["tcp_variants"] = [{"name": f"{w['name']}-tcp{k}"} for k in range(min(MAX_TCP_VARIANTS, variants - made))]
            made += len(w["tcp_variants"])
        assert ns in used


def _largest_bandwidth_checks(used: list[str], env: dict[str, str]) -> list[dict[str, Any]]:
    return [
        {
            "name": f"check-{k}",
            "namespace": used[k % len(used)],
            "service_account": "trainer",
            "image": IMAGE,
            "nodes": 2,
            "gpus_per_node": GPUS_PER_NODE,
            "transport": "rdma",
            "tool": "torch",
            "env": env,
        }
        for k in range(MAX_BANDWIDTH_CHECKS)
    ]


def _largest_records(stack: dict[str, Any]) -> None:
    """The hand-made objects, accepted warnings and notes of `largest`, each at its bound."""
    declared = [
        {"kind": "StatefulSet", "name": w["name"], "namespace": w["namespace"]} for w in stack["workloads"] if w["kind"] == "statefulset"
    ]
    stack["hand_made"] = [{**h, "source": "made with oc apply before the stack"} for h in declared[:MAX_HAND_MADE]]
    stack["accepted_warnings"] = [
        {"rule": "image", "object": f"StatefulSet {w['namespace']}/{w['name']}", "value": IMAGE, "reason": "pinned by digest"}
        for w in stack["workloads"][:MAX_ACCEPTED_WARNINGS]
    ]
    stack["notes"] = [f"note {k}" for k in range(MAX_NOTES)]


def check(stack: dict[str, Any]) -> tuple[float, float, int]:
    """What `python -m stacks check` does for one stack, in process and timed: (validate, preflight) in seconds, and the
    objects it checks. Fails when the preflight finds an error: a generated stack must be one that deploys."""
    from cli.checking import preflight as _preflight
    from components.program import layout
    from policy import errors

    start = time.perf_counter()
    config = validate(stack, "bench/scale.py")
    validated = time.perf_counter()
    whole = layout(config)  # as cmd_check: once, for the preflight and (here) the count
    findings = _preflight(config, None, None, whole=whole)
    done = time.perf_counter()
    bad = errors(findings)
    if bad:
        raise AssertionError(f"{config.name}: {bad[0].line()}")
    return validated - start, done - validated, sum(not d.patch for d in whole)


def render(stack: dict[str, Any]) -> float:
    """What the render under mocks takes for the same stack (`render` and `diff` pay it, `check` no longer does)."""
    from tools.render import run

    config = validate(stack, "bench/scale.py")
    start = time.perf_counter()
    run(config)
    return time.perf_counter() - start


Row = tuple[str, int, int, int, float, float, float, float]
"""(stack, pod templates, nodes, objects, validate s, preflight s, check's CPU s, render s)."""


def curve(repeats: int = 3) -> list[Row]:
    """check of 10/50/200 workloads on 16/512/4,096 counted nodes, of 200 on 16 and 256 named ones, and of the largest
    stack accepted; the medians of `repeats` (wall time, and CPU time, which a busy shared machine inflates less), and
    one render of each beside them."""
    cases = [data(w, n) for w in (10, 50, 200) for n in (16, 512, 4096)]
    cases += [data(200, 16, named=True), data(200, MAX_NAMED_NODES, named=True), largest()]
    rows: list[Row] = []
    for stack in cases:
        runs, cpu = [], []
        for _ in range(repeats):
            start = time.process_time()
            runs.append(check(stack))
            cpu.append(time.process_time() - start)
        templates = sum(1 + len(w.get("tcp_variants", [])) for w in stack["workloads"]) + len(stack.get("bandwidth_checks", []))
        nodes = sum(s.get("count") or len(s["nodes"]) for s in stack["node_sets"])
        validated = statistics.median(r[0] for r in runs)
        preflight = statistics.median(r[1] for r in runs)
        rows.append((stack["name"], templates, nodes, runs[0][2], validated, preflight, statistics.median(cpu), render(stack)))
    return rows


# --- queued stacks ----------------------------------------------------------------------------------------------------


def queued(workloads: int, nodes: int = 16, varied: bool = False, pods_quota: bool = False) -> dict[str, Any]:
    """A queued stack (docs/shared-clusters.md) of `workloads` workloads on one count set of `nodes` 8-GPU nodes, all
    running: Kueue admits them by quota, and the capacity rule asks whether every combination the quota admits together
    fits the nodes. The shapes of `data`, or (`varied`) each workload's pods, GPUs, CPU and memory drawn from a seeded
    generator (issue 43's audit: each combination had its own placement search, 58 s for 26 workloads). With
    `pods_quota`, the fix that keeps the GPU quota: a pods quota of one per node."""
    stack = data(workloads, nodes)
    draw = random.Random(1)
    for w in stack["workloads"]:
        w["state"] = "running"
        if varied:
            w.update(nodes=draw.randint(1, 4), gpus_per_node=draw.randint(1, GPUS_PER_NODE), cpu=draw.choice(["4", "16", "32", "48"]),
                     memory=draw.choice(["16Gi", "64Gi", "100Gi", "200Gi"]))  # fmt: skip
    stack["node_sets"][0].update(allocatable_cpu="96", allocatable_memory="512Gi")
    stack["queueing"] = {"cluster_queue": "scale", **({"quota": {"pool": {"pods": str(nodes)}}} if pods_quota else {})}
    stack["name"] = f"queued-{workloads}" + ("-varied" if varied else "") + ("-pods" if pods_quota else "")
    return stack


QueueRow = tuple[str, int, float, float, str]
"""(stack, workloads, preflight s, its CPU s, what the capacity rule said: ok, error or cut short)."""


def queue_curve(repeats: int = 3, sizes: tuple[int, ...] = (10, 26, 30, 50, 100, 200)) -> list[QueueRow]:
    """The preflight of queued stacks of 10 to 200 workloads on 16 nodes: the shapes of `data`, varied ones, and those
    with a pods quota; medians of `repeats` (wall and CPU). What the capacity rule says beside it: `error` (a combination
    the nodes cannot hold), `cut short` (the budget decided), `ok`."""
    from cli.checking import preflight

    cases = [queued(n, varied=v, pods_quota=p) for v, p in ((False, False), (True, False), (False, True)) for n in sizes]
    rows: list[QueueRow] = []
    for stack in cases:
        config = validate(stack, "bench/scale.py")
        wall, cpu = [], []
        for _ in range(repeats):
            start, start_cpu = time.perf_counter(), time.process_time()
            found = [f for f in preflight(config, None, None) if f.rule == "capacity"]
            wall.append(time.perf_counter() - start)
            cpu.append(time.process_time() - start_cpu)
        said = "error" if any(f.severity == "error" for f in found) else "cut short" if found else "ok"
        rows.append((stack["name"], len(stack["workloads"]), statistics.median(wall), statistics.median(cpu), said))
    return rows


# --- the placement search ---------------------------------------------------------------------------------------------

Placing = tuple[str, dict[str, int], dict[str, int], list[Group], bool]
"""(case, nodes: an entry's GPUs, counts: how many nodes an entry stands for, groups, whether they fit)."""


def placements() -> list[Placing]:
    """Large questions for the placement search the capacity rule asks (policy/placement.py): tests/policy/test_placement.py
    counts the steps it takes to decide each, this bench times it."""
    return [
        # 4,096 counted 8-GPU nodes: 400 groups of 8 pods (512 would fit), then 513: decided at once, either way
        *(
            (name, {"pool#": 8}, {"pool#": 4096}, [Group(f"g{i}", 8, 8, ("pool#",), True) for i in range(n)], n <= 512)
            for name, n in (("4096 nodes, fits", 400), ("4096 nodes, one group too many", 513))
        ),
        # 256 named nodes in four pinned sets beside a count set
        (
            "named sets beside a count set",
            {**{f"n{i}": 4 for i in range(256)}, "pool#": 8},
            {"pool#": 3840},
            [Group(f"p{i}", 4, 4, tuple(f"n{k}" for k in range(i % 4 * 64, i % 4 * 64 + 64)), True) for i in range(64)]
            + [Group(f"c{i}", 16, 8, ("pool#",), True) for i in range(200)],
            True,
        ),
    ]


def steps(nodes: dict[str, int], counts: dict[str, int], groups: list[Group]) -> int:
    """The steps the search takes to decide: the least budget it decides within (it counts its steps against it)."""
    budget = Budget(50_000)
    place(nodes, groups, budget, counts=counts)
    return budget.spent


def placement_times(repeats: int = 5) -> list[tuple[str, int, int, float]]:
    """(case, groups, steps, the median of `repeats` wall times in seconds) of each of placements()."""
    rows = []
    for name, nodes, counts, groups, _ in placements():
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            place(nodes, groups, counts=counts)
            times.append(time.perf_counter() - start)
        rows.append((name, len(groups), steps(nodes, counts, groups), statistics.median(times)))
    return rows
