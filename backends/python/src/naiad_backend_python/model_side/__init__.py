"""What runs in the model's process: the model API (pb_utils), the stub, the model host and
its bridge to the server. Imports nothing of naiad (tests/test_layout.py checks it)."""
