"""Built-in load's client (chaos.load), without a server: the seeded open-loop schedule, OpenAI's
event stream, TTFT/TPOT arithmetic, percentiles, saturation counted as errors, and bad input on the
command line and in an experiment's load block refused with exit 2, naming the flag or field."""

import json
import random
import subprocess
import sys
import threading

import numpy as np
import pytest
import yaml

from chaos import fields, load, run
from chaos.cli import main
from chaos.errors import SpecError

SPEC = {"model": "m", "qps": 10, "prompt_tokens": 8, "output_tokens": 4}


def test_arrivals_are_a_seeded_poisson_process_at_the_rate():
    first = list(load.arrivals(5.0, seed=7, duration=2000))
    assert first == list(load.arrivals(5.0, seed=7, duration=2000))
    assert first != list(load.arrivals(5.0, seed=8, duration=2000))
    assert len(first) == pytest.approx(10_000, rel=0.03)
    gaps = np.diff([0.0, *first])
    assert gaps.mean() == pytest.approx(0.2, rel=0.03)
    assert gaps.std() / gaps.mean() == pytest.approx(1.0, abs=0.05)  # exponential gaps: not paced, not bursty
    assert all(0 < t < 2000 for t in first) and first == sorted(first)
    endless = load.arrivals(5.0, seed=7)
    assert [next(endless) for _ in range(len(first))] == first


def feed(stream, lines):
    for at, line in lines:
        stream.feed(line, at)
    return stream


def chunk(text, api="completions"):
    choice = {"delta": {"content": text}} if api == "chat" else {"text": text}
    return f"data: {json.dumps({'choices': [{'index': 0, **choice}]})}\n".encode()


def test_the_event_stream_is_read_as_openai_sends_it():
    stream = feed(load.Stream("chat"), [
        (0.05, b": ping\n"), (0.05, b"\n"),  # a comment, and a blank line with no event before it
        (0.10, b'data: {"choices": [{"delta": {"role": "assistant", "content": ""}}]}\n'), (0.10, b"\n"),
        (0.20, chunk("Hel", "chat")), (0.20, b"\r\n"),
        (0.25, b"event: message\n"), (0.25, b"id: 3\n"), (0.30, chunk("lo", "chat")), (0.30, b"\n"),
        (0.40, b'data: {"choices": [],\n'), (0.40, b'data:  "usage": {"completion_tokens": 3}}\n'),  # one event, two lines
        (0.40, b"\n"), (0.41, b"data: [DONE]\n"), (0.41, b"\n")])
    assert (stream.first, stream.last, stream.chunks, stream.tokens, stream.done) == (0.20, 0.30, 2, 3, True)
    plain = feed(load.Stream("completions"), [(0.1, chunk(" a")), (0.1, b"\n"), (0.2, b"data:[DONE]\n"), (0.2, b"\n")])
    assert (plain.first, plain.tokens, plain.done) == (0.1, 1, True)


@pytest.mark.parametrize("data, kind", [(b"data: {not json\n", "bad_stream"), (b"data: [1, 2]\n", "bad_stream"),
                                        (b'data: {"error": {"message": "overloaded"}}\n', "stream_error")])
def test_a_stream_that_is_not_openai_s_or_says_it_failed_is_an_error_of_its_kind(data, kind):
    stream = load.Stream("completions")
    stream.feed(data, 0.1)
    with pytest.raises(load.BadStream) as err:
        stream.feed(b"\n", 0.1)
    assert err.value.kind == kind


def test_ttft_is_the_first_content_chunk_and_tpot_the_gaps_after_it():
    lines = [(0.1, b'data: {"choices": [{"text": ""}]}\n'), (0.1, b"\n")]  # no content: not the first token
    lines += [(0.25 + 0.05 * i, chunk(" w")) for i in range(5)]
    lines = [x for t, line in lines for x in ((t, line), (t, b"\n"))]
    stream = feed(load.Stream("completions"), lines)
    assert stream.first == 0.25 and stream.tokens == 5
    assert load.tpot(stream.first, stream.last, stream.tokens) == pytest.approx(0.05)
    assert load.tpot(0.3, 0.3, 1) is None


