"""The node agent's network faults measured with real packets between namespaces; every call over
TLS, as the agent serves on a node."""

from __future__ import annotations

import dataclasses
import signal
import subprocess
import sys
import time

import pytest

from tests.netns.netns import conversation, echo_server, said, start_agent


def clean(pair) -> bool:
    return "tbf" not in pair.qdisc() and "netem" not in pair.qdisc() and "kilocard" not in pair.nft_tables()


def test_bandwidth_limit_holds_with_real_traffic_and_reverts_clean(pair, agent):
    a = agent()
    baseline = pair.tcp_throughput(8 * 2**20)
    status, fault = a.fault("bandwidth", pair, rate_mbit=20)
    assert status == 201, fault
    assert "tbf" in pair.qdisc()
    seen = a.call("GET", f"/v1/faults/{fault['id']}/effect")[1]
    assert seen["status"] == "confirmed" and "rate 20Mbit" in seen["evidence"], seen
    limited = pair.tcp_throughput(4 * 2**20)
    assert 0.6 * 20e6 / 8 <= limited <= 1.3 * 20e6 / 8, limited  # 20 Mbit/s = 2.5 MB/s
    assert baseline > 5 * limited
    assert a.call("DELETE", f"/v1/faults/{fault['id']}")[0] == 200
    assert clean(pair)
    assert pair.tcp_throughput(8 * 2**20) > 5 * limited


def test_loss_drops_the_asked_share_of_real_packets(pair, agent):
    a = agent()
    assert pair.udp_delivered(1000) >= 990
    status, fault = a.fault("loss", pair, percent=30)
    assert status == 201, fault
    delivered = pair.udp_delivered(2000)
    assert 0.62 * 2000 <= delivered <= 0.78 * 2000, delivered  # 70 % expected; 4 sigma is about 4 %
    assert a.call("DELETE", f"/v1/faults/{fault['id']}")[0] == 200
    assert clean(pair)
    assert pair.udp_delivered(1000) >= 990


def test_partition_cuts_off_and_can_be_scoped(pair, agent):
    a = agent()
    status, fault = a.fault("partition", pair, cidrs=[f"{pair.ip_b}/32"], ports=[5202], protocol="udp")
    assert status == 201, fault
    assert a.call("GET", f"/v1/faults/{fault['id']}/effect")[1]["status"] == "confirmed"
    assert pair.udp_delivered(300, port=5202) == 0
    assert pair.udp_delivered(300, port=5203) >= 297  # another port is not partitioned
    assert a.call("DELETE", f"/v1/faults/{fault['id']}")[0] == 200
    assert clean(pair) and pair.udp_delivered(300, port=5202) >= 297


def test_ttl_expiry_reverts_with_no_client_alive(pair, agent):
    a = agent()
    assert a.fault("partition", pair, ttl=2)[0] == 201
    assert pair.udp_delivered(100) == 0
    deadline = time.monotonic() + 10
    while not clean(pair) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert clean(pair) and a.call("GET", "/v1/faults")[1] == {"faults": []}


def test_delay_is_refused_where_the_kernel_has_no_netem(pair, agent):
    a = agent()
    netem = subprocess.run(["ip", "netns", "exec", pair.a, "tc", "qdisc", "add", "dev", "lo", "root", "netem",
                            "delay", "1ms"], capture_output=True, text=True)
    status, body = a.fault("delay", pair, ms=50)
    if netem.returncode == 0:  # a kernel with netem: the delay must really be there
        assert status == 201 and "netem" in pair.qdisc()
    else:
        assert status == 501 and "netem" in body["error"], body
        assert clean(pair)


