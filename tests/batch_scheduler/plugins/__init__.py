"""Each plugin through a real Session built from a SessionInput: table-driven, no Redis."""
