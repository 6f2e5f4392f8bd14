"""The preflight inside the Pulumi program: the rules, before any resource is declared, and a kube context the
kubeconfig lacks (the provider would preview every create as if it would work)."""

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pulumi

import stacks
from config.kube import ConfigPath, ObjectKey
from config.stack import ClusterConfig
from policy.run import check, errors


def adopting() -> tuple[bool, bool]:
    """(take over what exists, force the program's fields), as the stack file asks (docs/adoption.md)."""
    k8s = pulumi.Config("kubernetes")
    upsert, force = bool(k8s.get_bool("upsertExistingObjects")), bool(k8s.get_bool("enablePatchForce"))
    if upsert and not force:
        raise pulumi.RunError(
            f"Pulumi.{pulumi.get_stack()}.yaml sets kubernetes:upsertExistingObjects without kubernetes:enablePatchForce: "
            "the takeover of existing objects needs both for one run (docs/adoption.md), and neither afterwards"
        )
    if upsert:
        pulumi.log.warn(
            "this run takes over every object of the stack that exists already and forces the program's fields over other "
            "field managers (kubernetes:upsertExistingObjects, kubernetes:enablePatchForce): remove both after it"
        )
    elif force:
        pulumi.log.warn(
            "this run forces the program's fields over other field managers (kubernetes:enablePatchForce), narrowing what "
            "`python -m stacks adopt-diff` listed: remove it after this run"
        )
    return upsert, force


def load_stack() -> tuple[ClusterConfig, str, str | None]:
    """(config, tier, kube context) of the running Pulumi stack: configFile, else the module of cluster (or the stack)."""
    own = pulumi.Config(stacks.PROJECT)
    stack = pulumi.get_stack()
    cluster = own.get("cluster") or stack
    tier = own.get("tier") or "all"
    if tier not in stacks.TIERS:
        raise pulumi.RunError(f"Pulumi.{stack}.yaml: {stacks.TIER_KEY} is {tier!r}; expected one of {', '.join(stacks.TIERS)}")
    try:
        stacks.config_file_of(cluster)  # the cluster's stack files agree on what they deploy, as the commands require
        config = stacks.load_deployed(cluster, own.get("configFile"), f"Pulumi.{stack}.yaml")
    except stacks.ConfigError as err:
        raise pulumi.RunError(str(err)) from None
    return config, tier, pulumi.Config("kubernetes").get("context")


def kubeconfig_contexts() -> tuple[list[str], list[str]]:
    """(files read, context names) of the kubeconfig the provider will use: $KUBECONFIG or ~/.kube/config."""
    paths = [p for p in os.environ.get("KUBECONFIG", "").split(os.pathsep) if p] or [str(Path.home() / ".kube" / "config")]
    read, names = [], []
    for p in paths:
        try:
            data = stacks.read_yaml(Path(p))
        except stacks.ConfigError:
            continue
        read.append(p)
        contexts = data.get("contexts") or [] if isinstance(data, dict) else []
        names += [ctx["name"] for ctx in contexts if isinstance(ctx, dict) and isinstance(ctx.get("name"), str)]
    return read, names


def check_kube_context(context: str | None, stack: str) -> None:
    """Stop, with the fix, when the stack file names no context or the kubeconfig lacks it."""
    if not context:
        raise pulumi.RunError(
            f"Pulumi.{stack}.yaml sets no kubernetes:context, and this program never deploys to whatever context is current. "
            f"Fix: `pulumi config set kubernetes:context NAME -s {stack}` with a context `oc config get-contexts` lists"
        )
    read, names = kubeconfig_contexts()
    if context not in names:
        where = ", ".join(read) or "no readable kubeconfig ($KUBECONFIG or ~/.kube/config)"
        have = ", ".join(sorted(names)) or "none"
        raise pulumi.RunError(
            f"the kubeconfig ({where}) has no context {context!r} (it has: {have}), so the kubernetes provider would see no "
            f"cluster and preview every change as if it would work. Fix: `oc login --server=https://API:6443`, then "
            f'`oc config rename-context "$(oc config current-context)" {context}`'
        )


def preflight(
    config: ClusterConfig, objects: Iterable[dict[str, Any]], patches: Iterable[dict[str, Any]], sources: Mapping[ObjectKey, ConfigPath]
) -> None:
    """Log the warnings and infos; on any error stop the program, naming every error."""
    findings = check(config, objects, patches, others=stacks.others(config.name), sources=sources)
    log = {"warning": pulumi.log.warn, "info": pulumi.log.info}
    for f in findings:
        if f.severity in log:
            log[f.severity](f.line())
    if bad := errors(findings):
        lines = "\n".join(f.line() for f in bad)
        raise pulumi.RunError(
            f"preflight: stack {config.name} has {len(bad)} error(s); nothing was declared "
            f"(`python -m stacks check {config.name}` shows the same findings):\n{lines}"
        )
