"""The pod's network for NCCL. Which RDMA ports are the pod's, and the settings they give (NCCL_IB_HCA, NCCL_IB_GID_INDEX,
NCCL_SOCKET_IFNAME, NCCL_IB_DISABLE), or TCP: with the RDMA subsystem in shared netns mode (the SR-IOV default) a pod
sees every RDMA device of the host, the host's own NIC included. The pod's devices are the ones behind its interfaces:
the PCI link, else the only device whose GID table names the interface. Where nothing maps, every ACTIVE port is used.

Then every NCCL_* present at start, checked against what the launcher sees; explicit (LAUNCHER_EXPLICIT_NCCL) or
inherited from the image, a wrong one is overridden or stops the pod (docs/launcher.md). Rules (KNOWLEDGE.md):

  rdma mode  NCCL_IB_HCA names only existing ACTIVE devices, with numeric ports, no device that is not the pod's or of
             another link layer than LAUNCHER_LINK_LAYER, and at least one of the pod's ACTIVE ports; NCCL_IB_GID_INDEX
             is a RoCE v2 IPv4 GID (of the pod's interfaces) on every chosen RoCE port; NCCL_IB_DISABLE is 0;
             NCCL_NET is not Socket
  tcp mode   NCCL_IB_DISABLE is 1 and NCCL_NET not IB; every other NCCL_IB_* and NCCL_NET_GDR_* is RDMA-only
  both       NCCL_SOCKET_IFNAME selects an interface of the pod, and more than lo when LAUNCHER_NNODES > 1"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Dict, FrozenSet, List, Optional, Sequence, Tuple

from .contract import Config, parse_decimal, shown
from .facts import Facts, RdmaPort, natural_key

MANAGED_NCCL = ("NCCL_IB_DISABLE", "NCCL_IB_HCA", "NCCL_IB_GID_INDEX", "NCCL_SOCKET_IFNAME")  # the ones the launcher detects
RDMA_ONLY = ("NCCL_NET_GDR_LEVEL", "NCCL_NET_GDR_READ")  # besides NCCL_IB_*


@dataclass
class DeviceSelection:
    pod_ports: List[RdmaPort]  # ports of the devices behind the pod's interfaces (every port if nothing maps)
    host_ports: List[RdmaPort]  # ports of the devices not attached to this pod (none if nothing maps)
    mapping: Dict[str, List[str]]  # interface -> the RDMA devices behind it
    lines: List[str]
    warnings: List[str]

    @property
    def gid_ndevs(self) -> Optional[FrozenSet[str]]:
        return frozenset(self.mapping) if self.mapping else None


def decide_devices(cfg: Config, facts: Facts) -> DeviceSelection:
    known = {p.device for p in facts.ports}
    links = {link.interface: link for link in facts.links}
    mapping: Dict[str, List[str]] = {}
    lines: List[str] = []
    warnings: List[str] = []
    present = [i for i in cfg.rdma_interfaces if i in facts.net_names]
    for interface in present:
        link = links.get(interface)
        behind = [d for d in (link.devices if link else ()) if d in known]
        claims = sorted({p.device for p in facts.ports if any(g.ndev == interface for g in p.gids)}, key=natural_key)
        if link and behind:
            mapping[interface] = behind
            lines.append(f"{interface} -> {', '.join(behind)} (through PCI function {link.pci})")
        elif len(claims) == 1:
            mapping[interface] = claims
            lines.append(f"{interface} -> {claims[0]} (through its GID table entries (gid_attrs/ndevs))")
        elif len(claims) > 1:
            why = f"{interface} has no PCI link to an RDMA device, and the GID tables of {', '.join(claims)} all name it "
            warnings.append(why + "(other pods' interfaces can have the same name); it is mapped to none of them")
    unmapped = [i for i in present if i not in mapping]
    pod_devices = {d for devices in mapping.values() for d in devices}
    no_link = f"(no {cfg.sysfs_root}/class/net/IF/device/infiniband, no unique GID naming"
    if pod_devices:
        host_ports = [p for p in facts.ports if p.device not in pod_devices]
        if unmapped and cfg.mode == "rdma":
            warnings.append(f"no RDMA device could be tied to {', '.join(unmapped)} {no_link} it): NCCL_IB_HCA leaves them out")
        if host_ports:
            lines.append("host devices not attached to this pod, left out: " + ", ".join(f"{p.name} {p.state}" for p in host_ports))
        return DeviceSelection([p for p in facts.ports if p.device in pod_devices], host_ports, mapping, lines, warnings)
    if cfg.mode == "rdma" and not cfg.rdma_interfaces:
        empty = "LAUNCHER_RDMA_INTERFACES is empty (InfiniBand without SR-IOV): no interface to find the pod's devices by"
        lines.append(empty + "; every ACTIVE port is used")
    elif cfg.mode == "rdma" and unmapped:
        why = f"could not map {', '.join(unmapped)} to RDMA devices {no_link} them): every ACTIVE port is used, and with the "
        warnings.append(why + "RDMA subsystem in shared netns mode a host's own NIC may be among them")
    elif cfg.mode == "rdma":
        lines.append("none of LAUNCHER_RDMA_INTERFACES exists in the pod: no interface to find the pod's devices by")
    return DeviceSelection(list(facts.ports), [], mapping, lines, warnings)


@dataclass
class NetworkDecision:
    sel: DeviceSelection
    detected: Dict[str, Optional[str]] = field(default_factory=dict)  # None: deliberately left unset
    why: Dict[str, str] = field(default_factory=dict)
    warnings: List[str] = field(default_factory=list)
    errors: List[str] = field(default_factory=list)
    fell_back: bool = False
    selected: List[RdmaPort] = field(default_factory=list)  # the ports NCCL_IB_HCA names


def tcp_settings(cfg: Config, sel: DeviceSelection, reason: str) -> NetworkDecision:
    detected: Dict[str, Optional[str]] = {"NCCL_IB_DISABLE": "1", "NCCL_SOCKET_IFNAME": cfg.tcp_socket_ifname}
    return NetworkDecision(sel, detected, {"NCCL_IB_DISABLE": reason, "NCCL_SOCKET_IFNAME": f"{reason}: LAUNCHER_TCP_SOCKET_IFNAME"})


def by_link_layer(ports: Sequence[RdmaPort]) -> Dict[str, List[str]]:
    return {layer: [p.name for p in ports if p.link_layer == layer] for layer in sorted({p.link_layer for p in ports})}


def decide_network(cfg: Config, sel: DeviceSelection, net_names: Sequence[str]) -> NetworkDecision:
    if cfg.mode == "tcp":
        d = tcp_settings(cfg, sel, "tcp mode")
        if any(p.active for p in sel.pod_ports):
            d.warnings.append("RDMA ports are ACTIVE but the workload runs in tcp mode")
        return d
    every_active = [p for p in sel.pod_ports if p.active]
    active = [p for p in every_active if not cfg.link_layer or p.link_layer == cfg.link_layer]
    other_layer = [p for p in every_active if p not in active]
    if not active:
        return no_active_port(cfg, sel, other_layer)
    # Exact-match form: without the leading '=', NCCL reads mlx5_1 as a prefix of mlx5_10.
    hca = ("the ACTIVE ports behind LAUNCHER_RDMA_INTERFACES" if sel.mapping else "the ACTIVE ports") + ", exact-match form"
    if down := [p.name for p in sel.pod_ports if not p.active]:
        hca += f"; not ACTIVE, left out: {', '.join(down)}"
    if sel.host_ports:
        hca += f"; host devices not attached to this pod, left out: {', '.join(p.name for p in sel.host_ports)}"
    for layer, names in by_link_layer(other_layer).items():
        hca += f"; link layer {layer}, not LAUNCHER_LINK_LAYER {cfg.link_layer}, left out: {', '.join(names)}"
    index, gid_why = choose_gid_index(active, sel.gid_ndevs)
    socket, socket_why, problem = rdma_socket_ifname(cfg, net_names)
    detected: Dict[str, Optional[str]] = {"NCCL_IB_DISABLE": "0", "NCCL_IB_HCA": "=" + ",".join(p.name for p in active)}
    detected.update(NCCL_IB_GID_INDEX=None if index is None else str(index), NCCL_SOCKET_IFNAME=socket)
    why = {"NCCL_IB_DISABLE": "rdma mode", "NCCL_IB_HCA": hca, "NCCL_IB_GID_INDEX": gid_why, "NCCL_SOCKET_IFNAME": socket_why}
    d = NetworkDecision(sel, detected, why, selected=active)
    layers = by_link_layer(active)
    if len(layers) > 1:
        unmapped = "" if sel.mapping else ", and nothing ties them to the pod's interfaces, so a host's own NIC may be among them"
        mix = "; ".join(f"{layer}: " + ", ".join(names) for layer, names in layers.items())
        mix = f"the ACTIVE ports mix link layers ({mix}): NCCL_IB_HCA names all of them and the GID index is chosen from the "
        fix = "set LAUNCHER_LINK_LAYER (the stack's fabric.link_layer) to use one fabric only"
        d.warnings.append(mix + f"Ethernet (RoCE) ones{unmapped}; {fix}")
    if problem:
        (d.errors if socket is None else d.warnings).append(problem)
    return d


def no_active_port(cfg: Config, sel: DeviceSelection, other_layer: List[RdmaPort]) -> NetworkDecision:
    found = ", ".join(f"{p.name} {p.state}" for p in sel.pod_ports) or "none"
    whose = "of this pod " if sel.mapping else ""
    layer = f"with link layer {cfg.link_layer} (LAUNCHER_LINK_LAYER) " if cfg.link_layer else ""
    reason = f"no ACTIVE RDMA port {whose}{layer}under {cfg.sysfs_root}/class/infiniband (found: {found})"
    if other_layer:
        reason += f"; ACTIVE, but another link layer: {', '.join(f'{p.name} {p.link_layer}' for p in other_layer)}"
    if host_active := [p.name for p in sel.host_ports if p.active]:
        reason += f"; ACTIVE, but host devices not attached to this pod: {', '.join(host_active)}"
    reason += "; check that the pod requests the SR-IOV RDMA resources and that the links are up"
    if other_layer:
        reason += ", and that LAUNCHER_LINK_LAYER (the stack's fabric.link_layer) is right"
    if not cfg.tcp_fallback:
        return NetworkDecision(sel, errors=[reason + "; set LAUNCHER_TCP_FALLBACK=true to run over TCP instead"])
    d = tcp_settings(cfg, sel, "FELL BACK TO TCP")
    d.fell_back = True
    d.warnings.append("!!! RDMA MODE FELL BACK TO TCP: " + reason + ". Training runs over sockets, roughly 10x less bandwidth. !!!")
    return d


def choose_gid_index(ports: Sequence[RdmaPort], ndevs: Optional[FrozenSet[str]]) -> Tuple[Optional[int], str]:
    """One RoCE v2 IPv4 GID index on every RoCE port, else None (NCCL >= 2.21.5 picks per port; 3 is only usual)."""
    roce = [p for p in ports if p.roce]
    if not roce:
        return None, "no RoCE port selected; InfiniBand uses GID index 0, NCCL needs no setting"
    per_port = {p.name: [g.index for g in p.roce_v2_ipv4(ndevs)] for p in roce}
    counted = ""
    if any(p.roce_v2_ipv4(ndevs, ours=False) for p in roce):
        counted = f"counting only GIDs of the pod's interfaces ({', '.join(sorted(ndevs or (), key=natural_key))})"
    if common := set.intersection(*(set(v) for v in per_port.values())):
        return min(common), f"the RoCE v2 IPv4 GID is at index {min(common)} on every selected RoCE port" + (counted and f", {counted}")
    table = ", ".join(f"{name} -> {','.join(map(str, v)) or 'none'}" for name, v in per_port.items()) + (counted and f"; {counted}")
    return None, f"no single RoCE v2 IPv4 GID index holds on every port ({table}); left unset so NCCL >= 2.21.5 picks one per port itself"


def rdma_socket_ifname(cfg: Config, net_names: Sequence[str]) -> Tuple[Optional[str], str, str]:
    """(value, why, problem): interfaces the pod lacks are seed 003's 'Bootstrap: no socket interface found'."""
    if not cfg.rdma_interfaces:
        return cfg.tcp_socket_ifname, "LAUNCHER_RDMA_INTERFACES is empty: LAUNCHER_TCP_SOCKET_IFNAME", ""
    present = [i for i in cfg.rdma_interfaces if i in net_names]
    missing = [i for i in cfg.rdma_interfaces if i not in net_names]
    have = ", ".join(net_names) or "none"
    if not present:
        none = f"none of the SR-IOV interfaces {', '.join(missing)} exist in the pod (interfaces: {have}); NCCL would fail with "
        none += "'Bootstrap: no socket interface found'. The cause is the pod's k8s.v1.cni.cncf.io/networks annotation or the "
        return None, "", none + "NetworkAttachmentDefinitions it names (missing in this namespace, or not attached)"
    # Plain names are prefixes to NCCL (net1 also matches net10): exact only when that matters.
    clash = any(n not in present and n.startswith(p) for n in net_names for p in present)
    problem = ""
    if missing:
        problem = f"SR-IOV interfaces missing from the pod: {', '.join(missing)} (interfaces: {have}); "
        problem += "check the networks annotation and the NetworkAttachmentDefinitions"
    return ("=" if clash else "") + ",".join(present), "the LAUNCHER_RDMA_INTERFACES that exist in the pod", problem


