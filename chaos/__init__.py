"""kilocard: chaos engineering and fault injection for thousand-card LLM inference clusters."""

__all__: list[str] = []
