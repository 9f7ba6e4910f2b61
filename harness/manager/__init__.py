"""State-manager runtime (issue 3)."""