def describe_port(p: RdmaPort, sel: DeviceSelection) -> str:
    text = f"{p.name} {p.state} {'RoCE' if p.roce else p.link_layer}"
    if p.roce:
        # A pod's port counts only the GIDs of the pod's interfaces; a host device's are shown as they are.
        ndevs = sel.gid_ndevs if p in sel.pod_ports else None
        indexes = [g.index for g in p.roce_v2_ipv4(ndevs)]
        text += f", RoCE v2 IPv4 GID index {','.join(map(str, indexes))}" if indexes else ", no RoCE v2 IPv4 GID"
        if foreign := ", ".join(f"{g.index} is {g.ndev}'s" for g in p.roce_v2_ipv4(ndevs, ours=False)):
            text += f" (index {foreign}, not this pod's)"
    if sel.mapping:
        behind = [i for i, devices in sel.mapping.items() if p.device in devices]
        text += f"  [{', '.join(behind)}]" if behind else "  [host device, not attached to this pod]"
    return text


@dataclass(frozen=True)
class NcclProblem:
    text: str  # continues "NAME=VALUE ...": "names mlx5_10, which ..."
    harmful: bool = True  # False: NCCL ignores the value here (an RDMA-only setting under NCCL_IB_DISABLE=1)
    transport: bool = False  # it contradicts the transport (rdma vs tcp), not the pod's devices or interfaces


