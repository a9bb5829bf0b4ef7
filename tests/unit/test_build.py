import argparse

import pytest

from testbed import build

GOMOD = """module k8s.io/kubernetes

go 1.26.0

require (
	k8s.io/api v0.0.0
	github.com/foo/bar v1.2.3
)

replace (
	k8s.io/api => ./staging/src/k8s.io/api
	k8s.io/cri-streaming => ./staging/src/k8s.io/cri-streaming
	k8s.io/kube-openapi => k8s.io/kube-openapi v0.0.0-2026
)
"""


def test_staging_modules_come_from_the_replace_block():
    assert build.staging_modules(GOMOD) == ["k8s.io/api", "k8s.io/cri-streaming"]


def test_go_directive():
    assert build.go_directive(GOMOD) == "1.26.0"
    with pytest.raises(build.BuildError):
        build.go_directive("module x\n")


def test_missing_go_toolchain_is_one_clear_line(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(build.BuildError) as err:
        build.find_go()
    assert str(err.value) == "the Go toolchain ('go') is not on PATH: install Go >= 1.26 to build the testbed binaries"


def test_build_without_go_fails_before_touching_the_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setenv("KILOCARD_CACHE", str(tmp_path / "cache"))
    with pytest.raises(build.BuildError, match="Go toolchain"):
        build.build(say=lambda _m: None)
    assert not (tmp_path / "cache" / "bin").exists()


def test_cache_is_keyed_by_version(monkeypatch, tmp_path):
    monkeypatch.setenv("KILOCARD_CACHE", str(tmp_path))
    assert build.bin_dir(build.K8S) == tmp_path / "bin" / f"k8s-{build.K8S.version}"
    assert build.binary("kube-scheduler") == tmp_path / "bin" / f"k8s-{build.K8S.version}" / "kube-scheduler"
    assert set(build.missing_binaries()) == {b for c in build.COMPONENTS for b in c.binaries}
    # helm is built beside them for the chart's tests, but a testbed does not wait for it.
    assert build.binary("helm") == tmp_path / "bin" / f"helm-{build.HELM.version}" / "helm"
    assert "helm" not in build.missing_binaries()


def test_a_patched_component_is_cached_apart_from_the_upstream_build(monkeypatch, tmp_path):
    monkeypatch.setenv("KILOCARD_CACHE", str(tmp_path))
    assert build.bin_dir(build.KWOK) == tmp_path / "bin" / f"kwok-{build.KWOK.version}-{build.KWOK.patch}"


def test_the_kwok_heap_fix_goes_at_the_top_of_push_or_the_build_says_kwok_moved(tmp_path):
    heap = tmp_path / "heap.go"
    heap.write_text("package heap\n\n" + build.KWOK_HEAP_PUSH + "\n\tentry := 1\n}\n")
    build.fix_kwok_heap(heap)
    body = heap.read_text().split(build.KWOK_HEAP_PUSH)[1]
    assert body.startswith(build.KWOK_HEAP_FIX) and body.endswith("\n\tentry := 1\n}\n")
    heap.write_text("package heap\n\nfunc (h *Heap[K, T]) Push(k K, v T) {}\n")
    with pytest.raises(build.BuildError, match="expected one 'func .*kwok changed"):
        build.fix_kwok_heap(heap)


def test_a_tool_is_built_the_first_time_it_is_asked_for_and_found_after(monkeypatch, tmp_path):
    monkeypatch.setenv("KILOCARD_CACHE", str(tmp_path))
    asked: list[tuple] = []

    def build_it(components, say=print):
        asked.append(components)
        for c in components:
            (build.bin_dir(c)).mkdir(parents=True)
            for name in c.binaries:
                (build.bin_dir(c) / name).write_text("")

    monkeypatch.setattr(build, "build", build_it)
    assert build.ensure(build.HELM, say=lambda _m: None) == build.bin_dir(build.HELM)
    assert build.ensure(build.HELM, say=lambda _m: None) == build.bin_dir(build.HELM)
    assert asked == [(build.HELM,)]  # once: the second time it is there


def test_the_testbed_build_is_the_testbeds_binaries_and_all_adds_the_tests_tools(monkeypatch):
    from testbed import cli

    built: list[tuple] = []
    monkeypatch.setattr(build, "build", lambda components, force=False, say=print: built.append(components))
    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    for argv in (["build"], ["build", "--all"]):
        args = parser.parse_args(argv)
        args.handler(args)
    assert built == [build.COMPONENTS, build.COMPONENTS + build.TOOLS]
