"""Built-in load: an OpenAI-compatible endpoint driven at a set rate, and measured from the client,
so that an experiment has traffic to judge where no production traffic flows.

Each request is a streaming `POST {url}/v1/completions` (or `/v1/chat/completions`) with `model`,
a prompt of about `prompt_tokens` tokens, `max_tokens: output_tokens` and `stream: true`, read as
OpenAI's server-sent events (`data: {json}` chunks, then `data: [DONE]`). Per request: TTFT (to
the first chunk with content), TPOT ((last - first) / (tokens - 1)), the HTTP status, and the kind
of error (`http_503`, `connection_reset`, `timeout`, ...).

Open loop, on purpose. Arrivals are a seeded Poisson process at `qps`, fixed in advance, so a slow
server does not slow the offered load. A closed loop (each client waits for its answer before it
sends again) sends less exactly when the server struggles, and so measures only what a struggling
server let through: coordinated omission, which hides the very queueing a fault causes. For the
same reason a request over `max_in_flight` is not queued behind the cap (the same omission, moved
into the client): it counts as an error, `client_saturated`. Latency counts from when a request was
sent; how far sends fell behind the schedule is reported apart (`late_p99_seconds`), so a client
starved of CPU shows as such instead of being blamed on the server.

While it runs, `running()` gives a probe in the same process (probes.chaostoolkit.client_errors_within)
what the clients have seen so far: each request's outcome, and when those still in flight were
sent; a request whose stream had begun when it failed is `aborted` (cut short).

A bearer token is read from an environment variable or a file, and never written anywhere.
"""

from __future__ import annotations

import http.client
import itertools
import json
import math
import os
import random
import re
import select
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

from chaos import __version__
from chaos.errors import SpecError
from chaos.fields import (
    API_ROOT,
    MODEL,
    choice,
    described,
    errors,
    filled,
    integer,
    mapping,
    not_both,
    number,
    optional,
    text,
)
from chaos.vocabulary import DEFAULT_PORT_BASE, local_testbed_openai, quiet_thread

APIS = {"completions": "/v1/completions", "chat": "/v1/chat/completions"}
SATURATED = "client_saturated"
QUANTILES = (0.5, 0.95, 0.99)
DEFAULT_MAX_IN_FLIGHT = 256
DEFAULT_TIMEOUT_SECONDS = 60.0
MAX_QPS = 10_000.0
MAX_IN_FLIGHT = 10_000
MAX_TIMEOUT_SECONDS = 3600.0
MAX_TOKENS = 131_072  # a long context window's worth, prompt or output
# Words that BPE tokenizers (GPT's, Llama's) read as one token each after a space: a prompt of n of
# them is about n tokens. Drawn anew for every request, so no prefix-cache hit flatters the TTFT.
_WORDS = ("the of and to in is that for it as was with be by on not he this are or his from at which but have an "
          "had they you were their one all we can her has there been if more when will would who so no").split()


@dataclass(frozen=True)
class LoadSpec:
    model: str
    qps: float
    prompt_tokens: int
    output_tokens: int
    url: str | None = None  # the API's root, without /v1; None: the local testbed's simulator
    api: str = "completions"
    duration_seconds: float | None = None  # None: until stopped (an experiment's load: its whole run)
    seed: int = 0
    max_in_flight: int = DEFAULT_MAX_IN_FLIGHT
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS
    token_env: str | None = None
    token_file: str | None = None
    token: str | None = field(default=None, repr=False)
    prefix_share: float = 0.0  # of each prompt, a prefix every request shares
    burst_factor: float = 1.0  # the rate's multiple during a burst
    burst_seconds: float = 0.0  # how long each burst lasts (0: none)
    burst_every_seconds: float = 60.0  # a burst starts at the load's start and then every this often

    def rate(self, at: float) -> float:
        """Requests per second `at` seconds from the start."""
        bursting = self.burst_seconds > 0 and at % self.burst_every_seconds < self.burst_seconds
        return self.qps * (self.burst_factor if bursting else 1.0)

    @property
    def peak_qps(self) -> float:
        return self.qps * (self.burst_factor if self.burst_seconds > 0 else 1.0)

    def to_json(self) -> dict[str, Any]:
        """What the journal keeps: where a token comes from, never the token."""
        return {k: v for k, v in asdict(self).items() if k != "token" and v is not None}


