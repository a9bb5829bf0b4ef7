"""The fleet's OpenAI-compatible endpoint, answering with the simulator's latency: what `kilocard
load` (or any OpenAI client) talks to on the testbed, so the client's figures can be checked
against the replicas' own histograms.

    POST /v1/completions, /v1/chat/completions   stream true (server-sent events) or false
    GET  /v1/models
    each also under /namespaces/{namespace}/: only that namespace's replicas

Routing is the simulated gateway's (World._advance): a request goes to one of the model's Ready
replicas, each as likely as another (each gets an equal share of the arrivals there); a replica
whose pods are not all Ready, or one draining, gets nothing; with none Ready the answer is 503. A
replica that looks Ready but cannot answer fails the request as the gateway counts it: unreachable
(a partition, a dead node) 503, reset (tcp-reset) a reset connection.

A model with a routing tier in front of it (chaos.routers: routers whose discovery finds its pods)
is reached through it first (`Endpoint._routed`, engine.Tier): a router picked as a Service spreads
connections; a frozen or unreachable proxy holds the request until it answers again, and one that
retries tries another replica when the first is unreachable; a gateway whose endpoint picker does
not answer waits PICKER_TIMEOUT_SECONDS, then forwards the request (FailOpen) or answers 503
(FailClose); no router Ready is a 503 from a proxy, and a picker's failure mode's answer.

Latency: the first token after a TTFT drawn from the replica's current distribution (model.ttft_cdf
at its service rate, its share of the arrivals and its backlog, after its network delay), then one
token per gap drawn from model.itl_cdf at its current mean; both CDFs inverted numerically. A hung
replica (a frozen rank, World.stalled) sends nothing until it thaws; one that fails or goes away
while answering resets the connection.

A request answered joins its model's demand at the next tick (testbed/simulator/traffic.py), on top
of the fleet's own traffic (its utilisation, or /sim/v1/load): its rate and its shape (prompt and
output tokens, the prefix other prompts already computed), so an experiment's load fills queues
and KV caches as traffic would. Its own latency is drawn from the replica as it is at its arrival;
the queue its arrival adds to shows from the next tick.
"""

from __future__ import annotations

import json
import math
import random
import re
import socket
import struct
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from chaos import routers
from chaos.agent.http import JsonHandler
from testbed.simulator import model as m
from testbed.simulator.engine import FAILURES, Tier
from testbed.simulator.state import Pod
from testbed.simulator.world import World

MAX_STREAMS = 256  # requests answered at once; more get 429, so the server's threads stay bounded
MAX_BODY = 4 * 1024 * 1024
MAX_TOKENS = 32_768
POLL_SECONDS = 0.25  # how often a request held by a hung replica (or router) looks whether it thawed
# How long a gateway waits for an endpoint picker's answer before it fails open or closed: Envoy's
# ext_proc message_timeout default (envoy/extensions/filters/http/ext_proc/v3/ext_proc.proto).
PICKER_TIMEOUT_SECONDS = 0.2
TOKEN = " tok"
_PATH = re.compile(r"^(?:/namespaces/([a-z0-9][-a-z0-9]{0,62}))?(/v1/(?:completions|chat/completions|models))$")


def route_of(path: str) -> tuple[str | None, str] | None:
    """(namespace or None, the /v1 path) of a path this endpoint serves; None for any other."""
    found = _PATH.match(path)
    return (found[1], found[2]) if found else None


@dataclass(frozen=True)
class Replica:
    """One replica a request may go to, as the gateway sees it now."""

    key: str
    namespace: str
    model: str  # its label
    uids: tuple[str, ...]
    service: float  # requests per second it serves now (0: hung)
    arrival: float  # its share of the model's arrivals
    backlog: float
    delay: float  # seconds its network adds before the first token
    itl_seconds: float  # the model's healthy inter-token latency
    failure: str | None  # why a request to it fails (one of engine.FAILURES), None while it answers
    hung: bool


def _services(world: World, model: str, namespace: str | None) -> dict[tuple[str, str], list[tuple[str, list[Pod]]]]:
    """The services (namespace, model) that serve `model` (its label or its served name) in
    `namespace` (any, for None), with their replicas; the caller holds the lock."""
    return {service: groups for service, groups in world.services().items()
            if model in (service[1], groups[0][1][0].served_name) and namespace in (None, service[0])}


def tier_of(world: World, model: str, namespace: str | None) -> Tier | None:
    """The routing tier in front of `model` (that of its first service), None where it has none."""
    with world.lock:
        services = _services(world, model, namespace)
        first = min(services, default=None)
        return world.tier(first, services[first]) if first is not None else None


def router_answers(world: World, uid: str) -> bool | None:
    """Does the router answer now? None when it is gone, or no longer Ready."""
    with world.lock:
        r = world.routers.get(uid)
        return None if r is None or not r.ready else not world.router_stuck(r)


