"""Use cases: write planning, validation, commit, retrieval (pure orchestration over the ports)."""