def test_unauthenticated_and_non_allowlisted_calls_change_nothing(pair, agent):
    a = agent(allow="loss,partition")
    for token in (None, "not-the-token"):
        status, body = a.call("POST", "/v1/faults", {"kind": "partition", "target": {"netns": pair.a},
                                                     "ttl_seconds": 60}, token=token)
        assert status == 401 and body["error"] == "missing or wrong bearer token"
    status, body = a.fault("bandwidth", pair, rate_mbit=10)
    assert status == 403 and "not allowlisted" in body["error"]
    status, body = a.fault("loss", pair)  # no percent
    assert status == 400 and body["field"] == "params.percent"
    # The same request in cleartext, token and all: refused unread, nothing applied.
    cleartext = dataclasses.replace(a, url=a.url.replace("https://", "http://", 1), ca=None)
    assert cleartext.fault("partition", pair) == (400, "this agent speaks https only (TLS)\n")
    assert clean(pair) and a.call("GET", "/v1/faults")[1] == {"faults": []}


def test_sigterm_reverts_everything_and_a_restart_reverts_a_crashed_agents_leftovers(pair, agent):
    a = agent()
    assert a.fault("bandwidth", pair, rate_mbit=10)[0] == 201
    assert a.fault("loss", pair, percent=50)[0] == 201
    a.proc.send_signal(signal.SIGTERM)
    assert a.proc.wait(timeout=30) == 0
    assert clean(pair)

    b = agent()
    assert b.fault("partition", pair)[0] == 201
    b.proc.kill()  # SIGKILL: nothing reverted
    b.proc.wait()
    assert not clean(pair)
    restarted = start_agent(b.argv)  # same state file: it reverts what it finds there
    try:
        assert clean(pair)
    finally:
        restarted.terminate()
        restarted.wait(timeout=30)


@pytest.mark.parametrize("bad", [{"interface": "eth0; rm -rf /"}, {"netns": "../../etc"}])
def test_values_never_reach_a_shell(pair, agent, bad):
    a = agent()
    status, body = a.call("POST", "/v1/faults", {"kind": "partition", "target": bad, "ttl_seconds": 5})
    assert status == 400 and body["field"].startswith("target.")


def test_tcp_reset_resets_established_connections_and_refuses_new_ones_only_on_its_ports(pair, agent):
    a = agent()
    server = echo_server(pair, 7001, 7002)
    try:
        hit, spared = conversation(pair, 7001), conversation(pair, 7002)
        status, fault = a.fault("tcp-reset", pair, ports=[7001])
        assert status == 201, fault
        assert a.call("GET", f"/v1/faults/{fault['id']}/effect")[1]["status"] == "confirmed"
        assert said(hit) == ("reset", "refused")  # ECONNRESET on the open one, the SYN answered with RST
        assert said(spared) == ("echoed", "echoed")
        assert a.call("DELETE", f"/v1/faults/{fault['id']}")[0] == 200
        assert clean(pair)
        assert said(conversation(pair, 7001)) == ("echoed", "echoed")
    finally:
        server.communicate("", timeout=30)


def test_tcp_reset_on_the_port_reaches_the_node_that_listens_on_it_too(pair, agent):
    a = agent()  # the fault is on A, and A is the server: its port is the near end of the traffic
    server = echo_server(pair, 7003, in_a=True)
    try:
        client = conversation(pair, 7003, from_b=True)
        status, fault = a.fault("tcp-reset", pair, ports=[7003])
        assert status == 201, fault
        established, new = said(client)
        assert established == "reset" and new in ("reset", "refused"), (established, new)
        assert a.call("DELETE", f"/v1/faults/{fault['id']}")[0] == 200
        assert said(conversation(pair, 7003, from_b=True)) == ("echoed", "echoed")
    finally:
        server.communicate("", timeout=30)


def test_a_rule_removed_behind_the_agents_back_reads_back_as_a_mismatch(pair, agent):
    a = agent()
    status, fault = a.fault("tcp-reset", pair, cidrs=[f"{pair.ip_b}/32"])
    assert status == 201, fault
    assert a.call("GET", f"/v1/faults/{fault['id']}/effect")[1]["status"] == "confirmed"
    pair.exec(pair.a, "nft", "delete", "table", "inet", f"kilocard_{fault['id']}")  # someone cleans up by hand
    body = a.call("GET", f"/v1/faults/{fault['id']}/effect")[1]
    assert body["status"] == "mismatch" and "not in the ruleset" in body["evidence"], body
    assert a.call("DELETE", f"/v1/faults/{fault['id']}")[0] == 200  # the revert of a vanished table is clean
    assert clean(pair)


