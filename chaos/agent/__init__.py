"""The node agent: its HTTP protocol (v1) and the toolkit's client for it."""

__all__: list[str] = []
