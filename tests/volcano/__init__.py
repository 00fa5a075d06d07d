"""Volcano's own scheduler test cases, ported: each case keeps its Volcano file and name."""