def test_percentiles_are_numpy_s_linear_ones():
    values = list(np.random.default_rng(3).exponential(0.2, 501))
    for q in (0.0, 0.5, 0.95, 0.99, 1.0):
        assert load.percentile(values, q) == pytest.approx(float(np.percentile(values, q * 100)))
    assert load.percentile([], 0.95) is None
    assert load.percentile([4.0], 0.99) == 4.0


def test_the_summary_counts_errors_by_kind_and_judges_only_what_was_answered():
    answered = [load.Sample(sent=i / 10, status=200, ttft=0.01 * (i + 1), tpot=0.02) for i in range(20)]
    failed = [load.Sample(sent=0.5, status=503, error="http_503"), load.Sample(sent=1.5, error="timeout"),
              load.Sample(sent=1.6, error=load.SATURATED, late=0.3), load.Sample(sent=1.7, error=load.SATURATED)]
    found = load.summary(answered + failed, 2.0)
    assert {k: found[k] for k in ("requests", "ok", "errors", "statuses", "offered_qps", "achieved_qps")} == {
        "requests": 24, "ok": 20, "errors": {"client_saturated": 2, "http_503": 1, "timeout": 1},
        "statuses": {"200": 20, "503": 1}, "offered_qps": 12.0, "achieved_qps": 10.0}
    assert found["ttft_seconds"] == {"p50": 0.105, "p95": 0.1905, "p99": 0.1981}
    assert found["tpot_seconds"]["p95"] == 0.02
    series = load.series(answered + failed, 2.0)
    assert [(s["second"], s["sent"], s["errors"]) for s in series] == [(0, 11, 1), (1, 13, 3)]
    assert series[1]["ttft_p95"] == pytest.approx(0.1955)


class Stuck:
    """A server that answers nothing until let go: every request stays in flight."""

    def __init__(self):
        self.go, self.sent, self.lock = threading.Event(), 0, threading.Lock()

    def send(self, text):
        with self.lock:
            self.sent += 1
        self.go.wait(5)
        return load.Sample(status=200, ttft=0.1, tpot=0.01)

    def close(self):
        pass


def test_requests_over_the_cap_count_as_client_saturated_and_are_not_queued():
    spec = load.LoadSpec("m", qps=200, prompt_tokens=4, output_tokens=4, duration_seconds=0.5, max_in_flight=3)
    client = Stuck()
    running = load.Load(spec, client).start()
    running.wait()  # the whole duration passes with three requests in flight: the schedule did not wait
    assert client.sent == 3
    client.go.set()
    found = running.stop()["summary"]
    assert found["ok"] == 3 and found["errors"] == {"client_saturated": found["requests"] - 3}
    assert found["requests"] == len(list(load.arrivals(200, 0, 0.5)))


def test_a_halted_load_stops_offering_and_says_what_it_measured():
    spec = load.LoadSpec("m", qps=50, prompt_tokens=4, output_tokens=4)  # no duration: until stopped
    client = Stuck()
    client.go.set()
    running = load.Load(spec, client).start()
    threading.Timer(0.4, running.halted.set).start()
    running.wait()
    record = running.stop()
    assert 0.35 < record["summary"]["seconds"] < 1.0
    assert record["summary"]["ok"] == record["summary"]["requests"] == client.sent > 0
    assert record["spec"] == {"model": "m", "qps": 50, "prompt_tokens": 4, "output_tokens": 4,
                              "url": "http://127.0.0.1:6449", "api": "completions", "seed": 0,
                              "max_in_flight": 256, "timeout_seconds": 60.0, "prefix_share": 0.0,
                              "burst_factor": 1.0, "burst_seconds": 0.0, "burst_every_seconds": 60.0}


def test_the_token_is_read_from_where_it_is_said_to_be_and_never_recorded(tmp_path, monkeypatch):
    monkeypatch.setenv("LLM_TOKEN", "s3cret-value")
    spec = load.parse({**SPEC, "token_env": "LLM_TOKEN"}, "x")
    assert spec.token == "s3cret-value" and "s3cret" not in repr(spec) + json.dumps(spec.to_json())
    assert load.Client(spec).headers["Authorization"] == "Bearer s3cret-value"
    (tmp_path / "token").write_text("from-a-file\n")
    assert load.parse({**SPEC, "token_file": str(tmp_path / "token")}, "x").token == "from-a-file"


