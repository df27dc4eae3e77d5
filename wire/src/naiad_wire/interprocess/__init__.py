"""Messages between processes of one host: framed plain values, tensors in shared-memory
rings. Standard library and numpy only: a Python model's process imports it in its own
environment."""
