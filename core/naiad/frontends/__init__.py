"""Protocol frontends: thin layers that decode a protocol into core types, call the
`Server`, and encode the answer. Each is started by `naiad serve` through `run`."""
