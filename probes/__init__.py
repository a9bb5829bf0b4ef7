"""kilocard probes: pure verdicts over cluster snapshots (placement, TP groups, capacity, SLOs)."""

__all__: list[str] = []
