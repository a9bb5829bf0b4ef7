"""image_pulls_failed's classes of wrong verdicts, one each: a registry outage that the
replacement never met must not read as a rehearsed cold start."""

from probes.pulls import PodAt, judge

T0 = 1_000.0
OLD = PodAt("u0", "m-old", True)


def test_a_replacement_that_failed_its_pull_before_ready_passes_and_says_when():
    v = judge([(T0, [OLD]), (T0 + 1, [OLD, PodAt("u1", "m-new", False, "ImagePullBackOff")]),
               (T0 + 30, [OLD, PodAt("u1", "m-new", True)])], "m", T0)
    assert v.ok and v.details["failed_pulls"] == {"m-new": 1.0}, v.reason


def test_a_replacement_ready_without_a_failed_pull_fails_naming_it():
    # Its image was on its node: the outage was never met, whatever the recovery's figures say.
    v = judge([(T0, [OLD]), (T0 + 1, [OLD, PodAt("u1", "m-new", False, "ContainerCreating")]),
               (T0 + 20, [OLD, PodAt("u1", "m-new", True)])], "m", T0)
    assert not v.ok and v.details["outcome"] == "pulled" and v.details["pulled"] == ["m-new"], v.reason


def test_one_replacement_that_skipped_the_outage_fails_even_beside_one_that_met_it():
    v = judge([(T0, [OLD]), (T0 + 1, [OLD, PodAt("u1", "a", False, "ErrImagePull"), PodAt("u2", "b", False)]),
               (T0 + 9, [OLD, PodAt("u1", "a", False, "ImagePullBackOff"), PodAt("u2", "b", True)])], "m", T0)
    assert not v.ok and v.details["pulled"] == ["b"], v.reason


def test_a_wait_after_ready_is_a_restart_not_a_failed_pull():
    v = judge([(T0, [OLD]), (T0 + 1, [OLD, PodAt("u1", "n", True)]),
               (T0 + 5, [OLD, PodAt("u1", "n", False, "ImagePullBackOff")])], "m", T0)
    assert v.details["outcome"] == "pulled", v.reason


def test_nothing_replaced_is_no_pass_and_a_pod_there_at_time_zero_is_no_replacement():
    assert judge([(T0, [OLD]), (T0 + 5, [OLD])], "m", T0).details["outcome"] == "none"
    # The old pod waiting on a pull was there before the fault: not the fault's.
    waiting_before = PodAt("u0", "m-old", False, "ImagePullBackOff")
    assert judge([(T0, [waiting_before]), (T0 + 5, [waiting_before])], "m", T0).details["outcome"] == "none"
    # A StatefulSet's replacement keeps its name: told apart by its uid.
    v = judge([(T0, [OLD]), (T0 + 2, [PodAt("u9", "m-old", False, "ErrImagePull")])], "m", T0)
    assert v.ok and v.details["failed_pulls"] == {"m-old": 2.0}, v.reason


def test_no_moment_is_unknown():
    v = judge([], "m", T0)
    assert not v.ok and v.details["outcome"] == "unknown"
