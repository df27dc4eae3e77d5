"""Everything a model goes through between its repository and serving: the manager
(`manager`), plugin discovery (`backend_registry`), instance groups, warmup and ensemble
validation."""
