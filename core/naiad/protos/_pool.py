"""naiad's own protobuf descriptor pool (see scripts/generate_protos.py for why)."""

from google.protobuf import descriptor_pool

POOL = descriptor_pool.DescriptorPool()
