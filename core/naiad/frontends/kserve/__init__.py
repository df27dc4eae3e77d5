"""The KServe v2 layer both protocols share: request parsing and validation on plain values."""