@pytest.mark.parametrize("block, message", [
    ({**SPEC, "qps": -1}, "extensions[0].load.qps: expected a number above 0 to 10000, got -1"),
    ({**SPEC, "qsp": 1}, "extensions[0].load: unknown field 'qsp'; expected one of "),
    ({k: v for k, v in SPEC.items() if k != "model"}, "extensions[0].load.model: required"),
    ({**SPEC, "url": "http://vllm:8000/v1"},
     "extensions[0].load.url: expected an http:// or https:// URL of the API's root (without /v1), got "),
    ({**SPEC, "api": "embeddings"}, "extensions[0].load.api: expected one of completions, chat, got 'embeddings'"),
    ({**SPEC, "token_env": "KILOCARD_UNSET_TOKEN"}, "extensions[0].load.token_env: expected an environment variable "
                                                    "that holds the token (it is unset or empty), got "),
    ({**SPEC, "duration_seconds": 5}, "extensions[0].load: unknown field 'duration_seconds'"),  # it lasts the run
    ("fast", "extensions[0].load: expected a mapping, got 'fast'"),
])
def test_a_bad_load_block_is_invalid_input_naming_the_field(tmp_path, block, message):
    path = tmp_path / "e.yaml"
    path.write_text(yaml.safe_dump({
        "title": "t", "description": "d", "extensions": [{"name": "kilocard", "load": block}],
        "method": [{"type": "action", "name": "a", "provider": {"type": "python", "module": "chaos.actions",
                                                                 "func": "revert_faults"}}]}))
    with pytest.raises(SpecError) as err:
        run.load(path)
    assert str(err.value).startswith(f"{path}: {message}"), err.value
    assert main(["validate", str(path)]) == 2


def test_a_load_block_with_variables_is_read_once_they_are_substituted(tmp_path):
    path = tmp_path / "e.yaml"
    path.write_text(yaml.safe_dump({
        "title": "t", "description": "d", "configuration": {"endpoint": "http://vllm:8000"},
        "extensions": [{"name": "kilocard", "expect": {"exit": 0}, "load": {**SPEC, "url": "${endpoint}"}}],
        "method": [{"type": "action", "name": "a", "provider": {"type": "python", "module": "chaos.actions",
                                                                 "func": "revert_faults"}}]}))
    experiment = run.load(path)
    assert experiment.load.url == "http://vllm:8000" and experiment.expect.exit == 0


def test_the_documented_example_is_a_load():
    from chaos import schemas

    example = schemas.LOAD["examples"][0]
    assert fields.errors(schemas.LOAD, example) == [] and load.parse(example, "load").qps == 10


@pytest.mark.parametrize("block", [SPEC, {**SPEC, "qps": 0}, {**SPEC, "url": "https://x/llm"}, {**SPEC, "url": "x"},
                                   {**SPEC, "url": "http://x/v1/"}, {**SPEC, "api": "chat", "seed": 3},
                                   {**SPEC, "max_in_flight": 0}, {**SPEC, "timeout_seconds": 3600},
                                   {**SPEC, "prompt_tokens": 1.5}, {**SPEC, "token_env": None},
                                   {**SPEC, "token_env": "HOME", "token_file": "/etc/hostname"}, {"model": "m"}])
def test_the_load_block_and_its_documented_schema_agree(block):
    from jsonschema import Draft202012Validator

    from chaos import schemas

    by_schema = not list(Draft202012Validator(schemas.LOAD).iter_errors(block))
    try:
        load.parse(block, "load")
    except SpecError:
        by_parser = False
    else:
        by_parser = True
    assert by_schema == by_parser, block


def kilocard(*args):
    return subprocess.run([sys.executable, "-m", "chaos.cli", "load", *args], capture_output=True, text=True,
                          timeout=60)


FLAGS = ["--model", "m", "--qps", "20", "--prompt-tokens", "8", "--output-tokens", "4", "--duration", "0.5"]


