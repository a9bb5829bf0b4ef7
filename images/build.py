"""kilocard's two images, built without a container runtime from what the package registries serve:

- `kilocard` (the runner: `kilocard run`, game days, the TTL reaper): Debian's Python, the kilocard
  wheel in a venv (/opt/kilocard), a user of its own (UID 10001) so runAsNonRoot can verify it;
- `kilocard-agent` (the node agent DaemonSet): the same venv over Debian's Python with `ip`, `tc`
  (iproute2) and `nft` (nftables), run as root.

Each is an OCI image layout. Layers: the Debian root filesystem (mmdebstrap from Debian's archive,
SOURCE_DATE_EPOCH set, cached under ~/.cache/kilocard/images by its package list), the venv (the
hash-pinned wheels of deploy/images/requirements.lock downloaded by pip on this machine, installed
offline in a chroot of that filesystem, no bytecode), the runner's user. Every layer's bytes
follow from its inputs: the same Debian packages, lock and source give the same digests."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from images import oci

HERE = Path(__file__).resolve().parent
SOURCE = HERE.parent
LOCK = SOURCE / "deploy" / "images" / "requirements.lock"
SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
EPOCH = 1767225600  # 2026-01-01T00:00:00Z: every file's mtime, every timestamp in the images
VENV = "opt/kilocard"
RUNNER_UID = 10001
# Documentation, manual pages and translations are not needed to run; licences stay.
DPKG_OPTIONS = ("path-exclude=/usr/share/doc/*", "path-include=/usr/share/doc/*/copyright",
                "path-exclude=/usr/share/man/*", "path-exclude=/usr/share/info/*",
                "path-exclude=/usr/share/locale/*")


@dataclass(frozen=True)
class Spec:
    name: str
    debs: tuple[str, ...]
    user: str
    entrypoint: tuple[str, ...]
    cmd: tuple[str, ...]
    description: str


PYTHON = ("python3", "python3-pip-whl", "ca-certificates")  # pip's wheel installs the venv, offline
RUNNER = Spec("kilocard", PYTHON, str(RUNNER_UID), (f"/{VENV}/bin/kilocard",), ("--help",),
              "kilocard's runner: experiments, game days, the TTL reaper")
AGENT = Spec("kilocard-agent", (*PYTHON, "iproute2", "nftables"), "0", (f"/{VENV}/bin/python", "-m", "chaos.agent"),
             ("--help",), "kilocard's node agent: tc, nftables, DCGM injection, card drain, rank stall")
SPECS = (RUNNER, AGENT)
# The lock's wheels are CPython 3.11's for glibc x86-64 up to 2.36: bookworm's python3 on amd64
# (pip does not widen a --platform to the older manylinux tags a wheel may carry: each is named).
GLIBC = (2, 36)
PLATFORM = (*(arg for minor in range(GLIBC[1], 4, -1) for arg in ("--platform", f"manylinux_2_{minor}_x86_64")),
            "--platform", "manylinux2014_x86_64", "--platform", "manylinux1_x86_64",
            "--python-version", "3.11", "--implementation", "cp", "--only-binary=:all:")
PATH = f"/{VENV}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def cache_dir() -> Path:
    return Path(os.environ.get("KILOCARD_CACHE", Path.home() / ".cache" / "kilocard")) / "images"


@contextmanager
def _cache_locked() -> Iterator[None]:
    """The cache to one builder at a time (two test workers, two terminals)."""
    import fcntl

    cache_dir().mkdir(parents=True, exist_ok=True)
    with (cache_dir() / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _key(*parts: object) -> str:
    return hashlib.sha256(json.dumps([str(p) for p in parts]).encode()).hexdigest()[:16]


def base(debs: tuple[str, ...]) -> Path:
    """Debian's root filesystem with `debs` (and the essential set), built once per package list."""
    found = cache_dir() / f"base-{SUITE}-{_key(SUITE, MIRROR, sorted(debs), DPKG_OPTIONS, EPOCH)}"
    with _cache_locked():
        if not (found / "usr" / "bin" / "python3").exists():
            _debootstrap(debs, found)
    return found


