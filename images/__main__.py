"""`python -m images build [--out DIR] [--tag TAG]`: the runner and agent images as one OCI image
layout (load it with `skopeo copy oci:DIR:kilocard:TAG docker://REGISTRY/kilocard:TAG`, or
`podman load`); `python -m images lock`: the venv's lock anew."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from images import build


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m images")
    commands = parser.add_subparsers(dest="command", required=True)
    making = commands.add_parser("build", help="build both images into an OCI image layout")
    making.add_argument("--out", type=Path, default=Path("images-out"), help="the layout's folder (made anew)")
    making.add_argument("--tag", default=_version(), help="the images' tag (default: kilocard's version)")
    commands.add_parser("lock", help=f"resolve and hash-pin the venv's wheels into {build.LOCK}")
    args = parser.parse_args(argv)
    if args.command == "lock":
        build.lock()
        print(build.LOCK)
        return 0
    if args.out.exists():
        print(f"python -m images: {args.out} exists; give a new folder", file=sys.stderr)
        return 2
    for name, digest in build.build(args.out, args.tag).items():
        print(f"{name}\t{digest}")
    return 0


def _version() -> str:
    import tomllib

    return str(tomllib.loads((build.SOURCE / "pyproject.toml").read_text())["project"]["version"])


if __name__ == "__main__":
    sys.exit(main())
