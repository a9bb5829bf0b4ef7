"""Build the testbed's binaries from Go modules, once per machine, into a cache outside the repo.

Each component builds in its own wrapper module (testbed/go/<component>/go.mod, copied into the
cache) so that Go's minimal version selection never mixes their dependency graphs. A component
is built into `<bin>.tmp` and renamed when every binary is there, so an interrupted build never
looks complete; `build.json` beside the binaries records how long it took.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from chaos.errors import KilocardError

GO_DIR = Path(__file__).parent / "go"
STAGE_DIR_NAME = "stage"  # kwok's own stage definitions, copied beside the kwok binary


@dataclass(frozen=True)
class Component:
    name: str
    version: str
    binaries: tuple[str, ...]
    patch: str = ""  # kilocard's fix to the upstream source, if any (a new one builds anew)

    @property
    def key(self) -> str:
        return f"{self.name}-{self.version}" + (f"-{self.patch}" if self.patch else "")


K8S = Component("k8s", "1.36.3", ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl"))
# Kubernetes 1.34+ pairs with etcd 3.6; Debian's 3.4.23 is below the documented minimum.
ETCD = Component("etcd", "3.6.16", ("etcd",))
# kwok v0.8.0 is built against the 1.36 libraries, with one fix (KWOK_HEAP_FIX).
KWOK = Component("kwok", "0.8.0", ("kwok",), patch="heapfix1")
COMPONENTS = (ETCD, K8S, KWOK)
# Not the testbed's: the tests lint and render kilocard's chart (deploy/chart) with the real helm.
HELM = Component("helm", "4.3.2", ("helm",))
# LeaderWorkerSet's controller manager (controllers and webhooks), which testbed.lws runs beside the
# control plane, with the CRD and webhook configurations of the same release (config/ beside it).
LWS = Component("lws", "0.7.0", ("lws-controller",))
# The tenant gate of a multi-tenant Prometheus (OpenShift's and kube-prometheus' way): every query
# gets the tenant's label matcher from a header, a query without it is refused. The tests put it in
# front of the testbed's Prometheus to prove kilocard's tenant header is sent and honoured.
PROM_LABEL_PROXY = Component("prom-label-proxy", "0.12.1", ("prom-label-proxy",))
# KServe's controller manager (InferenceService in RawDeployment mode, its webhooks), which
# testbed.kserve runs beside the control plane, with the release's CRDs, its inferenceservice-config
# ConfigMap, its webhook configurations and the Hugging Face serving runtime (config/ beside it).
KSERVE = Component("kserve", "0.15.2", ("kserve-controller",))
KSERVE_CONFIG = ("config/crd/full", "config/configmap/inferenceservice.yaml", "config/webhook/manifests.yaml",
                 "config/runtimes/kserve-huggingfaceserver.yaml")
TOOLS = (HELM, LWS, PROM_LABEL_PROXY, KSERVE)
LWS_CONFIG = ("config/crd/bases/leaderworkerset.x-k8s.io_leaderworkersets.yaml", "config/webhook/manifests.yaml")


class BuildError(KilocardError):
    pass


def cache_dir() -> Path:
    return Path(os.environ.get("KILOCARD_CACHE", Path.home() / ".cache" / "kilocard"))


def bin_dir(component: Component) -> Path:
    return cache_dir() / "bin" / component.key


def binary(name: str) -> Path:
    """Path of a built binary by name (e.g. "kube-apiserver")."""
    for component in COMPONENTS + TOOLS:
        if name in component.binaries:
            return bin_dir(component) / name
    raise KeyError(name)


def kwok_stage_dir() -> Path:
    return bin_dir(KWOK) / STAGE_DIR_NAME


def is_built(component: Component) -> bool:
    return all((bin_dir(component) / b).is_file() for b in component.binaries)


def ensure(component: Component, say: Callable[[str], None] = print) -> Path:
    """The component's folder, built first if it is not (a tool the testbed itself does not need,
    built the first time a test or a command asks for it); the build is one at a time per cache."""
    if not is_built(component):
        build((component,), say=say)
    return bin_dir(component)


def missing_binaries() -> list[str]:
    return [b for c in COMPONENTS if not is_built(c) for b in c.binaries]


def staging_modules(gomod: str) -> list[str]:
    """The staging modules that k8s.io/kubernetes' go.mod replaces with ./staging/src paths."""
    return re.findall(r"^\s*(k8s\.io/[a-z0-9-]+)\s+=>\s+\./staging/src/", gomod, flags=re.MULTILINE)


