"""The catalog: registered streams, relations, views and queries, by case-insensitive name.

Dependencies are recorded so that a drop of something another object reads is refused (SPEC section 4).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field

from dsms.cql import ast
from dsms.errors import ConflictError, SchemaError


@dataclass
class StreamDef:
    """``time``: "event" (each element carries its timestamp) or "arrival" (stamped when it arrives)."""

    name: str
    columns: list[tuple[str, str]]
    source: ast.MqttSource | None = None
    kind: str = "stream"
    time: str = "event"


@dataclass
class RelationDef:
    name: str
    columns: list[tuple[str, str]]
    kind: str = "relation"


@dataclass
class QueryDef:
    """A registered query or view; ``kind`` is the kind of its result (stream or relation)."""

    id: str
    name: str | None
    text: str
    kind: str
    columns: list[tuple[str, str]]
    is_view: bool = False
    monotone: bool = False
    publish_topic: str | None = None
    depends_on: set[str] = field(default_factory=set)   # lower-case names of catalog objects read
    # a relation-valued one: the streams, relations and derived streams (logical leaves) it reads, through
    # views at any depth; a reader's RSTREAM takes its instants from these (a view means its definition)
    inputs: tuple = ()


class Catalog:
    def __init__(self) -> None:
        self.objects: dict[str, StreamDef | RelationDef | QueryDef] = {}

    def add(self, key: str, obj: StreamDef | RelationDef | QueryDef) -> None:
        k = key.lower()
        if k in self.objects:
            raise ConflictError(f"'{key}' is already registered (as a {self._what(self.objects[k])})")
        self.objects[k] = obj

    @staticmethod
    def _what(obj) -> str:
        if isinstance(obj, QueryDef):
            return "view" if obj.is_view else "query"
        return obj.kind

    def get(self, name: str):
        return self.objects.get(name.lower())

    def lookup(self, name: str, pos=None):
        obj = self.objects.get(name.lower())
        if obj is None:
            where = f"line {pos[0]}, column {pos[1]}: " if pos else ""
            close = difflib.get_close_matches(name.lower(), list(self.objects), n=1)
            hint = f"; did you mean '{self.objects[close[0]].name if not isinstance(self.objects[close[0]], QueryDef) else self.objects[close[0]].name}'?" if close else ""
            shown = [o.name for o in self.objects.values()]
            known = ("one of " + ", ".join(shown[:20]) + (", ..." if len(shown) > 20 else "")) if shown \
                else "a registered name (nothing is registered yet)"
            raise SchemaError(f"{where}unknown stream or relation '{name}'; expected {known}{hint}")
        return obj

    def remove(self, name: str) -> None:
        del self.objects[name.lower()]

    def dependents(self, name: str) -> list[str]:
        """Names (or ids) of the registered queries and views that read ``name``."""
        k = name.lower()
        return [q.name or q.id for q in self.objects.values() if isinstance(q, QueryDef) and k in q.depends_on]