def parse_nccl_list(spec: str) -> Tuple[bool, bool, List[Tuple[str, Optional[int]]], List[NcclProblem]]:
    """NCCL's list syntax: optional '^' (exclude), optional '=' (exact), then `name[:port]` entries."""
    exclude = spec.startswith("^")
    rest = spec[1:] if exclude else spec
    exact = rest.startswith("=")
    entries: List[Tuple[str, Optional[int]]] = []
    invalid: List[NcclProblem] = []
    for item in filter(None, (i.strip() for i in (rest[1:] if exact else rest).split(","))):
        name, colon, port = item.partition(":")
        if colon and not re.fullmatch(r"[0-9]{1,5}", port):
            invalid.append(NcclProblem(f"has entry {shown(item)}, whose port is not a port number"))
        else:
            entries.append((name, int(port) if colon else None))
    return exclude, exact, entries, invalid


def entry_matches(name: str, entry: str, exact: bool) -> bool:  # the whole name in the exact ('=') form, else a prefix
    return name == entry if exact else name.startswith(entry)


def nccl_list_matches(spec: str, names: Sequence[str]) -> List[str]:  # the names an NCCL_SOCKET_IFNAME-style list selects
    exclude, exact, entries, _ = parse_nccl_list(spec)
    return [n for n in names if any(entry_matches(n, e, exact) for e, _ in entries) != exclude]


