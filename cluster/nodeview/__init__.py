"""The node view: pure numpy over node columns. The node table (a cache kept from the feed), its per-decision snapshot, predicates, scores, shard preference, fit and assume. Never imports redis."""
