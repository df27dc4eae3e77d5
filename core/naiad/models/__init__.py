"""Everything a model goes through between its repository and serving: the manager
(`manager`: loads, swaps, unloads, ensemble dependencies), what it records of each model
(`records`), the building of versions (`building`), poll mode (`poller`), plugin discovery
(`backend_registry`), instance groups, warmup and the frozen heap (`heap`)."""