# The experiment's `load:` block (run._load); the command's flags add a duration.
SCHEMA = mapping(
    "load", "Traffic the experiment brings, in its `kilocard` extension, for a cluster no production traffic "
    "reaches: requests to an OpenAI-compatible endpoint (`POST {url}/v1/completions`, streamed) at `qps`, as a "
    "seeded Poisson process (open loop: a slow server does not slow it), from before the steady-state hypothesis "
    "until after the revert. Each is measured from the client (TTFT, TPOT, HTTP status, error kind); a request "
    "over `max_in_flight` counts as an error, `client_saturated`. The journal keeps the summary (P50/P95/P99 TTFT "
    "and TPOT, errors by kind, achieved QPS) and a series per second under `kilocard.load`. `kilocard load` "
    "offers the same from the command line.",
    {"url": described({"type": "string", "pattern": API_ROOT}, "the API's root, without /v1 (default: the local "
                      f"testbed's simulator, its port base + 6: http://127.0.0.1:{DEFAULT_PORT_BASE + 6} on the "
                      "default ports)", None, "http://vllm.inference:8000"),
     "model": text("the model's served name", example=MODEL),
     "qps": number(0, MAX_QPS, "requests per second offered", example=10, above=True),
     "prompt_tokens": integer(1, MAX_TOKENS, "about this many prompt tokens a request", example=1024),
     "output_tokens": integer(1, MAX_TOKENS, "max_tokens of each request", example=128),
     "api": choice(APIS, "completions (/v1/completions) or chat (/v1/chat/completions)", LoadSpec.api),
     "seed": integer(0, 2**62, "seed of the arrivals and the prompts", LoadSpec.seed),
     "max_in_flight": integer(1, MAX_IN_FLIGHT, "requests open at once; one more counts as an error",
                              LoadSpec.max_in_flight),
     "timeout_seconds": number(0, MAX_TIMEOUT_SECONDS, "seconds a request may take in all", LoadSpec.timeout_seconds,
                               above=True),
     "prefix_share": number(0, 0.99, "the share of each prompt that is one prefix every request shares (a system "
                            "prompt, a document many ask about): what prefix caching computes and holds once",
                            LoadSpec.prefix_share),
     "burst_factor": number(1, 100, "the rate's multiple during a burst", LoadSpec.burst_factor),
     "burst_seconds": number(0, 86_400, "how long each burst lasts (0: no bursts)", LoadSpec.burst_seconds),
     "burst_every_seconds": number(0, 86_400, "a burst starts with the load and then every this many seconds",
                                   LoadSpec.burst_every_seconds, above=True),
     "token_env": optional(text("an environment variable that holds a bearer token (never logged)",
                                example="LLM_API_TOKEN")),
     "token_file": optional(text("a file that holds a bearer token (never logged)",
                                 example="/var/run/secrets/llm/token"))},
    required=["model", "qps", "prompt_tokens", "output_tokens"],
    rules=[not_both("give either token_env or token_file, not both", "token_env", "token_file")],
    example={"url": "http://vllm.inference:8000", "model": MODEL, "qps": 10, "prompt_tokens": 1024,
             "output_tokens": 128})
_FLAGS = {**SCHEMA, "properties": {**SCHEMA["properties"], "duration_seconds": number(
    0, 86_400, "seconds to send for", above=True)}}


def _flag(name: str) -> str:
    return f"--{name.removesuffix('_seconds').replace('_', '-')}"


def _flagged(message: str) -> str:
    """'max_in_flight: expected ...' -> '--max-in-flight: expected ...' (a rule across fields names none)."""
    name, _, rest = message.partition(": ")
    return f"{_flag(name)}: {rest}" if name.isidentifier() else message


def parse(raw: Any, where: str, flags: bool = False) -> LoadSpec:
    """A load from plain data: an experiment's `load:` block, or the command's flags (`flags`: the
    errors name them, and a duration is read). SpecError names every bad field; a token is read
    from where it is said to be, so a missing one is found before anything is sent."""
    schema = _FLAGS if flags else SCHEMA
    said = errors(schema, raw, "" if flags else where)
    if flags:
        said = [_flagged(m) for m in said]
    if said:
        raise SpecError("\n".join(said))
    values = filled(schema, raw)
    name = _flag if flags else lambda field: f"{where}.{field}"
    if values["url"] is not None:
        try:
            port_ok = urlsplit(values["url"]).port != 0  # what the pattern cannot say: a port from 1 to 65535
        except ValueError:
            port_ok = False
        if not port_ok:
            raise SpecError(f"{name('url')}: expected an http:// or https:// URL of the API's root (without /v1), got "
                            f"{values['url']!r}")
        values["url"] = values["url"].rstrip("/")
    spec = LoadSpec(**values)
    if spec.burst_seconds >= spec.burst_every_seconds:
        raise SpecError(f"{name('burst_seconds')}: expected less than burst_every_seconds "
                        f"({spec.burst_every_seconds:g}), got {spec.burst_seconds:g}")
    if (spec.burst_factor > 1) != (spec.burst_seconds > 0):
        raise SpecError(f"{name('burst_factor')}: a burst needs both a factor above 1 and burst_seconds above 0, got "
                        f"burst_factor {spec.burst_factor:g} and burst_seconds {spec.burst_seconds:g}")
    return replace(spec, token=_token(name, spec.token_env, spec.token_file))