def replicas(world: World, model: str, namespace: str | None) -> list[Replica] | None:
    """The replicas of `model` (its label or its served name) a request may go to now, as
    World._advance routes; None when no such model is known."""
    with world.lock:
        services = _services(world, model, namespace)
        known = bool(services) or any(model in (label, world.served_names.get(label)) and namespace in (None, ns)
                                for ns, label in world.replicas_seen)
        if not known:
            return None
        found = []
        for service, groups in services.items():
            profile = m.profile_for(service[1])
            live = sum(1 for _key, members in groups if not any(p.terminating for p in members))
            routes = world.routes(groups)
            classes = world.demand(service, live, time.time())
            share = sum(rate for rate, _shape in classes) / max(len(routes), 1)
            for r in routes:
                series = world.series.get(r.key)
                # What it served at the last step (a full KV cache slows it), else its prefill's rate.
                rate = series.service if series and series.service else m.Load.of(profile, classes, r.speed).prefill
                found.append(Replica(r.key, *service, tuple(p.uid for p in r.members), 0.0 if r.hung else rate,
                                     share, series.backlog if series else 0.0, r.delay, profile.itl_seconds,
                                     r.failure, r.hung))
        return found


def inverse(cdf: Callable[[float], float], u: float) -> float:
    """The x at which a CDF (non-decreasing from 0 at 0) reaches u, by bisection."""
    high = 1e-3
    while cdf(high) < u and high < 1e6:
        high *= 2
    low = 0.0
    while high - low > 1e-6:  # a microsecond
        mid = (low + high) / 2
        low, high = (mid, high) if cdf(mid) < u else (low, mid)
    return high


def ttft(r: Replica, u: float) -> float:
    """The replica's TTFT at quantile u: its network delay, then its queue's."""
    return r.delay + inverse(lambda x: m.ttft_cdf(x, r.service, r.arrival, r.backlog), u)


def gap(itl_mean: float, u: float) -> float:
    """An inter-token gap at quantile u."""
    return inverse(lambda x: m.itl_cdf(x, itl_mean), u)


class Gone(Exception):
    """The replica failed, or went away, while it answered."""


class Left(Exception):
    """The client closed its end while it waited (it gave up)."""


@dataclass(frozen=True)
class Asked:
    """What a completion request asks for."""

    model: str
    chat: bool
    stream: bool
    max_tokens: int
    words: tuple[str, ...]  # the prompt, a token a word (token ids as they are)
    usage: bool  # stream_options.include_usage

    @property
    def prompt_tokens(self) -> int:
        return len(self.words)


