"""Start-up and drain times from a model's shape, as annotations kwok's stages read."""

import pytest

from chaos.errors import SpecError
from testbed import fleet, timing


def workloads(objects):
    """The models' pod templates by workload (the endpoint picker, which loads nothing, apart)."""
    return {o["metadata"]["name"]: o["spec"]["template"] for o in objects if o["kind"] in ("Deployment", "StatefulSet")
            and "kilocard.io/model" in o["spec"]["template"]["metadata"]["labels"]}


def seconds(template, annotation):
    return int(template["metadata"]["annotations"][annotation].removesuffix("ms")) / 1000


def test_production_phases_follow_the_model_shape():
    objects = fleet.load("default", "nvidia.com/gpu")
    t = workloads(objects)
    big, group, small = (timing.startup(t[name]["metadata"]["labels"])
                         for name in ("llama-3-70b", "llama-3-405b-g0", "llama-2-7b"))
    assert big.pull == small.pull == 60  # one engine image
    assert big.load == pytest.approx(70.6 * 2 / 1.5)  # 141 GB of bf16 weights at 1.5 GB/s
    assert group.load == pytest.approx(405 / 2 / 1.5)  # FP8, each of the two pods loads its half
    assert big.warmup == pytest.approx(80 * 1.15) and small.warmup < big.warmup < group.warmup
    assert 200 < big.total < 300 and group.total > big.total > small.total  # minutes, as in production
    assert timing.slowest_start(objects, "production") == pytest.approx(group.total)
    # A stack's workload without the model's shape (a twin of a production cluster) starts at once.
    unshaped = {"kind": "Deployment", "spec": {"template": {"metadata": {"labels": {"app": "vllm"}}, "spec": {}}}}
    assert timing.slowest_start([unshaped], "production") == 0.0
    assert timing.slowest_start([*objects, unshaped], "production") == pytest.approx(group.total)


def test_default_is_production_compressed_and_fast_writes_nothing():
    objects = fleet.load("default", "nvidia.com/gpu")
    assert timing.stamp(objects, "fast") == objects
    prod, default = workloads(timing.stamp(objects, "production")), workloads(timing.stamp(objects, "default"))
    for name, template in prod.items():
        for annotation in (timing.PULL_ANNOTATION, timing.READY_ANNOTATION, timing.DRAIN_ANNOTATION):
            assert seconds(template, annotation) == pytest.approx(
                timing.DEFAULT_FACTOR * seconds(default[name], annotation), abs=0.01)
        assert template["spec"]["terminationGracePeriodSeconds"] == 130
        assert default[name]["spec"]["terminationGracePeriodSeconds"] == 13
        # The drain ends before the grace period does: the engine exits, it is not killed.
        assert seconds(template, timing.DRAIN_ANNOTATION) < 130
    big = prod["llama-3-70b"]
    assert seconds(big, timing.PULL_ANNOTATION) + seconds(big, timing.READY_ANNOTATION) == pytest.approx(
        timing.ready_after(big["metadata"]["labels"], "production"), abs=0.01)
    assert "annotations" not in workloads(objects)["llama-3-70b"]["metadata"]  # stamp copies
    # A router has no weights to load: Ready as soon as kwok takes it, on every profile.
    (epp,) = [o for o in timing.stamp(objects, "production") if o["metadata"]["name"] == "llama-3-8b-long-epp"]
    assert timing.PULL_ANNOTATION not in epp["spec"]["template"]["metadata"]["annotations"]


def test_a_drain_longer_than_the_grace_period_is_cut_at_the_grace_period():
    objects = fleet.only(fleet.load("default", "nvidia.com/gpu"), "llama-3-70b")
    for o in objects:
        if o["kind"] == "Deployment":
            o["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = 20
    (template,) = workloads(timing.stamp(objects, "production")).values()
    assert seconds(template, timing.DRAIN_ANNOTATION) == 20


@pytest.mark.parametrize(("label", "value", "message"), [
    ("kilocard.io/params-billions", "seventy", "pod label kilocard.io/params-billions must be a number"),
    ("kilocard.io/dtype", "float7", "kilocard.io/dtype 'float7' unknown"),
])
def test_a_bad_shape_label_is_named(label, value, message):
    objects = fleet.only(fleet.load("default", "nvidia.com/gpu"), "llama-3-70b")
    for o in objects:
        if o["kind"] == "Deployment":
            o["spec"]["template"]["metadata"]["labels"][label] = value
    with pytest.raises(SpecError, match=f"model llama-3-70b: {message}"):
        timing.stamp(objects, "default")
    with pytest.raises(SpecError, match="--timing: expected one of fast, default, production"):
        timing.stamp(objects, "slow")
