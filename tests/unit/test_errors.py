"""One error root: every error kilocard raises for the user is a KilocardError, and the tree
chaos/errors.py draws names every one of them."""

import importlib
import pkgutil

import chaos
import probes
from chaos import errors
from probes.errors import NoData, ProbeError


def every_subclass(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from every_subclass(sub)


def test_the_drawn_tree_names_every_error_there_is():
    for package in (chaos, probes):
        for module in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
            importlib.import_module(module.name)
    import testbed.build
    import testbed.cluster  # noqa: F401 - its errors are in the tree too

    drawn = {line.strip(" │├└─").split()[0] for line in errors.__doc__.splitlines() if "──" in line}
    found = {cls.__name__ for cls in every_subclass(errors.KilocardError) if not cls.__module__.startswith("tests")}
    assert found <= drawn, f"errors missing from chaos/errors.py's tree: {sorted(found - drawn)}"
    assert drawn <= found, f"drawn but not raised anywhere: {sorted(drawn - found)}"


def test_a_probe_that_cannot_judge_is_a_user_facing_error_with_the_failed_exit():
    assert issubclass(ProbeError, errors.KilocardError) and issubclass(NoData, ProbeError)
    assert errors.exit_code(NoData("prometheus did not answer")) == errors.Exit.FAILED
