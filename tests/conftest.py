"""The order tests start in. xdist's workers (pyproject.toml) each take a block of the collection
and, once idle, steal the back half of the longest queue: a multi-minute scenario that happens to
start last keeps one worker busy while the others have nothing left. So tests marked
`long(seconds)` (about what `--durations` measured) start first, the longest first. A module whose
tests share a module-scoped fixture (a testbed of its own, a shared replica) carries the mark on the
module: all its tests weigh the same and, the sort being stable, stay together.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def weight(item: pytest.Item) -> float:
        mark = item.get_closest_marker("long")
        return -float(mark.args[0]) if mark else 0.0

    items.sort(key=weight)


@pytest.fixture(autouse=True)
def credentials_stay_in_their_test() -> Iterator[None]:
    """The CLI puts credentials and switches into the process's environment (KILOCARD_*), as a run
    should; in a test worker they would outlive the test and change what later tests judge (an
    insecure switch left set lets an untrusted certificate through). Each test gets them back as
    they were."""
    before = {name: value for name, value in os.environ.items() if name.startswith("KILOCARD_")}
    yield
    for name in [name for name in os.environ if name.startswith("KILOCARD_") and name not in before]:
        del os.environ[name]
    os.environ.update(before)
