"""The versioned artifact store: named artifacts with immutable versions and a current pointer."""