def go_directive(gomod: str) -> str:
    match = re.search(r"^go\s+(\S+)", gomod, flags=re.MULTILINE)
    if not match:
        raise BuildError("k8s.io/kubernetes go.mod has no 'go' line")
    return match.group(1)


def _version_tuple(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v)[:3])


def find_go() -> str:
    go = shutil.which("go")
    if not go:
        raise BuildError(
            "the Go toolchain ('go') is not on PATH: install Go >= 1.26 to build the testbed binaries"
        )
    return go


class _Builder:
    """Runs the go commands of one component, logging their output to a file."""

    def __init__(self, component: Component, go: str, log: Path, say: Callable[[str], None]) -> None:
        self.component = component
        self.go = go
        self.log = log
        self.say = say
        cache = cache_dir()
        self.work = cache / "src" / component.key
        self.env = {
            **os.environ,
            "GOTOOLCHAIN": "local",  # never try to download another toolchain
            "GOFLAGS": "-mod=mod",
            "CGO_ENABLED": "0",
            "GOMODCACHE": str(cache / "go" / "mod"),
            "GOCACHE": str(cache / "go" / "build"),
            # Only the module proxy is reachable here; skip the separate checksum database.
            "GONOSUMDB": "k8s.io,sigs.k8s.io,go.etcd.io",
        }

    def run(self, *args: str, capture: bool = False) -> str:
        with self.log.open("a") as out:
            out.write(f"$ go {' '.join(args)}\n")
            out.flush()
            proc = subprocess.run(
                [self.go, *args],
                cwd=self.work,
                env=self.env,
                stdout=subprocess.PIPE if capture else out,
                stderr=out,
                text=True,
            )
        if proc.returncode != 0:
            tail = "\n".join(self.log.read_text().splitlines()[-15:])
            raise BuildError(f"building {self.component.key} failed at 'go {args[0]}' (log: {self.log}):\n{tail}")
        return proc.stdout or ""

    def prepare(self) -> None:
        shutil.rmtree(self.work, ignore_errors=True)
        self.work.mkdir(parents=True)
        shutil.copy(GO_DIR / self.component.name / "go.mod", self.work / "go.mod")

    def build(self, out: Path) -> None:
        self.prepare()
        getattr(self, f"_build_{self.component.name.replace('-', '_')}")(out)

    def _go_build(self, out: Path, binary_name: str, package: str, ldflags: str, tags: str = "") -> None:
        self.say(f"building {binary_name}")
        args = ["build", "-p", "2", "-trimpath", "-ldflags", ldflags, "-o", str(out / binary_name)]
        if tags:
            args[3:3] = ["-tags", tags]
        self.run(*args, package)

    def _build_k8s(self, out: Path) -> None:
        version = self.component.version
        minor = version.split(".")[1]
        self.say(f"resolving k8s.io/kubernetes v{version}")
        info = json.loads(self.run("mod", "download", "-json", f"k8s.io/kubernetes@v{version}", capture=True))
        gomod = Path(info["GoMod"]).read_text()
        self.run("mod", "edit", f"-go={go_directive(gomod)}")
        staging = staging_modules(gomod)
        if not staging:
            raise BuildError("found no staging modules in k8s.io/kubernetes' go.mod")
        # Staging modules are published as k8s.io/<name> v0.<minor>.<patch>.
        replaces = [f"-replace={m}={m}@v0.{version.split('.', 1)[1]}" for m in staging]
        self.run("mod", "edit", *replaces)
        self.say(f"downloading modules ({len(staging)} staging modules)")
        commands = list(self.component.binaries)
        self.run("get", *[f"k8s.io/kubernetes/cmd/{c}@v{version}" for c in commands])
        ldflags = "-s -w"
        for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
            # The version must match the tag, else the emulation-version check refuses to start.
            ldflags += (
                f" -X {pkg}.gitVersion=v{version} -X {pkg}.gitMajor=1"
                f" -X {pkg}.gitMinor={minor} -X {pkg}.gitTreeState=clean"
            )
        # One binary at a time keeps peak memory low on a small machine.
        for c in commands:
            self._go_build(out, c, f"k8s.io/kubernetes/cmd/{c}", ldflags, tags="selinux,notest,grpcnotrace")

    def _build_etcd(self, out: Path) -> None:
        version = self.component.version
        self.say("downloading modules")
        self.run("get", f"go.etcd.io/etcd/server/v3@v{version}")
        ldflags = f"-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=v{version}"
        self._go_build(out, "etcd", "go.etcd.io/etcd/server/v3", ldflags)

    def _build_helm(self, out: Path) -> None:
        version = self.component.version
        self.say("downloading modules")
        self.run("get", f"helm.sh/helm/v4/cmd/helm@v{version}")
        ldflags = f"-s -w -X helm.sh/helm/v4/internal/version.version=v{version}"
        self._go_build(out, "helm", "helm.sh/helm/v4/cmd/helm", ldflags)

    def _build_lws(self, out: Path) -> None:
        version = self.component.version
        self.say("downloading modules")
        self.run("get", f"sigs.k8s.io/lws/cmd@v{version}")
        src = Path(self.run("list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/lws", capture=True).strip())
        ldflags = f"-s -w -X sigs.k8s.io/lws/pkg/version.GitVersion=v{version}"
        self._go_build(out, "lws-controller", "sigs.k8s.io/lws/cmd", ldflags)
        _copy_config(src, out, LWS_CONFIG)

    def _build_kserve(self, out: Path) -> None:
        version = self.component.version
        self.say("downloading modules")
        self.run("get", f"github.com/kserve/kserve/cmd/manager@v{version}")
        src = Path(self.run("list", "-m", "-f", "{{.Dir}}", "github.com/kserve/kserve", capture=True).strip())
        self._go_build(out, "kserve-controller", "github.com/kserve/kserve/cmd/manager", "-s -w")
        _copy_config(src, out, KSERVE_CONFIG)

    def _build_prom_label_proxy(self, out: Path) -> None:
        self.say("downloading modules")
        module = "github.com/prometheus-community/prom-label-proxy"
        self.run("get", f"{module}@v{self.component.version}")
        self._go_build(out, "prom-label-proxy", module, "-s -w")

    def _build_kwok(self, out: Path) -> None:
        self.say("downloading modules")
        self.run("get", f"sigs.k8s.io/kwok/cmd/kwok@v{self.component.version}")
        src = Path(self.run("list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/kwok", capture=True).strip())
        fixed = self.work / "kwok-src"
        shutil.copytree(src, fixed)
        for path in fixed.rglob("*"):
            path.chmod(0o755 if path.is_dir() else 0o644)  # the module cache is read-only
        fix_kwok_heap(fixed / "pkg" / "utils" / "heap" / "heap.go")
        self.run("mod", "edit", "-replace", f"sigs.k8s.io/kwok={fixed}")
        shutil.copy(GO_DIR / "kwok" / "queue_test.go", self.work / "queue_test.go")
        self.say("testing kwok's queues with the fix")
        self.run("test", "-count=1", ".")
        self._go_build(out, "kwok", "sigs.k8s.io/kwok/cmd/kwok", "-s -w")
        shutil.copytree(src / "kustomize" / "stage", out / STAGE_DIR_NAME)
        for path in (out / STAGE_DIR_NAME).rglob("*"):
            path.chmod(0o755 if path.is_dir() else 0o644)  # the module cache is read-only


