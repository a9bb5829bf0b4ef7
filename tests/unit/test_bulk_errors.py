"""The bulk connection's replies become the errors the generated client raises, and a failure
in a bulk send is counted and waited on before its retry, as `Kube._call` does."""

from kubernetes import client

from chaos.errors import NotFound
from chaos.kube import Kube, bulk, retry


def test_retry_after_is_read_whatever_the_case_of_the_header():
    # HTTP/2 sends header names in lower case.
    error = bulk.reply_error(429, b'{"message": "slow down"}', [(b"retry-after", b"7"), (b"x", b"y")])
    assert error.status == 429 and retry.retry_after(error) == 7.0
    assert "429 slow down" in str(retry.kube_error(error, "delete pod a"))
    assert bulk.reply_error(200, b"", []) is None
    assert bulk.reply_error(599, b"?", []).reason == ""  # no standard phrase: no crash


class FakeBulk:
    """The first bulk send: one success, one 429 (Retry-After 0), one 404; later single sends succeed."""

    def __init__(self):
        self.sent = []

    def request_all(self, requests, headers):
        self.sent.append([path for _method, path, _body in requests])
        if len(requests) == 1:
            return [None]
        return [None, bulk.reply_error(429, b"{}", [(b"retry-after", b"0")]),
                bulk.reply_error(404, b'{"message": "gone"}', [])]

    def close(self):
        pass


def test_a_failure_in_a_bulk_send_is_counted_and_retried_alone_and_a_final_one_kept():
    kube = Kube(client.ApiClient(client.Configuration()))
    kube._bulk = fake = FakeBulk()
    before = retry.retries().get("429", 0)
    try:
        outcomes = kube.send_all("delete pods", [("DELETE", f"/p/{i}", {}) for i in range(3)])
    finally:
        kube.close()
    assert outcomes[0] is None and outcomes[1] is None and isinstance(outcomes[2], NotFound)
    assert retry.retries().get("429", 0) == before + 1
    assert fake.sent == [["/p/0", "/p/1", "/p/2"], ["/p/1"]]  # only the 429 again; the 404 is an answer
    assert kube._bulk is None  # closed: a later call opens a new connection


def test_a_stream_the_peer_closed_mid_write_is_a_dropped_connection_not_a_crash():
    """An apiserver restarting under a run closed the TLS stream while a request's headers were
    written: httpcore let anyio's EndOfStream out, and `kilocard run` died with a traceback."""
    import asyncio

    import anyio

    class Closing:
        async def request(self, *_a, **_k):
            raise anyio.EndOfStream

    connection = object.__new__(bulk.Bulk)
    connection.pool, connection.host, connection.extensions = Closing(), "https://127.0.0.1:6443", {}
    reply = asyncio.run(connection._request("GET", "/api/v1/nodes", None, []))
    assert isinstance(reply, ConnectionError) and retry.retryable(reply)