def namespace_of(url: str | None) -> str | None:
    """The namespace an endpoint's URL names (the testbed's gateway: /namespaces/{ns}), else None
    (the local testbed's simulator root, when no URL is given, names none)."""
    found = re.search(r"/namespaces/([a-z0-9][-a-z0-9]*)$", urlsplit(url or "").path)
    return found[1] if found else None


def _token(name: Callable[[str], str], env: str | None, path: str | None) -> str | None:
    if env is not None:
        token = os.environ.get(env, "").strip()
        if not token:
            raise SpecError(f"{name('token_env')}: expected an environment variable that holds the token (it is "
                            f"unset or empty), got {env!r}")
        return token
    if path is not None:
        try:
            token = Path(path).read_text().strip()
        except (OSError, UnicodeDecodeError):
            token = ""
        if not token:
            raise SpecError(f"{name('token_file')}: expected a readable file that holds the token, got {path!r}")
        return token
    return None


# --- what is sent ---------------------------------------------------------------------------------
def arrivals(qps: float, seed: int, duration: float | None = None,
             rate: Callable[[float], float] | None = None) -> Iterator[float]:
    """Seconds from the start at which requests are sent: a Poisson process at `qps` (exponential
    gaps), the same for the same seed; endless without a duration. With `rate` (at most `qps` at
    any time) the process is thinned to it: an arrival at t is kept with probability rate(t)/qps,
    which makes a Poisson process of that varying rate."""
    rng = random.Random(seed)
    at = rng.expovariate(qps)
    while duration is None or at < duration:
        if rate is None or rng.random() * qps < rate(at):
            yield at
        at += rng.expovariate(qps)


def prompt(rng: random.Random, tokens: int, prefix: str = "") -> str:
    """About `tokens` tokens: the shared `prefix`, then common words drawn anew."""
    own = tokens - len(prefix.split())
    return " ".join(filter(None, (prefix, " ".join(rng.choices(_WORDS, k=own)))))


def body(spec: LoadSpec, text: str) -> bytes:
    request: dict[str, Any] = {"model": spec.model, "max_tokens": spec.output_tokens, "stream": True,
                               "stream_options": {"include_usage": True}}  # the tokens counted by the server
    if spec.api == "chat":
        request["messages"] = [{"role": "user", "content": text}]
    else:
        request["prompt"] = text
    return json.dumps(request).encode()


# --- what comes back ------------------------------------------------------------------------------
class BadStream(Exception):
    """The answer is not OpenAI's event stream, or the stream says it failed; `kind` says which."""

    def __init__(self, kind: str) -> None:
        super().__init__(kind)
        self.kind = kind


def content(chunk: dict[str, Any], api: str) -> str:
    """The text one chunk carries: completions' `choices[0].text`, chat's `choices[0].delta.content`
    (or a reasoning model's `reasoning_content`, which are tokens too)."""
    choices = chunk.get("choices")
    first = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else {}
    if api == "chat":
        delta = first.get("delta") if isinstance(first.get("delta"), dict) else {}
        text = delta.get("content") or delta.get("reasoning_content")
    else:
        text = first.get("text")
    return text if isinstance(text, str) else ""


