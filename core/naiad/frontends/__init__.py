"""Protocol frontends: thin layers that decode a protocol into core types, call the
`Server`, and encode the answer. `naiad serve` starts each installed `Frontend` (the entry
point group `naiad.frontends`); its options are `option` fields, which also declare its flags."""

from ..option_fields import option
from .frontend import ENTRY_POINT_GROUP, Frontend

__all__ = ["ENTRY_POINT_GROUP", "Frontend", "option"]
