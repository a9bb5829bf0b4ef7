"""kilocard: chaos engineering and fault injection for thousand-card LLM inference clusters."""

from typing import Any

__all__ = ["discover"]
__version__ = "0.1.0"


def discover(discover_system: bool = True) -> Any:
    """Chaos Toolkit discovery: kilocard's actions and probes (`chaos discover kilocard --no-install`)."""
    from chaoslib.discovery.discover import discover_actions, discover_probes, initialize_discovery_result

    discovery = initialize_discovery_result("kilocard", __version__, "kilocard")
    discovery["activities"].extend(discover_actions("chaos.actions"))
    discovery["activities"].extend(discover_probes("probes.chaostoolkit"))
    return discovery
