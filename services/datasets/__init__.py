"""Public datasets by name: a registry, builders, ``plaudit data list|fetch|verify`` (issue 21)."""
