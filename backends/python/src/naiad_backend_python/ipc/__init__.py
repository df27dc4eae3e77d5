"""The wire between the server and a model's process: control messages and the shared-memory
rings that carry tensors. Standard library and numpy only: both sides import it."""
