"""naiad's TensorFlow backend: SavedModel (`tensorflow_savedmodel`) and frozen GraphDef
(`tensorflow_graphdef`) models, run in TensorFlow sessions.

Importing this package does not import TensorFlow; that happens when the first model loads.
"""

from .backend import TensorFlowBackend

__all__ = ["TensorFlowBackend"]