class Stream:
    """One response's server-sent events, fed line by line with the time each line arrived: when
    the first and last chunks with content came, how many tokens, and whether `[DONE]` did."""

    def __init__(self, api: str) -> None:
        self.api = api
        self.first: float | None = None
        self.last: float | None = None
        self.chunks = 0
        self.usage: int | None = None  # completion_tokens, when the server counts them
        self.done = False
        self._data: list[str] = []

    def feed(self, line: bytes, at: float) -> None:
        text = line.decode("utf-8", "replace").rstrip("\r\n")
        if not text and self._data:  # a blank line ends an event
            data, self._data = "\n".join(self._data), []
            self._event(data, at)
        elif text.startswith("data:"):
            self._data.append(text[5:].removeprefix(" "))
        # Other fields (event:, id:, retry:) and comments (": ping") carry nothing measured.

    def _event(self, data: str, at: float) -> None:
        if data == "[DONE]":
            self.done = True
            return
        try:
            chunk = json.loads(data)
        except ValueError:
            raise BadStream("bad_stream") from None
        if not isinstance(chunk, dict):
            raise BadStream("bad_stream")
        if chunk.get("error"):
            raise BadStream("stream_error")
        usage = chunk.get("usage")
        if isinstance(usage, dict) and isinstance(usage.get("completion_tokens"), int):
            self.usage = usage["completion_tokens"]
        if content(chunk, self.api):
            self.chunks += 1
            self.first = at if self.first is None else self.first
            self.last = at

    @property
    def tokens(self) -> int:
        """The server's count when it gives one (a chunk may carry several tokens), else the chunks."""
        return self.usage if self.usage is not None else self.chunks


def tpot(first: float, last: float, tokens: int) -> float | None:
    """Time per output token after the first: (last - first) / (tokens - 1); None under two tokens."""
    return (last - first) / (tokens - 1) if tokens > 1 else None


@dataclass(frozen=True)
class Sample:
    """One request as the client saw it; `error` None: it was answered in full."""

    sent: float = 0.0  # seconds from the load's start
    late: float = 0.0  # how far behind its scheduled arrival it was sent
    status: int | None = None
    error: str | None = None
    ttft: float | None = None  # with an error: its stream had begun, and was cut short
    tpot: float | None = None

    @property
    def aborted(self) -> bool:
        return self.error is not None and self.ttft is not None


class Sender(Protocol):
    def send(self, text: str) -> Sample: ...

    def close(self) -> None: ...


class Client:
    """Sends one request and measures it, over one keep-alive connection per worker thread."""

    def __init__(self, spec: LoadSpec) -> None:
        parts = urlsplit(spec.url or local_testbed_openai())  # a Client made without a Load
        self.spec = spec
        self.connection = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        self.host, self.port = parts.hostname or "", parts.port
        self.path = parts.path.rstrip("/") + APIS[spec.api]
        self.headers = {"Content-Type": "application/json", "Accept": "text/event-stream",
                        "User-Agent": f"kilocard/{__version__}",
                        **({"Authorization": f"Bearer {spec.token}"} if spec.token else {})}
        self._local = threading.local()
        self._opened: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()

    def send(self, text: str) -> Sample:
        conn = self._connection()
        started = time.monotonic()
        deadline = started + self.spec.timeout_seconds
        status = None
        stream: Stream | None = None
        try:
            if conn.sock is not None:  # a reused connection: its last read's deadline is not this one's
                conn.sock.settimeout(self.spec.timeout_seconds)
            conn.request("POST", self.path, body(self.spec, text), self.headers)
            response = conn.getresponse()
            status = response.status
            if status != 200 or "text/event-stream" not in (response.getheader("Content-Type") or ""):
                response.read()
                return Sample(status=status, error=f"http_{status}" if status != 200 else "bad_stream")
            stream = Stream(self.spec.api)
            while not stream.done:
                if conn.sock is not None:  # the whole request's deadline, not each read's
                    conn.sock.settimeout(max(deadline - time.monotonic(), 0.001))
                line = response.readline()
                stream.feed(line or b"\n", time.monotonic() - started)
                if not line and not stream.done:
                    raise http.client.RemoteDisconnected("the stream ended before [DONE]")
            response.read()  # the end of the chunked body, so the connection can be used again
        except (OSError, http.client.HTTPException, BadStream) as exc:
            conn.close()  # a stream that had begun was cut short: its first token's time says so
            return Sample(status=status, error=_kind(exc), ttft=stream.first if stream is not None else None)
        if stream.first is None or stream.last is None:
            return Sample(status=status, error="no_tokens")
        return Sample(status=status, ttft=stream.first, tpot=tpot(stream.first, stream.last, stream.tokens))

    def _connection(self) -> http.client.HTTPConnection:
        conn: http.client.HTTPConnection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = self.connection(self.host, self.port, timeout=self.spec.timeout_seconds)
            self._local.conn = conn
            with self._lock:
                self._opened.append(conn)
        elif conn.sock is not None and _dropped(conn.sock):
            conn.close()  # the server closed it while it was idle: the next request reconnects
        return conn

    def close(self) -> None:
        with self._lock:
            for conn in self._opened:
                conn.close()


