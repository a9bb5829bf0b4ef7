"""The image builder's pure parts: layers are the same bytes from the same tree whatever the
files' times and the order the disk lists them in; a layout read back checks every digest; a
runtime's unpacking applies whiteouts; the venv's lock meets pyproject.toml's requirements for the
images' Python (tests/images/test_images.py builds the images themselves)."""

from __future__ import annotations

import io
import os
import re
import tarfile
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from images import build, oci

ROOT = Path(__file__).parents[2]


def tree(root: Path, mtime: int) -> Path:
    (root / "b" / "c").mkdir(parents=True)
    (root / "b" / "c" / "f").write_text("hello")
    (root / "a").write_text("first")
    os.link(root / "a", root / "b" / "hard")
    (root / "b" / "link").symlink_to("../a")
    for path in [root / "a", root / "b" / "c" / "f", root / "b" / "c", root / "b"]:
        os.utime(path, (mtime, mtime), follow_symlinks=False)
    return root


def test_a_layer_is_the_same_bytes_whatever_the_files_times_and_keeps_links(tmp_path):
    one = oci.layer_tar(tree(tmp_path / "one", 1_000), epoch=7)
    two = oci.layer_tar(tree(tmp_path / "two", 2_000_000), epoch=7)
    assert one == two and oci.gzipped(one) == oci.gzipped(two)
    members = tarfile.open(fileobj=io.BytesIO(one)).getmembers()
    assert [m.name for m in members] == ["a", "b", "b/c", "b/c/f", "b/hard", "b/link"]
    assert {m.mtime for m in members} == {7} and {m.uname for m in members} == {""}
    by = {m.name: m for m in members}
    assert by["b/hard"].islnk() and by["b/hard"].linkname == "a" and by["b/link"].linkname == "../a"
    # A subset brings its parent directories first.
    assert [m.name for m in tarfile.open(fileobj=io.BytesIO(oci.layer_tar(tmp_path / "one", ["b/c"]))).getmembers()] \
        == ["b", "b/c", "b/c/f"]


def layout_with(tmp_path: Path, *trees: Path) -> Path:
    layout = oci.Layout(tmp_path / "oci")
    layers = [layout.layer(oci.layer_tar(t)) for t in trees]
    layout.image("x:1", layers, {"User": "0"}, 0, {})
    layout.write()
    return layout.root


def test_unpacking_applies_layers_in_order_with_their_whiteouts(tmp_path):
    lower = tree(tmp_path / "lower", 0)
    upper = tmp_path / "upper"
    (upper / "b" / "c").mkdir(parents=True)
    (upper / "b" / ".wh.link").write_text("")  # b/link removed
    (upper / "b" / "c" / ".wh..wh..opq").write_text("")  # b/c emptied, then given g
    (upper / "b" / "c" / "g").write_text("new")
    (upper / "a").write_text("second")
    dest = tmp_path / "root"
    dest.mkdir()
    oci.unpack(oci.read(layout_with(tmp_path, lower, upper), "x:1"), dest)
    assert sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*")) == ["a", "b", "b/c", "b/c/g", "b/hard"]
    assert (dest / "a").read_text() == "second" and (dest / "b" / "hard").read_text() == "first"


def test_a_blob_that_is_not_its_digest_is_refused(tmp_path):
    root = layout_with(tmp_path, tree(tmp_path / "t", 0))
    image = oci.read(root, "x:1")
    image.layers[0].write_bytes(oci.gzipped(b"not the layer"))
    with pytest.raises(ValueError, match="its content is not sha256:"):
        oci.read(root, "x:1")
    with pytest.raises(LookupError, match="0 images named 'y:1'"):
        oci.read(root, "y:1")


def test_the_lock_pins_every_requirement_for_the_images_python_with_a_hash():
    text = build.LOCK.read_text()
    pins = dict(re.findall(r"^([A-Za-z0-9_.-]+)==(\S+) \\\n    --hash=sha256:[0-9a-f]{64}$", text, re.MULTILINE))
    assert len(pins) == len(re.findall(r"^[A-Za-z0-9]", text, re.MULTILINE))  # every entry pinned and hashed
    pinned = {canonicalize_name(name): version for name, version in pins.items()}
    python = {"python_version": "3.11", "python_full_version": "3.11.2", "sys_platform": "linux",
              "platform_machine": "x86_64", "implementation_name": "cpython", "extra": ""}
    for line in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]:
        wanted = Requirement(line)
        if wanted.marker is None or wanted.marker.evaluate(python):
            name = canonicalize_name(wanted.name)
            assert name in pinned and pinned[name] in wanted.specifier, (line, pinned.get(name))
