"""The local thousand-card testbed: a real Kubernetes control plane built from Go modules,
kwok GPU nodes and a sample inference fleet. The toolkit (chaos, probes) never imports it."""

__all__: list[str] = []