def _copy_config(src: Path, out: Path, names: tuple[str, ...]) -> None:
    """Files or folders of a release's source, beside its binary, writable (the module cache is not)."""
    for name in names:
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        if (src / name).is_dir():
            shutil.copytree(src / name, out / name)
        else:
            shutil.copy(src / name, out / name)
        for path in [out / name, *(out / name).rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)


# kwok v0.8.0's delay queues keep a second heap entry when an item is pushed again before it is
# due (a node let go and held again while its lease renewal was in flight). The index points at
# the newer entry only, so the older one can never be removed: once due it stays at the top and
# every item behind it waits forever. Seen on the testbed after a kubelet-stop fault's revert:
# kwok renewed no node's Lease again, every node went Unknown every 17 s (its status heartbeat
# alone is slower than the grace period) and the node controller marked their pods NotReady.
# The fix keeps one entry per item, due at the earlier time (when the duplicate fired before).
KWOK_HEAP_FIX = """
\tif old, ok := h.indexes[data]; ok && old.index >= 0 {
\t\tif key < old.key { // kilocard: one entry per item (testbed/build.py, KWOK_HEAP_FIX)
\t\t\told.key = key
\t\t\theap.Fix(&h.entries, old.index)
\t\t}
\t\treturn
\t}"""
KWOK_HEAP_PUSH = "func (h *Heap[K, T]) Push(key K, data T) {"