def nccl_problems(key: str, value: str, cfg: Config, facts: Facts, net: NetworkDecision) -> Tuple[List[NcclProblem], List[str]]:
    """Problems, and advisories (it works, but not as well as it could)."""
    spec = value.strip()
    if key == "NCCL_SOCKET_IFNAME":
        return socket_problems(spec, facts.net_names, cfg.nnodes), []
    if cfg.mode == "tcp" or net.fell_back:
        mode = "rdma mode that fell back to tcp" if net.fell_back else "tcp mode"
        if key == "NCCL_IB_DISABLE" and spec != "1":
            return [NcclProblem(f"keeps NCCL's IB transport on in {mode}", transport=True)], []
        if key == "NCCL_NET" and spec.lower() == "ib":
            return [NcclProblem(f"selects NCCL's IB transport in {mode}", transport=True)], []
        if key != "NCCL_IB_DISABLE" and (key.startswith("NCCL_IB_") or key in RDMA_ONLY):
            return [NcclProblem(f"is an RDMA-only setting, ignored in {mode} (NCCL_IB_DISABLE=1)", harmful=False, transport=True)], []
        return [], []
    if key == "NCCL_IB_DISABLE" and spec not in ("", "0"):
        return [NcclProblem("turns NCCL's IB transport off in rdma mode", transport=True)], []
    if key == "NCCL_NET" and spec.lower() == "socket":
        return [NcclProblem("selects NCCL's socket transport in rdma mode", transport=True)], []
    if key == "NCCL_IB_HCA":
        return hca_problems(spec, cfg, facts, net)
    if key == "NCCL_IB_GID_INDEX":
        index = parse_decimal(spec)
        if index is None or index < 0:
            return [NcclProblem("is not a GID index (a decimal integer >= 0)")], []
        ndevs = net.sel.gid_ndevs
        wrong = [p for p in net.selected if p.roce and all(g.index != index for g in p.roce_v2_ipv4(ndevs))]
        if not wrong:
            return [], []
        # The index may be a good GID of another netdev (the host's, on a device the pod shares): say whose.
        others = sorted({g.ndev for p in wrong for g in p.roce_v2_ipv4(ndevs, ours=False) if g.index == index}, key=natural_key)
        ours = f" of the pod's interfaces ({', '.join(sorted(ndevs or (), key=natural_key))})" if others else ""
        whose = f" (index {index} is {', '.join(others)}'s)" if others else ""
        return [NcclProblem(f"is not a RoCE v2 IPv4 GID{ours} on {', '.join(p.name for p in wrong)}{whose}")], []
    return [], []


