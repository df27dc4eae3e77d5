"""Everything a model goes through between its repository and serving: the manager
(`manager`: loads, swaps, unloads, ensemble dependencies), what it records of each model
(`records`), the building of versions (`building`), plugin discovery (`backend_registry`),
instance groups, warmup and ensemble validation."""