def _debootstrap(debs: tuple[str, ...], found: Path) -> None:
    shutil.rmtree(found, ignore_errors=True)
    partial = found.with_name(found.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.parent.mkdir(parents=True, exist_ok=True)
    _run(["mmdebstrap", "--quiet", "--mode=root", "--variant=essential", f"--include={','.join(sorted(debs))}",
          *(f"--dpkgopt={o}" for o in DPKG_OPTIONS), "--format=directory", SUITE, str(partial), MIRROR],
         env={**os.environ, "SOURCE_DATE_EPOCH": str(EPOCH)})
    (partial / "etc" / "resolv.conf").unlink(missing_ok=True)  # a runtime writes its own
    partial.rename(found)


def wheelhouse() -> Path:
    """The lock's wheels, downloaded by this machine's pip (its index, its CA) and checked against
    the lock's hashes."""
    found = cache_dir() / f"wheels-{_key(LOCK.read_text())}"
    with _cache_locked():
        if not (found / ".complete").exists():
            found.mkdir(parents=True, exist_ok=True)
            _run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--require-hashes", *PLATFORM,
                  "-r", str(LOCK), "-d", str(found)])
            (found / ".complete").touch()
    return found


def wheel(out: Path) -> Path:
    """kilocard's wheel from the files git knows in this source tree (committed or not, never
    ignored ones), built in a copy: setuptools' build/ would otherwise carry deleted modules along."""
    listed = subprocess.run(["git", "-C", str(SOURCE), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            capture_output=True, check=True).stdout.decode().split("\0")
    copy = out / "source"
    for name in filter(None, listed):
        path = SOURCE / name
        if path.is_symlink() or path.is_file():  # a file deleted but not yet staged is listed, and gone
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, copy / name, follow_symlinks=False)
    _run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(out), str(copy)],
         env={**os.environ, "SOURCE_DATE_EPOCH": str(EPOCH)})
    (found,) = out.glob("kilocard-*.whl")
    return found


@contextmanager
def _chroot(root: Path, binds: dict[str, Path]) -> Iterator[list[str]]:
    """A command prefix that runs inside `root` with /proc and `binds` mounted, in a mount
    namespace of its own: the mounts end with the command."""
    script = ["set -e", f'mount -t proc proc "{root}/proc"']
    for inside, outside in binds.items():
        (root / inside).mkdir(parents=True, exist_ok=True)
        script.append(f'mount --bind "{outside}" "{root / inside}"')
    script.append(f'exec chroot "{root}" "$@"')
    try:
        yield ["unshare", "--mount", "--propagation", "private", "sh", "-c", "\n".join(script), "chroot"]
    finally:
        for inside in binds:
            (root / inside).rmdir()