def hca_problems(spec: str, cfg: Config, facts: Facts, net: NetworkDecision) -> Tuple[List[NcclProblem], List[str]]:
    """Seed 002 shipped NCCL_IB_HCA=mlx5_6,mlx5_7,mlx5_10,mlx5_11 while mlx5_6..9 were the ACTIVE ones."""
    exclude, exact, entries, problems = parse_nccl_list(spec)

    def hit(p: RdmaPort, name: str, port: Optional[int]) -> bool:
        return entry_matches(p.device, name, exact) and (port is None or p.port == port)

    advisories: List[str] = []
    for name, port in [] if exclude else entries:
        label = name if port is None else f"{name}:{port}"
        hits = [p for p in facts.ports if hit(p, name, port)]
        if not hits:
            problems.append(NcclProblem(f"names {label}, which does not exist here"))
        elif not any(p.active for p in hits):
            states = ", ".join(f"{p.name} {p.state}" for p in hits)
            problems.append(NcclProblem(f"names {label}, which is not an ACTIVE RDMA device here ({states})"))
        elif not exact and any(p.device != name for p in hits):
            others = ", ".join(sorted({p.device for p in hits if p.device != name}, key=natural_key))
            advisories.append(f"entry {name} is a prefix and also selects {others}; use the exact form with a leading '='")
    # NCCL skips ports that are not ACTIVE; an empty list is no list: NCCL then takes every device.
    listed = entries or problems
    picked = [p for p in facts.ports if p.active and (not listed or any(hit(p, n, q) for n, q in entries) != exclude)]
    if host := [p.name for p in picked if p not in net.sel.pod_ports]:
        problems.append(NcclProblem(f"selects {', '.join(host)}: host devices not attached to this pod"))
    if cfg.link_layer:
        for layer, names in by_link_layer([p for p in picked if p.link_layer != cfg.link_layer]).items():
            problems.append(NcclProblem(f"selects {', '.join(names)}: link layer {layer}, not LAUNCHER_LINK_LAYER {cfg.link_layer}"))
    if not problems and not any(p in net.selected for p in picked):
        problems.append(NcclProblem("selects no ACTIVE port of this pod"))
    elif not problems and any(p not in picked for p in net.selected):
        advisories.append(f"leaves out {', '.join(p.name for p in net.selected if p not in picked)}, ACTIVE ports of this pod")
    return problems, advisories


def socket_problems(spec: str, net_names: Sequence[str], nnodes: int) -> List[NcclProblem]:
    if not spec or not net_names:  # empty: NCCL's own default; no interface list: nothing to judge by
        return []
    if invalid := parse_nccl_list(spec)[3]:
        return invalid
    chosen = nccl_list_matches(spec, net_names)
    if not chosen:
        bootstrap = "NCCL would fail with 'Bootstrap: no socket interface found'"
        return [NcclProblem(f"matches no interface in the pod ({', '.join(net_names)}); {bootstrap}")]
    return [NcclProblem("selects only lo, which cannot reach the other pods")] if nnodes > 1 and all(n == "lo" for n in chosen) else []