def _dropped(sock: Any) -> bool:
    """Is an idle keep-alive connection readable, so closed by the server (or spoken on out of turn)?
    Reusing it would fail the next request for no fault of the server's."""
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    return bool(poller.poll(0))


def _kind(exc: BaseException) -> str:
    """The kind of error a request ended with, as the summary counts it."""
    if isinstance(exc, BadStream):
        return exc.kind
    if isinstance(exc, TimeoutError):
        return "timeout"
    if isinstance(exc, http.client.RemoteDisconnected | http.client.IncompleteRead):  # the first is a reset's kin
        return "connection_closed"
    if isinstance(exc, ConnectionResetError | BrokenPipeError):
        return "connection_reset"
    if isinstance(exc, ConnectionRefusedError):
        return "connection_refused"
    return "connection_error" if isinstance(exc, OSError) else "bad_response"


# --- the load, running ----------------------------------------------------------------------------
class Load:
    """A load offered in the background: `start()`, then `wait()` for its duration (or set `halted`),
    and `stop()` gives the journal's record: the spec, a summary and a series per second."""

    def __init__(self, spec: LoadSpec, client: Sender | None = None) -> None:
        self.spec = spec = replace(spec, url=spec.url or local_testbed_openai())  # the journal says where it went
        self.client = client or Client(spec)
        self.halted = threading.Event()
        self.started_at = 0.0  # epoch seconds, for setting the series beside faults and probes
        self._started = self._ended = 0.0
        self._slots = threading.BoundedSemaphore(spec.max_in_flight)
        self._pool = ThreadPoolExecutor(spec.max_in_flight, "kilocard-load", initializer=quiet_thread)
        self._samples: list[Sample] = []
        self._in_flight: dict[int, float] = {}  # request number -> when it was sent
        self._numbers = itertools.count()
        self._lock = threading.Lock()
        self._offering = threading.Thread(target=self._offer, name="kilocard-load", daemon=True)

    def start(self) -> Load:
        self.started_at, self._started = time.time(), time.monotonic()
        self._offering.start()
        with _RUNNING_LOCK:
            _RUNNING.append(self)
        return self

    def seen(self) -> tuple[list[Sample], list[float]]:
        """The requests answered or failed so far, and when those still in flight were sent (seconds
        from the load's start): what a probe of the clients' view reads while the load runs."""
        with self._lock:
            return list(self._samples), list(self._in_flight.values())

    def wait(self) -> None:
        """Until the duration has passed, or `halted` is set."""
        self._offering.join()

    def stop(self) -> dict[str, Any]:
        """Stop offering, let the requests in flight finish (each within its timeout), and return
        the record."""
        self.halted.set()
        self._offering.join()
        self._pool.shutdown(wait=True)
        with _RUNNING_LOCK:
            if self in _RUNNING:
                _RUNNING.remove(self)
        self.client.close()
        seconds = self._ended - self._started
        samples = sorted(self._samples, key=lambda s: s.sent)
        return {"spec": self.spec.to_json(), "started_at": self.started_at,
                "summary": summary(samples, seconds), "series": series(samples, seconds)}

    def _offer(self) -> None:
        quiet_thread()
        spec = self.spec
        words = random.Random(f"{spec.seed}/prompts")
        shared = prompt(random.Random(f"{spec.seed}/prefix"), round(spec.prompt_tokens * spec.prefix_share))
        for at in arrivals(spec.peak_qps, spec.seed, spec.duration_seconds,
                           spec.rate if spec.burst_seconds > 0 else None):
            text = prompt(words, spec.prompt_tokens, shared)
            if self.halted.wait(max(0.0, self._started + at - time.monotonic())):
                break
            late = max(0.0, time.monotonic() - self._started - at)
            if self._slots.acquire(blocking=False):
                number = next(self._numbers)
                with self._lock:
                    self._in_flight[number] = at
                self._pool.submit(self._one, number, at, late, text)
            else:
                self._keep(Sample(at, late, error=SATURATED))
        else:  # the last arrival came: the load lasts its whole duration all the same
            self.halted.wait(max(0.0, self._started + (self.spec.duration_seconds or 0.0) - time.monotonic()))
        self._ended = time.monotonic()

    def _one(self, number: int, at: float, late: float, text: str) -> None:
        try:
            sample = replace(self.client.send(text), sent=at, late=late)
        except Exception:  # noqa: BLE001 - a request the client itself botched still counts, and the load goes on
            sample = Sample(at, late, error="client_error")
        finally:
            self._slots.release()
        self._keep(sample, number)

    def _keep(self, sample: Sample, number: int | None = None) -> None:
        """A request's outcome, and (in one step, so a reader never misses it) no longer in flight."""
        with self._lock:
            self._samples.append(sample)
            if number is not None:
                self._in_flight.pop(number, None)


