"""dsms: a data stream management system in the style of Stanford STREAM (SPEC section 5 is the API)."""

from dsms.batch import Element
from dsms.engine import Engine, Query
from dsms.errors import ConflictError, CQLError, DsmsError, InputError, SchemaError

__version__ = "0.1.0"     # pyproject.toml reads it from here

__all__ = ["Engine", "Query", "Element", "CQLError", "SchemaError", "InputError", "ConflictError", "DsmsError"]
