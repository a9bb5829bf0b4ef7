"""The `kilocard` command line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import NoReturn

from chaos.errors import KilocardError, SpecError


class Parser(argparse.ArgumentParser):
    """argparse that reports a bad flag as one line, `kilocard: <what>`, exit 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"kilocard: {message}\n")


def build_parser() -> Parser:
    parser = Parser(prog="kilocard", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    testbed = commands.add_parser("testbed", help="the local thousand-card testbed (build, up, down, status)")
    # The testbed is a separate package: loaded only for this command (the toolkit never needs it).
    from testbed import cli as testbed_cli

    testbed_cli.add_arguments(testbed)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.handler(args) or 0)
    except SpecError as exc:
        print(f"kilocard: {exc}", file=sys.stderr)
        return 2
    except KilocardError as exc:
        print(f"kilocard: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("kilocard: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