_RUNNING: list[Load] = []  # the loads this process offers now, for probes of the clients' view
_RUNNING_LOCK = threading.Lock()


def running() -> Load | None:
    """The load this process started last and has not stopped (an experiment's own, in its run)."""
    with _RUNNING_LOCK:
        return _RUNNING[-1] if _RUNNING else None


# --- the record -----------------------------------------------------------------------------------
def percentile(values: list[float], q: float) -> float | None:
    """The q-quantile (0 to 1), linear between the closest ranks (numpy's default); None for none."""
    if not values:
        return None
    ordered = sorted(values)
    rank = q * (len(ordered) - 1)
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def _quantiles(values: list[float]) -> dict[str, float | None]:
    found = {f"p{round(q * 100)}": percentile(values, q) for q in QUANTILES}
    return {k: None if v is None else round(v, 6) for k, v in found.items()}


def summary(samples: list[Sample], seconds: float) -> dict[str, Any]:
    """Counts, errors by kind, HTTP statuses, P50/P95/P99 TTFT and TPOT of the answered requests,
    and the rates offered (every request, saturated ones too) and achieved (answered in full)."""
    answered = [s for s in samples if s.error is None]
    late = percentile([s.late for s in samples], 0.99)
    return {
        "requests": len(samples), "ok": len(answered),
        "errors": dict(sorted(Counter(s.error for s in samples if s.error).items())),
        "statuses": {str(k): n for k, n in sorted(Counter(s.status for s in samples if s.status).items())},
        "seconds": round(seconds, 3),
        "offered_qps": round(len(samples) / seconds, 3) if seconds > 0 else 0.0,
        "achieved_qps": round(len(answered) / seconds, 3) if seconds > 0 else 0.0,
        "ttft_seconds": _quantiles([s.ttft for s in answered if s.ttft is not None]),
        "tpot_seconds": _quantiles([s.tpot for s in answered if s.tpot is not None]),
        "late_p99_seconds": None if late is None else round(late, 6),
    }


def series(samples: list[Sample], seconds: float) -> list[dict[str, Any]]:
    """Per second of the load, by when each request was sent: how many, how many failed, and the
    P95 TTFT and TPOT of the rest."""
    by_second: dict[int, list[Sample]] = defaultdict(list)
    for s in samples:
        by_second[int(s.sent)].append(s)
    out = []
    for second in range(max(int(seconds), max(by_second, default=-1) + 1)):  # a last part-second if sent in
        got = by_second.get(second, [])
        answered = [s for s in got if s.error is None]
        ttft = percentile([s.ttft for s in answered if s.ttft is not None], 0.95)
        tpot_ = percentile([s.tpot for s in answered if s.tpot is not None], 0.95)
        out.append({"second": second, "sent": len(got), "errors": len(got) - len(answered),
                    "ttft_p95": None if ttft is None else round(ttft, 6),
                    "tpot_p95": None if tpot_ is None else round(tpot_, 6)})
    return out


def lines(found: dict[str, Any]) -> list[str]:
    """A summary as the command prints it."""
    errors = sum(found["errors"].values())
    kinds = ", ".join(f"{k} {n}" for k, n in found["errors"].items())
    out = [f"{found['requests']} requests in {found['seconds']:.1f} s: {found['offered_qps']:.2f}/s offered, "
           f"{found['achieved_qps']:.2f}/s answered; {errors} errors" + (f" ({kinds})" if kinds else "")]
    for name in ("ttft", "tpot"):
        q = found[f"{name}_seconds"]
        out.append(f"{name.upper()} " + ", ".join(
            f"{k} {'-' if v is None else f'{v:.3f} s'}" for k, v in q.items()))
    if (found["late_p99_seconds"] or 0.0) > 0.05:
        out.append(f"the client fell behind its schedule: sends up to {found['late_p99_seconds']:.3f} s late (P99)")
    return out