def test_tcp_reset_takes_tcp_only(pair, agent):
    status, body = agent().fault("tcp-reset", pair, ports=[53], protocol="udp")
    assert status == 400 and body["field"] == "params.protocol", body
    assert clean(pair)


def test_a_pull_block_refuses_the_registrys_port_at_its_address_and_nothing_else(pair, agent):
    a = agent()  # the registry is B's echo on 7005 (named by address and port, as an image names it)
    server = echo_server(pair, 7005, 7006)
    try:
        pulling, other = conversation(pair, 7005), conversation(pair, 7006)
        status, fault = a.fault("pull-block", pair, registries=[f"{pair.ip_b}:7005"])
        assert status == 201, fault
        seen = a.call("GET", f"/v1/faults/{fault['id']}/effect")[1]
        assert seen["status"] == "confirmed" and f"{pair.ip_b}:7005 ({pair.ip_b})" in seen["evidence"], seen
        # The pull in flight is cut, a new one refused at once (ErrImagePull), another port untouched.
        assert said(pulling) == ("reset", "refused")
        assert said(other) == ("echoed", "echoed")
        assert a.call("DELETE", f"/v1/faults/{fault['id']}")[0] == 200
        assert clean(pair)
        assert said(conversation(pair, 7005)) == ("echoed", "echoed")
    finally:
        server.communicate("", timeout=30)


def test_a_pull_block_of_a_name_that_does_not_resolve_is_refused_and_leaves_nothing(pair, agent):
    status, body = agent().fault("pull-block", pair, registries=["no-such-registry.invalid"])
    assert status == 400 and body["field"] == "params.registries", body
    assert "does not resolve" in body["error"] and clean(pair)


# A new TCP connection from one namespace: what it got, as the exception's name.
CONNECT = """import socket, sys
try:
    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=3)
    print("connected")
except OSError as exc:
    print(type(exc).__name__)
"""


def test_a_dns_failure_drops_queries_over_udp_and_tcp_to_port_53_only(pair, agent):
    a = agent()  # B's port 53 stands for the resolver
    server = echo_server(pair, 53, 7007)
    try:
        status, fault = a.fault("dns-block", pair, answer="reject", cidrs=[f"{pair.ip_b}/32"])
        assert status == 201, fault
        seen = a.call("GET", f"/v1/faults/{fault['id']}/effect")[1]
        assert seen["status"] == "confirmed" and "th dport 53 reject" in seen["evidence"], seen
        assert pair.udp_delivered(200, port=53) == 0  # a query over UDP
        assert said(conversation(pair, 7007))[1] == "echoed"  # traffic by address goes on
        assert a.call("DELETE", f"/v1/faults/{fault['id']}")[0] == 200
        assert clean(pair) and pair.udp_delivered(200, port=53) >= 198
        # A query over TCP (a large answer's retry): refused while the fault holds, by default unanswered.
        status, fault = a.fault("dns-block", pair, answer="reject")
        client = subprocess.run(["ip", "netns", "exec", pair.a, sys.executable, "-c", CONNECT, pair.ip_b, "53"],
                                capture_output=True, text=True)
        assert client.stdout.strip() == "ConnectionRefusedError", client
        assert a.call("DELETE", f"/v1/faults/{fault['id']}")[0] == 200
        status, fault = a.fault("dns-block", pair)
        assert status == 201 and "th dport 53 drop" in a.call("GET", f"/v1/faults/{fault['id']}/effect")[1]["evidence"]
        assert pair.udp_delivered(100, port=53) == 0
        assert a.call("DELETE", f"/v1/faults/{fault['id']}")[0] == 200 and clean(pair)
    finally:
        server.communicate("", timeout=30)
