"""The admin API of the versioned artifact store (services/core/store/artifacts.py)."""
