"""The response cache (`--cache-config`): what it selects, how a request becomes a key,
and its two stores (in-process LRU, Redis)."""