class Refused(Exception):
    """A request answered with an error status, in OpenAI's shape."""

    def __init__(self, status: int, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.status, self.param = status, param

    def body(self) -> dict[str, Any]:
        kind = HTTPStatus(self.status).phrase.replace(" ", "") + "Error"  # BadRequestError, NotFoundError, ...
        return {"error": {"message": str(self), "type": kind, "param": self.param, "code": self.status}}


def asked(raw: Any, chat: bool) -> Asked:
    """A request's body, checked as vLLM does; Refused names the parameter."""
    if not isinstance(raw, dict):
        raise Refused(400, "expected a JSON object")
    model = raw.get("model")
    if not isinstance(model, str) or not model:
        raise Refused(400, "model: expected the model's name", "model")
    name = "max_completion_tokens" if chat and "max_completion_tokens" in raw else "max_tokens"
    tokens = raw.get(name, m.profile_for(model).output_tokens)
    if isinstance(tokens, bool) or not isinstance(tokens, int) or not 1 <= tokens <= MAX_TOKENS:
        raise Refused(400, f"{name}: expected an integer from 1 to {MAX_TOKENS}, got {tokens!r}", name)
    stream = raw.get("stream", False)
    if not isinstance(stream, bool):
        raise Refused(400, f"stream: expected true or false, got {stream!r}", "stream")
    if chat:
        messages = raw.get("messages")
        if not isinstance(messages, list) or not messages or not all(isinstance(x, dict) for x in messages):
            raise Refused(400, "messages: expected a non-empty list of messages", "messages")
        words = [w for x in messages for w in str(x.get("content", "")).split()]
    else:
        given = raw.get("prompt")
        if not isinstance(given, str | list) or not given:
            raise Refused(400, "prompt: expected text, or a list of texts or token ids", "prompt")
        words = given.split() if isinstance(given, str) else [
            w for p in given for w in (p.split() if isinstance(p, str) else [str(p)])]
    options = raw.get("stream_options")
    usage = isinstance(options, dict) and options.get("include_usage") is True
    return Asked(model, chat, stream, tokens, tuple(words), usage)


class Endpoint:
    """The OpenAI routes over one world; `serve` answers one request on the simulator's handler."""

    def __init__(self, world: World, streams: int = MAX_STREAMS) -> None:
        self.world = world
        self.streams = streams
        self.slots = threading.BoundedSemaphore(streams)
        self.rng = random.Random()

    def serve(self, handler: JsonHandler, method: str, path: str) -> None:
        namespace, api = route_of(path) or (None, "")
        wanted = "GET" if api == "/v1/models" else "POST"
        if method != wanted:
            handler.close_connection = True  # a body it may carry is left unread
            _refuse(handler, Refused(405, f"{method} {path} not supported; {wanted} it"))
        elif api == "/v1/models":
            handler.send_json(200, self.models(namespace))
        else:
            try:
                request = asked(self._body(handler), chat=api.endswith("/chat/completions"))
                if not self.slots.acquire(blocking=False):
                    raise Refused(429, f"the simulator answers {self.streams} requests at once")
            except Refused as exc:
                _refuse(handler, exc)
                return
            try:
                self._complete(handler, request, namespace)
            finally:
                self.slots.release()

    def models(self, namespace: str | None) -> dict[str, Any]:
        with self.world.lock:
            names = sorted({p.served_name for p in self.world.pods.values() if namespace in (None, p.namespace)})
        return {"object": "list", "data": [{"id": n, "object": "model", "created": 0, "owned_by": "kilocard-testbed"}
                                           for n in names]}

    def _body(self, handler: JsonHandler) -> Any:
        try:
            length = int(handler.headers.get("Content-Length") or 0)
        except ValueError:
            handler.close_connection = True
            raise Refused(400, "Content-Length: expected a number") from None
        if length > MAX_BODY:
            handler.close_connection = True
            raise Refused(413, f"the body is larger than {MAX_BODY} bytes")
        try:
            return json.loads(handler.body() or b"null")
        except ValueError:
            raise Refused(400, "the body is not valid JSON") from None

    def _complete(self, handler: JsonHandler, request: Asked, namespace: str | None) -> None:
        if replicas(self.world, request.model, namespace) is None:
            _refuse(handler, Refused(404, f"The model `{request.model}` does not exist.", "model"))
            return
        tier = tier_of(self.world, request.model, namespace)
        try:
            if tier is not None and not self._routed(handler, tier, request.model):
                return
        except Left:
            handler.close_connection = True
            return
        found = replicas(self.world, request.model, namespace) or []
        if not found:
            _refuse(handler, Refused(503, f"no Ready replica of {request.model}"))
            return
        replica = self.rng.choice(found)
        for _retry in range(1, tier.attempts if tier is not None else 1):  # a retrying proxy tries another
            others = [r for r in found if r.key != replica.key]
            if replica.failure is None or not others:
                break
            found = others
            replica = self.rng.choice(found)
        if replica.failure is None:  # it joins the replicas' queues and KV caches at the next tick
            with self.world.lock:
                self.world.offer((replica.namespace, replica.model), list(request.words), request.max_tokens)
        if replica.failure == FAILURES[1]:
            _reset(handler)
        elif replica.failure is not None:
            _refuse(handler, Refused(503, f"replica {replica.key} unreachable"))
        else:
            try:
                self._answer(handler, request, replica)
            except Gone:
                _reset(handler)
            except (Left, BrokenPipeError, ConnectionResetError):
                handler.close_connection = True  # the client left

    def _routed(self, handler: JsonHandler, tier: Tier, model: str) -> bool:
        """Through the routing tier: False when the request was answered (refused, reset) there.
        A router is picked as the Service spreads connections. A frozen or unreachable proxy
        holds the request until it answers again (Left if the client gives up first); a gateway
        waits for its picker's answer, then fails open (forwards it) or closed (503)."""
        uid, stuck = self.rng.choice(tier.routers) if tier.routers else (None, True)
        if not stuck:
            return True
        if tier.shape == routers.PICKER:
            if uid is not None:
                time.sleep(PICKER_TIMEOUT_SECONDS)
            if tier.failure_mode == routers.FAIL_OPEN:
                return True
            _refuse(handler, Refused(503, f"{model}: the endpoint picker did not answer (failureMode FailClose)"))
            return False
        if uid is None:
            _refuse(handler, Refused(503, f"{model}: no router Ready"))
            return False
        while (answers := router_answers(self.world, uid)) is False:
            time.sleep(POLL_SECONDS)
            if _closed(handler.connection):
                raise Left
        if answers is None:  # it went away holding the connection
            _reset(handler)
            return False
        return True

    def _answer(self, handler: JsonHandler, request: Asked, replica: Replica) -> None:
        rid, created = f"cmpl-{uuid.uuid4().hex}", int(time.time())
        usage = {"prompt_tokens": request.prompt_tokens, "completion_tokens": request.max_tokens,
                 "total_tokens": request.prompt_tokens + request.max_tokens}
        tokens = self._tokens(replica, request.max_tokens, handler.connection)
        if not request.stream:
            for _ in tokens:
                pass
            text = TOKEN * request.max_tokens
            choice = {"message": {"role": "assistant", "content": text}} if request.chat else {"text": text}
            handler.send_json(200, {"id": rid, "object": "chat.completion" if request.chat else "text_completion",
                                    "created": created, "model": request.model,
                                    "choices": [{"index": 0, **choice, "logprobs": None, "finish_reason": "length"}],
                                    "usage": usage})
            return
        chunk = {"id": rid, "object": "chat.completion.chunk" if request.chat else "text_completion",
                 "created": created, "model": request.model}
        for i, _ in enumerate(tokens):
            if i == 0:  # the status goes out with the first token, as vLLM's streams do
                # Each token goes out as it comes: no Nagle wait on the client's delayed ACK (40 ms).
                handler.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                handler.send_response(200)
                handler.send_header("Content-Type", "text/event-stream")
                handler.send_header("Transfer-Encoding", "chunked")
                handler.end_headers()
            delta = {"content": TOKEN, **({"role": "assistant"} if i == 0 else {})}
            choice = {"delta": delta} if request.chat else {"text": TOKEN}
            last = "length" if i == request.max_tokens - 1 else None
            _event(handler, {**chunk, "choices": [{"index": 0, **choice, "logprobs": None, "finish_reason": last}]})
        if request.usage:
            _event(handler, {**chunk, "choices": [], "usage": usage})
        _write_chunk(handler, b"data: [DONE]\n\n")
        _write_chunk(handler, b"")

    def _tokens(self, replica: Replica, count: int, client: socket.socket) -> Iterator[None]:
        """Yields as each token is due: the first after the replica's TTFT, then one per gap. The
        clock stops while the replica is hung; Gone when it fails or goes away."""
        while replica.hung:  # it serves nothing until it thaws, and then with the queue it built
            self._until(replica, math.inf, client)
            replica = _now(self.world, replica)
        due = time.monotonic() + ttft(replica, self.rng.random())
        for _ in range(count):
            speed = self._until(replica, due, client)
            yield
            due = time.monotonic() + gap(replica.itl_seconds / speed, self.rng.random())

    def _until(self, replica: Replica, due: float, client: socket.socket) -> float:
        """Wait until `due` (monotonic), pushed back while the replica is hung; its speed then. With
        `due` infinite, only until it is not hung. Left when the client gives up meanwhile (so a
        hung replica does not hold a slot for a request nobody waits for)."""
        while True:
            speed, hung = _state(self.world, replica.uids)
            if hung:
                time.sleep(POLL_SECONDS)
                due += POLL_SECONDS
            else:
                wait = due - time.monotonic()
                if wait <= 0 or math.isinf(due):
                    return speed
                time.sleep(min(wait, POLL_SECONDS))
            if _closed(client):
                raise Left


def _state(world: World, uids: tuple[str, ...]) -> tuple[float, bool]:
    """(speed, hung) of a replica's pods now; Gone when one has gone, is not Ready, or fails."""
    with world.lock:
        members = [world.pods.get(u) for u in uids]
        if any(p is None or not p.ready or p.terminating for p in members):
            raise Gone
        speed, _delay, failure = world.replica_speed([p for p in members if p is not None])
        hung = any(u in world.stalled for u in uids)
        if failure is not None or (speed <= 0 and not hung):
            raise Gone
        return speed, hung


def _now(world: World, replica: Replica) -> Replica:
    """The replica as the gateway sees it now; Gone when it is routed to no more, or fails."""
    for r in replicas(world, replica.model, replica.namespace) or []:
        if r.key == replica.key and r.failure is None:
            return r
    raise Gone


def _refuse(handler: JsonHandler, exc: Refused) -> None:
    handler.send_json(exc.status, exc.body())


def _closed(client: socket.socket) -> bool:
    """Has the client closed its end? (It sends nothing else while it waits for this answer.) Asked
    without blocking: a socket with a timeout first waits for data, whatever MSG_DONTWAIT says."""
    timeout = client.gettimeout()
    client.setblocking(False)
    try:
        return client.recv(1, socket.MSG_PEEK) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True
    finally:
        client.settimeout(timeout)


def _event(handler: JsonHandler, payload: dict[str, Any]) -> None:
    _write_chunk(handler, b"data: " + json.dumps(payload).encode() + b"\n\n")


def _write_chunk(handler: JsonHandler, data: bytes) -> None:
    """One chunk of a chunked body (an empty one ends it)."""
    handler.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))


def _reset(handler: JsonHandler) -> None:
    """Close the connection with a TCP reset (SO_LINGER 0), as a tcp-reset fault's rule answers."""
    handler.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    handler.connection.close()
    handler.close_connection = True