def fix_kwok_heap(path: Path) -> None:
    """Apply KWOK_HEAP_FIX at the top of kwok's Heap.Push (a clear error if upstream moved it)."""
    text = path.read_text()
    if text.count(KWOK_HEAP_PUSH) != 1:
        raise BuildError(f"{path}: expected one '{KWOK_HEAP_PUSH}' to fix; kwok changed, see testbed/build.py")
    path.write_text(text.replace(KWOK_HEAP_PUSH, KWOK_HEAP_PUSH + KWOK_HEAP_FIX))


def build(
    components: tuple[Component, ...] = COMPONENTS,
    force: bool = False,
    say: Callable[[str], None] = print,
) -> dict[str, float]:
    """Build what is missing; return seconds spent per component (0 for cached ones). One build at
    a time per cache (a file lock): the test workers that first need a tool wait for one build of
    it, and find it built."""
    cache = cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    with (cache / "build.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _build(components, force, say)


def _build(components: tuple[Component, ...], force: bool, say: Callable[[str], None]) -> dict[str, float]:
    spent: dict[str, float] = {}
    todo = [c for c in components if force or not is_built(c)]
    for c in components:
        if c not in todo:
            say(f"{c.key}: cached in {bin_dir(c)}")
            spent[c.key] = 0.0
    if not todo:
        return spent
    go = find_go()
    go_version = subprocess.run([go, "env", "GOVERSION"], capture_output=True, text=True).stdout.strip()
    if _version_tuple(go_version) < (1, 26):
        raise BuildError(f"the Go toolchain is {go_version}; the testbed needs Go >= 1.26")
    logs = cache_dir() / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    for c in todo:
        out = bin_dir(c)
        tmp = out.with_name(out.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        log = logs / f"build-{c.key}.log"
        log.write_text("")
        started = time.monotonic()
        _Builder(c, go, log, lambda m, c=c: say(f"{c.key}: {m}")).build(tmp)
        seconds = time.monotonic() - started
        record = {"component": c.name, "version": c.version, "seconds": round(seconds, 1), "go": go_version,
                  "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        (tmp / "build.json").write_text(json.dumps(record, indent=2) + "\n")
        shutil.rmtree(out, ignore_errors=True)
        tmp.rename(out)
        say(f"{c.key}: built in {seconds:.0f} s -> {out}")
        spent[c.key] = seconds
    return spent


def build_records() -> list[dict[str, object]]:
    """What each cached component's build.json says (how long the build took)."""
    records = []
    for c in COMPONENTS + TOOLS:
        path = bin_dir(c) / "build.json"
        if path.is_file():
            records.append(json.loads(path.read_text()))
    return records
