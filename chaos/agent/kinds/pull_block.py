"""pull-block (toolkit kind image-pull-failure): the node can no longer pull from its image
registries, as in a registry or mirror outage. Running engines are untouched (their images are
on disk); a replacement scheduled here sits in ErrImagePull / ImagePullBackOff until the outage
ends and the kubelet's next back-off retry pulls it.

    params   registries: the registries the node pulls from, as an image names them (docker.io,
             nvcr.io, harbor.internal:5000; docker.io means registry-1.docker.io, as containerd
             resolves it). Where containerd pulls through a mirror, name the mirror
    apply    each registry's name resolved on the node (the addresses kept with the fault, so the
             revert and the read-back are exact); nft: table inet kilocard_<id>, an output chain
             `ip daddr <address> tcp dport <port> reject with tcp reset`: the runtime's connection
             is refused at once, as a registry that is down refuses it
    revert   nft delete table inet kilocard_<id>
    observe  the table and its reject rules are in the ruleset
A name that later resolves to other addresses (a CDN's rotation) escapes the block; the addresses
blocked are in the read-back's evidence. An image already on the node is not pulled at all
(imagePullPolicy IfNotPresent): the fault reaches only pods whose image the node lacks.
"""

from __future__ import annotations

from typing import Any

from chaos.agent import schema

NAME, FAULT, TARGET, SLOT, REFRESH = "pull-block", "image-pull-failure", "node", None, False
FIT = True  # the engines it runs keep serving: their images are on disk
DESCRIPTION = ("Make nodes unable to pull from the named image registries (their addresses refused through "
               "nftables), as in a registry outage: a replacement replica waits in ImagePullBackOff until it ends.")
VERDICT = ["reject", "with", "tcp", "reset"]
REGISTRY = r"[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?(:[0-9]{1,5})?"
DOCKER_HUB = "docker.io"
# The names an image may give Docker Hub, and the host containerd pulls it from.
DOCKER_HUB_NAMES = (DOCKER_HUB, "index.docker.io", "registry-1.docker.io")
DOCKER_HUB_HOST = "registry-1.docker.io"
HTTPS = 443

PARAMS = {
    "registries": schema.Param("texts", "registry names (host or host:port)", pattern=REGISTRY, required=True,
                               example=["docker.io"]),
}
EXAMPLE = {"registries": ["docker.io", "nvcr.io"]}


def registry_of(image: str) -> str:
    """The registry an image reference pulls from, by the reference's rules: a first path
    component with a dot or a port, or `localhost`, is a registry; anything else is Docker Hub."""
    first, slash, _rest = image.partition("/")
    if slash and ("." in first or ":" in first or first == "localhost"):
        return DOCKER_HUB if first in DOCKER_HUB_NAMES else first
    return DOCKER_HUB


def canonical(registry: str) -> str:
    return DOCKER_HUB if registry in DOCKER_HUB_NAMES else registry


def endpoint(registry: str) -> tuple[str, int]:
    """(host, port) the runtime connects to for a registry name."""
    name = canonical(registry)
    host, colon, port = name.rpartition(":") if ":" in name else (name, "", "")
    return (DOCKER_HUB_HOST if host == DOCKER_HUB else host), (int(port) if colon else HTTPS)


def apply(fault: Any, host: Any) -> None:
    if "addresses" not in fault.saved:  # resolved once: a re-apply after a restart blocks the same ones
        fault.saved["addresses"] = {r: host.resolve(*endpoint(r)) for r in fault.params["registries"]}
    host.nft_table(fault, {"output": VERDICT}, protocol="tcp", scope=scope(fault))


def scope(fault: Any) -> dict[str, Any]:
    addresses = sorted({a for found in fault.saved["addresses"].values() for a in found})
    return {"cidrs": [f"{a}/128" if ":" in a else f"{a}/32" for a in addresses],
            "ports": sorted({endpoint(r)[1] for r in fault.params["registries"]}), "protocol": "tcp"}


def revert(fault: Any, host: Any) -> None:
    host.nft_revert(fault)


def observe(fault: Any, host: Any) -> tuple[str, str]:
    status, evidence = host.nft_observe(fault, "reject with tcp reset")
    blocked = "; ".join(f"{r} ({', '.join(a)})" for r, a in sorted(fault.saved.get("addresses", {}).items()))
    return status, f"{evidence}; pulls refused from {blocked or 'nothing resolved'}"
