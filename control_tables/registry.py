"""The ``Registry`` of live entities (ids, lookup, owners, validated writes, change history) and the
``SystemEntity`` whose control table holds registry-wide knobs.

Source: SPEC section 8 (every operator, queue and synopsis has an id such as ``op:7`` and a control table;
writes are validated and recorded in a change history; the system itself has a control table); digest-004
section 2.I (R-ENT-01/02, STREAM's Entity and Control Table) and 2.K R-API-01 (request and update control-table
values remotely: the HTTP layer is a thin shell over ``get``/``set``/``entities``). One registry belongs to
one engine; the engine is single-threaded, so nothing here takes a lock.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

from .attributes import Knob
from .entity import Entity
from .errors import ControlTableError, NoSuchEntityError
from .history import Change, History

E = TypeVar("E", bound=Entity)
_ID = re.compile(r"([A-Za-z_][\w-]*):(\d+)$")


class Registry:
    """All entities of one engine by id, with a per-prefix id counter and the knob change history.

    ``clock``, when given, returns the logical position (the engine's application time) recorded in a change
    when the caller of ``set`` gives no ``at``.

    >>> from control_tables import Knob
    >>> class Op(Entity):
    ...     prefix, kind = "op", "probe"
    ...     priority = Knob(int, default=0, ge=0)
    >>> reg = Registry()
    >>> a, b = reg.add(Op()), reg.add(Op())
    >>> a.id, b.id
    ('op:0', 'op:1')
    >>> reg.set("op:1", "priority", 5, at=42)  # doctest: +ELLIPSIS
    Change(seq=1, entity_id='op:1', attr='priority', old=0, new=5, at=42, wall_time=...)
    """

    def __init__(self, *, history_limit: int = 1000, clock: Callable[[], int | None] | None = None) -> None:
        self._entities: dict[str, Entity] = {}
        self._next: dict[str, int] = {}
        self._history = History(history_limit)
        self.clock = clock

    # -- membership -----------------------------------------------------------------------------------------
    def add(self, entity: E, id: str | None = None) -> E:
        """Register ``entity`` and give it the next id of its class's prefix (``op:0``, ``op:1``...).

        ``id`` (or an id the entity already carries, e.g. after ``remove``) keeps that id instead, as when a
        persisted plan is restored; the counter then moves past it so no id is ever handed out twice.
        Returns the entity, so ``op = reg.add(SelectOp(...))`` reads naturally.
        """
        if not isinstance(entity, Entity):
            raise TypeError(f"only an Entity can be registered, not {type(entity).__name__}")
        if entity._registry is not None:
            raise ControlTableError(f"{entity.label} is already registered", entity_id=entity.id)
        prefix = type(entity).prefix
        wanted = id if id is not None else entity.id
        if wanted is None:
            n = self._next.get(prefix, 0)
            wanted = f"{prefix}:{n}"
        else:
            m = _ID.match(wanted)
            if m is None or m.group(1) != prefix:
                raise ControlTableError(f"cannot register {type(entity).__name__} as {wanted!r}: its ids look "
                                        f"like '{prefix}:<number>'", entity_id=wanted)
            if wanted in self._entities:
                raise ControlTableError(f"id {wanted!r} is already taken by {self._entities[wanted]!r}",
                                        entity_id=wanted)
            n = int(m.group(2))
        self._next[prefix] = max(self._next.get(prefix, 0), n + 1)
        entity.id = wanted
        entity._registry = self
        self._entities[wanted] = entity
        entity.on_registered(self)
        return entity

    def counters(self) -> dict[str, int]:
        """The next id number of each prefix (what a persisted catalog records to keep ids stable)."""
        return dict(self._next)

    def advance(self, counters: Mapping[str, int]) -> None:
        """Move each prefix's counter to at least ``counters[prefix]`` (never back: no id is handed out twice)."""
        for prefix, n in counters.items():
            self._next[prefix] = max(self._next.get(prefix, 0), int(n))

    def remove(self, id: str) -> Entity:
        """Unregister and return the entity; its id is not reused and its history stays."""
        entity = self.get(id)
        del self._entities[id]
        entity._registry = None
        return entity

    def get(self, id: str) -> Entity:
        """The entity with this id; ``NoSuchEntityError`` ("no entity 'op:99'") with a close match if any."""
        try:
            return self._entities[id]
        except (KeyError, TypeError):
            hint = difflib.get_close_matches(str(id), list(self._entities), n=1)
            msg = f"no entity {id!r}" + (f"; did you mean {hint[0]!r}?" if hint else "")
            raise NoSuchEntityError(msg, entity_id=str(id)) from None

    def __contains__(self, id: object) -> bool:
        return id in self._entities

    def __len__(self) -> int:
        return len(self._entities)

    def __iter__(self) -> Iterator[Entity]:
        return iter(list(self._entities.values()))

    def entities(self, kind: str | None = None, owner: str | None = None,
                 prefix: str | None = None) -> list[Entity]:
        """The registered entities in registration order, filtered by entity kind (``select``), by owner
        (a query id in ``entity.owners``) and by id prefix (``queue``)."""
        return [e for e in self._entities.values()
                if (kind is None or e.entity_kind() == kind)
                and (owner is None or owner in e.owners)
                and (prefix is None or type(e).prefix == prefix)]

    def release(self, owner: str) -> list[Entity]:
        """Take ``owner`` out of every entity's owners; return the entities that no query owns any more,
        which the engine may then remove (a dropped query keeps its shared entities alive for the others)."""
        freed = []
        for e in self._entities.values():
            if owner in e.owners:
                e.owners.discard(owner)
                if not e.owners:
                    freed.append(e)
        return freed

    # -- writes and history ---------------------------------------------------------------------------------
    def set(self, id: str, attr: str, value: Any, at: int | None = None) -> Change | None:
        """Validate, apply, run the entity's hook and record the write of knob ``attr`` of entity ``id``.

        Returns the ``Change``, or None when the value equals the current one (no hook, no record). A refused
        write raises a ``ControlTableError`` saying why, and changes nothing.
        """
        entity = self.get(id)
        r = entity._apply(attr, value)
        if r is None:
            return None
        return self._history.record(id, attr, r[0], r[1], self._at(at))

    def set_many(self, id: str, values: Mapping[str, Any], at: int | None = None) -> list[Change]:
        """Write several knobs of one entity all or nothing (see ``Entity.set_many``); one change each."""
        entity = self.get(id)
        done = entity._apply_many(values)
        at = self._at(at)
        return [self._history.record(id, name, old, new, at) for name, old, new in done]

    def history(self, id: str | None = None, since: int | None = None) -> list[Change]:
        """The recorded changes, oldest first: all, or one entity's (also after it was removed); only those
        with ``seq > since`` when ``since`` is given (for a reader that polls)."""
        return self._history.changes(id, since)

    @property
    def history_limit(self) -> int:
        """How many changes the history keeps (the oldest fall out)."""
        return self._history.limit

    @history_limit.setter
    def history_limit(self, limit: int) -> None:
        self._history.limit = limit

    @property
    def history_dropped(self) -> int:
        """How many changes fell out of the bounded history."""
        return self._history.dropped

    def _at(self, at: int | None) -> int | None:
        if at is None and self.clock is not None:
            return self.clock()
        return at


class SystemEntity(Entity):
    """The control table of the system as a whole (``sys:0``); the engine subclasses it to add the
    scheduler policy and global statistics. Here it holds the history bound, so that the
    bound is itself a knob and its changes are recorded like any other.

    >>> reg = Registry()
    >>> sys0 = reg.add(SystemEntity())
    >>> _ = reg.set("sys:0", "history_limit", 10)
    >>> sys0.id, reg.history_limit
    ('sys:0', 10)
    """

    prefix = "sys"
    kind = "system"
    history_limit = Knob(int, default=1000, ge=0, unit="changes",
                         doc="how many knob changes the history keeps (per registry)")

    def on_registered(self, registry: Any) -> None:
        # The knob is the one source of truth once a system entity exists.
        registry.history_limit = self.history_limit

    def on_set_history_limit(self, old: int, new: int) -> None:
        if self.registry is not None:
            self.registry.history_limit = new