@dataclass
class NcclDecision:
    env: Dict[str, str] = field(default_factory=dict)
    lines: List[str] = field(default_factory=list)
    overrides: List[Dict[str, Any]] = field(default_factory=list)  # name, inherited, new (None: removed), reason, explicit
    warnings: List[str] = field(default_factory=list)
    errors: List[str] = field(default_factory=list)


def decide_nccl(cfg: Config, facts: Facts, net: NetworkDecision) -> NcclDecision:
    d = NcclDecision()
    for key in list(MANAGED_NCCL) + sorted(k for k in cfg.nccl if k not in MANAGED_NCCL):
        detected, why = net.detected.get(key), net.why.get(key, "")
        if key in cfg.nccl:
            judge_value(cfg, facts, net, key, detected, why, d)
        elif detected is not None:
            d.env[key] = detected
            d.lines.append(f"{key}={detected}  ({why})")
        elif why:
            d.lines.append(f"{key} unset: {why}")
    if unset := sorted(cfg.explicit_nccl - set(cfg.nccl)):
        d.lines.append(f"listed in LAUNCHER_EXPLICIT_NCCL but not set: {', '.join(unset)}")
    return d


def judge_value(cfg: Config, facts: Facts, net: NetworkDecision, key: str, detected: Optional[str], why: str, d: NcclDecision) -> None:
    """Keep, stop the pod for, or override the value of `key` found at start."""
    value, explicit, managed = cfg.nccl[key], key in cfg.explicit_nccl, key in MANAGED_NCCL
    origin = "explicit" if explicit else "inherited"
    would = ""
    if managed and detected != value and (detected is not None or why):
        choice = f"choose {key}={detected!r}" if detected is not None else "leave it unset"
        would = f"; detection would {choice}" + (f" ({why})" if why else "")
    problems, advisories = nccl_problems(key, value, cfg, facts, net)
    d.warnings += [f"{origin} {key}={value}: {a}" for a in advisories]
    harmful = [p for p in problems if p.harmful]
    text = "; ".join(p.text for p in problems)
    # What would keep RDMA on after the fallback the workload allowed is overridden, explicit or not.
    covered = net.fell_back and bool(harmful) and all(p.transport for p in harmful)
    if not problems or (explicit and not harmful):
        d.env[key] = value
        kept = "set explicitly by the workload" if explicit else "inherited (not in LAUNCHER_EXPLICIT_NCCL: the image's)"
        d.lines.append(f"{key}={value}  kept: {kept}{would}")
        if problems:  # harmless here, and the workload meant it
            d.warnings.append(f"explicit {key}={value} {text}")
    elif harmful and not covered and (explicit or cfg.strict):  # explicit, or inherited under LAUNCHER_STRICT: stop the pod
        d.env[key] = value
        d.lines.append(f"{key}={value}  {'set explicitly by the workload' if explicit else 'inherited'}, and wrong here{would}")
        if explicit:
            fix = "The workload sets it on purpose (LAUNCHER_EXPLICIT_NCCL), so the launcher does not override it: fix it in the "
            fix += "workload's env, or leave it out and let the launcher choose"
        else:
            fix = "It is not in LAUNCHER_EXPLICIT_NCCL, so it comes from the image, and LAUNCHER_STRICT=true stops the pod instead of "
            fix += "overriding it: remove it from the image's ENV, or set the right value in the workload's env"
        d.errors.append(f"{origin} {key}={value} {text}. {fix}{would}")
    else:
        new, reason = detected if managed else None, text
        if explicit:
            reason += "; overridden although explicit: rdma mode fell back to tcp (LAUNCHER_TCP_FALLBACK=true)"
        elif cfg.strict:
            reason += "; LAUNCHER_STRICT does not stop the pod for it: "
            reason += "the TCP fallback replaces it anyway" if covered else "NCCL ignores it here"
        if new is None and why:
            reason += f"; the launcher leaves it unset: {why}"
        d.overrides.append({"name": key, "inherited": value, "new": new, "reason": reason, "explicit": explicit})
        if new is not None:
            d.env[key] = new
        was = f"{origin} {value!r} {reason}"
        d.lines.append(f"{key} REMOVED: {was}" if new is None else f"{key}={new}  OVERRIDDEN: {was}")
        d.warnings.append(f"overrode {origin} {key}={value}: it {reason}; now " + (f"{key}={new}" if new is not None else "unset"))
