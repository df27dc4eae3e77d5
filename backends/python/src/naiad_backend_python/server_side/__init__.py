"""The naiad backend for model.py files: the backend and model, the instances (a stub process
or in the server), the stub connection, BLS, model control, custom metrics and settings."""