def venv_tree(python_base: Path, work: Path) -> Path:
    """A root filesystem: `python_base` with the venv at /opt/kilocard (the lock's wheels and
    kilocard's), `pip check`ed."""
    tree = work / "rootfs"
    _run(["cp", "-a", str(python_base), str(tree)])  # device nodes as nodes, hard links as links
    wheels = work / "wheel"
    kilocard = wheel(wheels)
    pip = sorted((tree / "usr" / "share" / "python-wheels").glob("pip-*.whl"))[-1]
    env = {"PATH": PATH, "SOURCE_DATE_EPOCH": str(EPOCH), "PIP_NO_CACHE_DIR": "1", "HOME": "/root",
           "PYTHONDONTWRITEBYTECODE": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    (tree / "tmp" / "lock").write_text(LOCK.read_text())
    with _chroot(tree, {"tmp/wheelhouse": wheelhouse(), "tmp/kilocard": wheels}) as inside:
        def run(*argv: str) -> None:
            _run([*inside, *argv], env=env)

        run("/usr/bin/python3", "-m", "venv", "--without-pip", f"/{VENV}")
        installing = (f"/{VENV}/bin/python", f"/usr/share/python-wheels/{pip.name}/pip", "install", "--quiet",
                      "--no-index", "--no-deps", "--no-compile", "--find-links", "/tmp/wheelhouse")
        run(*installing, "--require-hashes", "-r", "/tmp/lock")
        run(*installing, f"/tmp/kilocard/{kilocard.name}")
        run(*installing[:2], "check")
    (tree / "tmp" / "lock").unlink()
    return tree


def user_tree(tree: Path) -> list[str]:
    """The runner's user (UID 10001, its home) added to `tree`; the paths it changed."""
    line = f"kilocard:x:{RUNNER_UID}:{RUNNER_UID}:kilocard:/home/kilocard:/usr/sbin/nologin\n"
    with (tree / "etc" / "passwd").open("a") as f:
        f.write(line)
    with (tree / "etc" / "group").open("a") as f:
        f.write(f"kilocard:x:{RUNNER_UID}:\n")
    home = tree / "home" / "kilocard"
    home.mkdir(parents=True)
    os.chown(home, RUNNER_UID, RUNNER_UID)
    return ["etc/passwd", "etc/group", "home/kilocard"]


def build(out: Path, tag: str) -> dict[str, str]:
    """Both images into the OCI layout at `out`, named `<name>:<tag>`; their manifests' digests."""
    layout = oci.Layout(out)
    digests = {}
    with tempfile.TemporaryDirectory(prefix="kilocard-images-") as work:
        runner_base = base(RUNNER.debs)
        tree = venv_tree(runner_base, Path(work))
        venv = layout.layer(oci.layer_tar(tree, [VENV], EPOCH))
        for spec in SPECS:
            rootfs = runner_base if spec is RUNNER else base(spec.debs)
            layers = [layout.layer(oci.layer_tar(rootfs, [""], EPOCH)), venv]
            if spec is RUNNER:
                layers.append(layout.layer(oci.layer_tar(tree, user_tree(tree), EPOCH)))
            config = {"User": spec.user, "Entrypoint": list(spec.entrypoint), "Cmd": list(spec.cmd),
                      "Env": [f"PATH={PATH}", "PYTHONUNBUFFERED=1", "PYTHONDONTWRITEBYTECODE=1"],
                      "WorkingDir": "/home/kilocard" if spec is RUNNER else "/"}
            annotations = {"org.opencontainers.image.title": spec.name,
                           "org.opencontainers.image.description": spec.description,
                           "org.opencontainers.image.version": tag,
                           "org.opencontainers.image.base.name": f"debian:{SUITE}"}
            manifest = layout.image(f"{spec.name}:{tag}", layers, config, EPOCH, annotations)
            digests[f"{spec.name}:{tag}"] = manifest.digest
    layout.write()
    return digests


def lock(out: Path = LOCK) -> None:
    """deploy/images/requirements.lock anew: what pip resolves for kilocard's dependencies on the
    images' platform, each pinned with the hash of the file it would download."""
    with tempfile.TemporaryDirectory(prefix="kilocard-lock-") as work:
        report = Path(work) / "report.json"
        _run([sys.executable, "-m", "pip", "install", "--quiet", "--dry-run", "--ignore-installed", *PLATFORM,
              "--target", str(Path(work) / "target"), "--report", str(report), str(SOURCE)])
        chosen = json.loads(report.read_text())["install"]
    lines = [f"{i['metadata']['name']}=={i['metadata']['version']} \\\n"
             f"    --hash=sha256:{i['download_info']['archive_info']['hashes']['sha256']}"
             for i in sorted(chosen, key=lambda i: i["metadata"]["name"].lower())
             if i["metadata"]["name"] != "kilocard"]
    out.write_text("# The images' venv: kilocard's dependencies as pip resolved them for CPython 3.11 on glibc\n"
                   "# x86-64, hash-pinned. Made by `python -m images lock`; tests/unit/test_images.py checks it meets\n"
                   "# pyproject.toml's requirements.\n" + "\n".join(lines) + "\n")


def _run(argv: list[str], env: dict[str, str] | None = None) -> None:
    done = subprocess.run(argv, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:6])} ... exited {done.returncode}:\n{done.stderr[-4000:]}")