@pytest.mark.parametrize("args, message", [
    (["--qps", "0"], "kilocard: --qps: expected a number above 0 to 10000, got 0.0\n"),
    (["--qps", "fast"], "kilocard: argument --qps: invalid float value: 'fast'\n"),
    (["--max-in-flight", "0"], "kilocard: --max-in-flight: expected an integer from 1 to 10000, got 0\n"),
    (["--timeout", "-1"], "kilocard: --timeout: expected a number above 0 to 3600, got -1.0\n"),
    (["--url", "vllm:8000"], "kilocard: --url: expected an http:// or https:// URL of the API's root (without "
                             "/v1), got 'vllm:8000'\n"),
    (["--token-env", "KILOCARD_UNSET_TOKEN"], "kilocard: --token-env: expected an environment variable that holds "
                                              "the token (it is unset or empty), got 'KILOCARD_UNSET_TOKEN'\n"),
    (["--journal", "/nonexistent/j.json"], "kilocard: --journal: no such folder /nonexistent\n"),
])
def test_bad_flags_are_one_line_errors_and_exit_2(args, message):
    result = kilocard(*FLAGS, *args)
    assert result.returncode == 2 and result.stdout == ""
    # argparse's own errors (a value of the wrong type) come after the command's usage line.
    said = result.stderr.split("\n")
    assert result.stderr == message or (said[0].startswith("usage: kilocard load ") and result.stderr.endswith(
        "\n" + message)), result.stderr


def test_exit_1_when_no_request_was_answered(tmp_path):
    result = kilocard(*FLAGS, "--url", "http://127.0.0.1:9", "--json", "--journal", str(tmp_path / "j.json"))
    assert result.returncode == 1, result.stderr
    found = json.loads(result.stdout)
    assert found["ok"] == 0 and found["errors"] == {"connection_refused": found["requests"]}
    assert json.loads((tmp_path / "j.json").read_text())["kilocard"]["load"]["summary"] == found


def test_a_burst_multiplies_the_rate_for_its_seconds_of_every_period_and_a_steady_load_keeps_its_arrivals():
    spec = load.parse({"model": "m", "qps": 10, "prompt_tokens": 4, "output_tokens": 4, "burst_factor": 4,
                       "burst_seconds": 10, "burst_every_seconds": 40}, "load")
    times = list(load.arrivals(spec.peak_qps, 3, 4000, spec.rate))
    bursting = sum(1 for t in times if t % 40 < 10)
    # 100 bursts of 10 s at 40/s, and 100 quiet 30 s at 10/s: 40,000 and 30,000 expected.
    assert bursting == pytest.approx(40_000, rel=0.03) and len(times) - bursting == pytest.approx(30_000, rel=0.03)
    assert spec.peak_qps == 40
    steady = load.LoadSpec("m", qps=5, prompt_tokens=4, output_tokens=4)
    assert steady.peak_qps == 5 and steady.rate(3.0) == 5


def test_a_prefix_share_gives_every_prompt_the_same_prefix_and_the_rest_anew():
    rng = random.Random(1)
    shared = load.prompt(random.Random("7/prefix"), 750)
    first, second = (load.prompt(rng, 1000, shared).split() for _ in range(2))
    assert len(first) == len(second) == 1000
    assert first[:750] == second[:750] == shared.split() and first[750:] != second[750:]


@pytest.mark.parametrize(("extra", "said"), [
    ({"burst_factor": 3}, "load.burst_factor: a burst needs both a factor above 1 and burst_seconds above 0"),
    ({"burst_seconds": 5}, "load.burst_factor: a burst needs both"),
    ({"burst_factor": 3, "burst_seconds": 60}, "load.burst_seconds: expected less than burst_every_seconds (60)"),
    ({"prefix_share": 1}, "load.prefix_share: expected a number from 0 to 0.99"),
])
def test_a_burst_or_a_prefix_share_out_of_bounds_is_refused_naming_the_field(extra, said):
    with pytest.raises(SpecError) as refused:
        load.parse({"model": "m", "qps": 1, "prompt_tokens": 4, "output_tokens": 4, **extra}, "load")
    assert said in str(refused.value)
