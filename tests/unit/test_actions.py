from chaos import actions, discover


def test_every_fault_kind_is_a_discoverable_action_and_every_probe_a_probe():
    from probes import chaostoolkit

    found = {a["name"]: a for a in discover()["activities"]}
    assert sorted(found) == sorted(actions.__all__ + chaostoolkit.__all__)
    assert all(found[n]["type"] == "action" and found[n]["mod"] == "chaos.actions" for n in actions.__all__)
    assert all(found[n]["type"] == "probe" for n in chaostoolkit.__all__)
    isolate = {arg["name"]: arg for arg in found["isolate_nodes"]["arguments"]}
    assert isolate["ttl_seconds"]["type"] == "number" and "default" not in isolate["ttl_seconds"]
    assert isolate["effect"]["default"] == "NoSchedule"
    assert {arg["name"] for arg in found["inject_ecc"]["arguments"]} >= {"cards", "ttl_seconds", "speed"}


def test_export_list_is_pinned():
    assert actions.__all__ == sorted(actions.__all__)
    assert all(callable(getattr(actions, name)) for name in actions.__all__)
