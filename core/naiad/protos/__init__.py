"""Protocol buffer definitions: Triton's model configuration and gRPC service."""
