"""OCI image layouts (image-spec v1.1) written and read without a container runtime: layers are
gzip'd tars of directory trees, made byte-for-byte reproducible (names sorted, every mtime set to
the build's epoch, owners numeric, no device nodes: a runtime mounts /dev), and unpacked the way
a runtime does (in order, whiteouts applied)."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import shutil
import stat
import tarfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
CONFIG = "application/vnd.oci.image.config.v1+json"
MANIFEST = "application/vnd.oci.image.manifest.v1+json"
INDEX = "application/vnd.oci.image.index.v1+json"
REF_NAME = "org.opencontainers.image.ref.name"
WHITEOUT, OPAQUE = ".wh.", ".wh..wh..opq"


@dataclass(frozen=True)
class Blob:
    media_type: str
    digest: str  # sha256:<hex> of the bytes as stored
    size: int
    diff_id: str = ""  # a layer's: sha256 of its uncompressed tar

    def descriptor(self) -> dict[str, Any]:
        return {"mediaType": self.media_type, "digest": self.digest, "size": self.size}


def _sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def layer_tar(root: Path, paths: Iterable[str] = ("",), epoch: int = 0) -> bytes:
    """The tar of `paths` under `root` (relative; "" is the whole tree), as a layer holds them:
    each parent directory first, then everything beneath in sorted order. Hard links stay links."""
    out = io.BytesIO()
    seen: dict[tuple[int, int], str] = {}
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        added: set[str] = set()

        def add(rel: str) -> None:
            if rel in added or rel == "":
                return
            added.add(rel)
            path = root / rel
            info = _entry(tar, path, rel, epoch, seen)
            if info is None:
                return
            if info.isreg():
                with path.open("rb") as f:
                    tar.addfile(info, f)
            else:
                tar.addfile(info)

        for top in sorted(paths):
            parts = Path(top).parts
            for i in range(1, len(parts)):
                add("/".join(parts[:i]))
            start = root / top
            if top:
                add(top)
            if start.is_dir() and not start.is_symlink():
                for rel in _walk(root, start):
                    add(rel)
    return out.getvalue()


def _walk(root: Path, start: Path) -> Iterable[str]:
    for entry in sorted(os.scandir(start), key=lambda e: e.name):
        path = Path(entry.path)
        yield path.relative_to(root).as_posix()
        if entry.is_dir(follow_symlinks=False):
            yield from _walk(root, path)


def _entry(tar: tarfile.TarFile, path: Path, rel: str, epoch: int,
           seen: dict[tuple[int, int], str]) -> tarfile.TarInfo | None:
    st = path.lstat()
    if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode) or stat.S_ISSOCK(st.st_mode) or stat.S_ISFIFO(st.st_mode):
        return None  # /dev's nodes and stray sockets: a runtime provides its own
    info = tar.gettarinfo(str(path), arcname=rel)
    if info.isreg() and st.st_nlink > 1:
        key = (st.st_dev, st.st_ino)
        if key in seen:
            info.type, info.linkname, info.size = tarfile.LNKTYPE, seen[key], 0
        else:
            seen[key] = rel
    info.mtime = epoch
    info.uname = info.gname = ""
    info.pax_headers = {}
    return info


def gzipped(data: bytes) -> bytes:
    """gzip with no name and no time in its header: the same tar, the same bytes."""
    out = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=out, mtime=0, compresslevel=6) as f:
        f.write(data)
    return out.getvalue()


@dataclass
class Layout:
    """An OCI image layout on disk: blobs/sha256/<hex>, index.json, oci-layout."""

    root: Path
    manifests: list[dict[str, Any]] = field(default_factory=list)

    def put(self, data: bytes, media_type: str, diff_id: str = "") -> Blob:
        digest = _sha256(data)
        blob = self.root / "blobs" / "sha256" / digest.split(":", 1)[1]
        blob.parent.mkdir(parents=True, exist_ok=True)
        if not blob.exists():
            blob.write_bytes(data)
        return Blob(media_type, digest, len(data), diff_id)

    def layer(self, tar: bytes) -> Blob:
        return self.put(gzipped(tar), LAYER, _sha256(tar))

    def image(self, name: str, layers: list[Blob], config: dict[str, Any], epoch: int,
              annotations: dict[str, str]) -> Blob:
        """The config and manifest of one image over `layers`, named `name` in the index."""
        created = _rfc3339(epoch)
        body = {"created": created, "architecture": "amd64", "os": "linux", "config": config,
                "rootfs": {"type": "layers", "diff_ids": [layer.diff_id for layer in layers]},
                "history": [{"created": created, "created_by": "python -m images build"} for _ in layers]}
        cfg = self.put(_json(body), CONFIG)
        manifest = {"schemaVersion": 2, "mediaType": MANIFEST, "config": cfg.descriptor(),
                    "layers": [layer.descriptor() for layer in layers], "annotations": annotations}
        found = self.put(_json(manifest), MANIFEST)
        self.manifests.append({**found.descriptor(), "annotations": {REF_NAME: name}})
        return found

    def write(self) -> None:
        (self.root / "oci-layout").write_bytes(_json({"imageLayoutVersion": "1.0.0"}))
        (self.root / "index.json").write_bytes(_json({"schemaVersion": 2, "mediaType": INDEX,
                                                      "manifests": self.manifests}))


def _json(body: dict[str, Any]) -> bytes:
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()


def _rfc3339(epoch: int) -> str:
    import datetime

    return datetime.datetime.fromtimestamp(epoch, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# --- reading an image back, as a runtime would ------------------------------------------------
@dataclass(frozen=True)
class Image:
    manifest: dict[str, Any]
    config: dict[str, Any]
    layers: list[Path]


def read(root: Path, name: str) -> Image:
    """The image `name` of the layout at `root`, every blob's digest checked."""
    index = json.loads((root / "index.json").read_text())
    found = [m for m in index["manifests"] if m.get("annotations", {}).get(REF_NAME) == name]
    if len(found) != 1:
        raise LookupError(f"{root}: {len(found)} images named {name!r}")

    def blob(descriptor: dict[str, Any]) -> Path:
        path: Path = root / "blobs" / "sha256" / str(descriptor["digest"]).split(":", 1)[1]
        data = path.read_bytes()
        if _sha256(data) != descriptor["digest"] or len(data) != descriptor["size"]:
            raise ValueError(f"{path}: its content is not {descriptor['digest']} ({descriptor['size']} bytes)")
        return path

    manifest = json.loads(blob(found[0]).read_bytes())
    config = json.loads(blob(manifest["config"]).read_bytes())
    layers = [blob(layer) for layer in manifest["layers"]]
    for path, diff_id in zip(layers, config["rootfs"]["diff_ids"], strict=True):
        if _sha256(gzip.decompress(path.read_bytes())) != diff_id:
            raise ValueError(f"{path}: its tar is not the config's diff_id {diff_id}")
    return Image(manifest, config, layers)


def unpack(image: Image, dest: Path) -> None:
    """Each layer over the last, as a runtime does: a whiteout (.wh.name) removes what a lower
    layer put there; an opaque one empties its directory."""
    for layer in image.layers:
        with tarfile.open(layer, mode="r:gz") as tar:
            members = tar.getmembers()
            for member in members:
                where = dest / member.name
                name = Path(member.name).name
                if name == OPAQUE:
                    for child in where.parent.iterdir():
                        _remove(child)
                elif name.startswith(WHITEOUT):
                    _remove(where.parent / name[len(WHITEOUT):])
            kept = [m for m in members if not Path(m.name).name.startswith(WHITEOUT)]
            for member in kept:
                where = dest / member.name
                if where.is_symlink() or (where.exists() and not (where.is_dir() and member.isdir())):
                    _remove(where)
            tar.extractall(dest, members=kept, filter="fully_trusted")  # our own layers; a root filesystem


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()
