"""The ``Entity`` base class: an operator, queue, synopsis or the system itself, with an id and a control table.

Source: SPEC section 8; digest-004 section 2.I (R-ENT-01: operators, queues and synopses all subclass one
generic Entity; R-ENT-02: each has a table of attribute -> value pairs that can be queried and updated;
R-ENT-05: new attributes are easy to add). A subclass declares its control table in its class body with
``Stat`` and ``Knob`` (``attributes.py``); this module collects the declarations once per class, puts the
defaults into each new instance, and offers ``get``/``set``/``describe``/``history``. Ids (``op:7``) are
handed out by the ``Registry`` the entity is added to, from a counter per ``prefix``.

An entity reacts to a control-table write of knob ``x`` with a method ``on_set_x(self, old, new)`` (or the
method named by ``Knob(..., on_set="name")``). The new value is already in place when the hook runs, so the
hook can simply act on ``self.x``; if it raises, the old value is put back and the write fails with a
``HookError``. A hook should therefore check before it changes anything else.
"""

from __future__ import annotations

import copy
import difflib
import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from .attributes import Attribute, ComputedStat, Knob, Refused, Stat
from .errors import HookError, NoSuchAttributeError, ReadOnlyAttributeError

if TYPE_CHECKING:
    from .history import Change

_RESERVED = frozenset({"id"})
_MUTABLE = (list, dict, set, bytearray)


class Entity:
    """Base of everything that has a control table.

    Class attributes a subclass sets: ``prefix`` (the id prefix: ``op``, ``queue``, ``syn``, ``sys``) and
    ``kind`` (the entity's kind, e.g. ``select``; when a subclass uses the name ``kind`` for a knob, as a
    synopsis does, the entity kind is the nearest string ``kind`` of a base class). Instance attributes the
    base provides: ``id`` (None until registered), ``owners`` (ids of the queries that use the entity, so a
    shared entity lists several) and every declared statistic and knob at its default, already set before
    the subclass's ``__init__`` runs; a subclass need not call ``super().__init__()``.

    >>> from control_tables import Knob, Stat
    >>> class Probe(Entity):
    ...     prefix, kind = "op", "probe"
    ...     tuples_in = Stat(int, unit="tuples")
    ...     priority = Knob(int, default=0, ge=0)
    >>> p = Probe()
    >>> p.tuples_in += 10
    >>> p.set("priority", 3)
    >>> p.get()
    {'id': None, 'kind': 'probe', 'tuples_in': 10, 'priority': 3}
    """

    prefix: ClassVar[str] = "ent"
    kind: ClassVar[str] = "entity"

    # Filled in per class by __init_subclass__.
    _ct_own: ClassVar[tuple[Attribute, ...]]          # declared in this very class body
    _ct_attrs: ClassVar[dict[str, Attribute]]         # control-table name -> declaration, in declaration order
    _ct_hooks: ClassVar[dict[str, Any]]               # knob name -> method name or function
    _ct_init: ClassVar[tuple[tuple[str, Any], ...]]   # (instance attribute, default) of every stored value
    _ct_copy: ClassVar[tuple[str, ...]]               # instance attributes whose default is mutable (copied)
    _ct_kind: ClassVar[str]

    id: str | None
    owners: set[str]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _build_control_table(cls)

    def __new__(cls, *args: Any, **kwargs: Any) -> Entity:
        # Attributes are set one by one, never through self.__dict__: touching __dict__ would turn CPython's
        # inline attribute values into a real dict and make every attribute access about 2.5x slower.
        self = super().__new__(cls)
        put = object.__setattr__
        for slot, default in cls._ct_init:
            put(self, slot, default)
        for slot in cls._ct_copy:
            put(self, slot, copy.copy(getattr(self, slot)))
        put(self, "id", None)
        put(self, "owners", set())
        put(self, "_registry", None)
        return self

    def __init__(self, **knobs: Any) -> None:
        """Set knobs by keyword, validated (``Probe(priority=3)``); a subclass with its own ``__init__`` may
        skip calling this."""
        for name, value in knobs.items():
            attr = self._writable(name)
            setattr(self, attr.pyname, value)

    # -- identity -------------------------------------------------------------------------------------------
    @classmethod
    def entity_kind(cls) -> str:
        """The entity's kind (``select``, ``queue``...), also when ``kind`` is a knob name in the class."""
        return cls._ct_kind

    @property
    def label(self) -> str:
        """The id, or ``ClassName (unregistered)``: what error messages call this entity."""
        return self.id if self.id is not None else f"{type(self).__name__} (unregistered)"

    @property
    def registry(self) -> Any:
        """The ``Registry`` holding this entity, or None."""
        return self._registry

    def on_registered(self, registry: Any) -> None:
        """Called by ``Registry.add`` once the entity has its id; override to wire the entity to it."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.label}>"

    # -- the control table ----------------------------------------------------------------------------------
    @classmethod
    def control_attributes(cls) -> dict[str, Attribute]:
        """The declared statistics and knobs by control-table name, in declaration order (bases first)."""
        return dict(cls._ct_attrs)

    def get(self, attr: str | None = None) -> Any:
        """The whole control table as ``{"id", "kind", <attribute>: value...}``, or one attribute's value.

        A declared attribute named ``kind`` (a synopsis's exact/reservoir/bloom knob) is reported under that
        name, in place of the entity kind; ``entity_kind()`` always has the latter.
        """
        if attr is not None:
            return self._attr(attr).value_of(self)
        out: dict[str, Any] = {"id": self.id, "kind": self._ct_kind}
        for name, a in self._ct_attrs.items():
            out[name] = a.value_of(self)
        return out

    def set(self, attr: str, value: Any, at: int | None = None) -> Change | None:
        """Write knob ``attr`` through the control table: validate, apply, run the hook, record the change in
        the registry's history. Returns the ``Change``, or None when the value did not change (nothing is
        recorded and no hook runs) or the entity is not registered. Raises a ``ControlTableError`` and
        changes nothing when the write is refused."""
        if self._registry is not None:
            return self._registry.set(self.id, attr, value, at=at)
        self._apply(attr, value)
        return None

    def set_many(self, values: Mapping[str, Any], at: int | None = None) -> list[Change]:
        """Write several knobs at once, all or nothing (an HTTP PATCH): every value is validated before any is
        applied, and if a hook refuses one, those already applied are put back."""
        if self._registry is not None:
            return self._registry.set_many(self.id, values, at=at)
        self._apply_many(values)
        return []

    def describe(self) -> list[dict[str, Any]]:
        """One map per attribute: name, kind (stat|knob), type, unit, writable, range, choices, default, doc,
        value; what a GUI needs to draw an editor for the control table."""
        return [describe_attribute(a, a.value_of(self)) for a in self._ct_attrs.values()]

    def history(self) -> list[Change]:
        """The recorded changes of this entity's knobs, oldest first (empty when not registered)."""
        if self._registry is None or self.id is None:
            return []
        return self._registry.history(self.id)

    # -- machinery shared with Registry ---------------------------------------------------------------------
    def _attr(self, name: str) -> Attribute:
        try:
            return self._ct_attrs[name]
        except (KeyError, TypeError):
            names = list(self._ct_attrs)
            hint = difflib.get_close_matches(str(name), names, n=1)
            msg = f"{self.label}: no attribute {name!r}"
            msg += f"; did you mean {hint[0]!r}?" if hint else ""
            msg += f" (attributes: {', '.join(names) or 'none'})"
            raise NoSuchAttributeError(msg, entity_id=self.id, attr=str(name)) from None

    def _writable(self, name: str) -> Knob:
        a = self._attr(name)
        if not isinstance(a, Knob):
            knobs = [n for n, x in self._ct_attrs.items() if isinstance(x, Knob)]
            raise ReadOnlyAttributeError(
                f"{self.label}: {name!r} is a read-only statistic; writable attributes: "
                f"{', '.join(knobs) or 'none'}", entity_id=self.id, attr=name)
        return a

    def _check(self, name: str, value: Any) -> tuple[Knob, Any]:
        """Validate a control-table write without applying it: the knob and the value as it would be stored."""
        knob = self._writable(name)
        try:
            return knob, knob.coerce(value)
        except Refused as exc:
            raise knob.error(value, exc.reason, who=self.label, entity_id=self.id) from None

    def _apply(self, name: str, value: Any) -> tuple[Any, Any] | None:
        """Validate and apply one write and run its hook; ``(old, new)``, or None when nothing changed."""
        knob, new = self._check(name, value)
        return self._put(knob, new, value)

    def _put(self, knob: Knob, new: Any, given: Any) -> tuple[Any, Any] | None:
        old = getattr(self, knob.slot, knob.default)
        if _same(old, new):
            return None
        object.__setattr__(self, knob.slot, new)
        hook = self._ct_hooks.get(knob.name)
        if hook is not None:
            try:
                (getattr(self, hook) if isinstance(hook, str) else _bind(hook, self))(old, new)
            except BaseException as exc:
                object.__setattr__(self, knob.slot, old)
                if not isinstance(exc, Exception):
                    raise
                raise HookError(
                    f"{self.label}: setting {knob.name!r} to {given!r} was refused, value kept at {old!r}: "
                    f"{exc}", entity_id=self.id, attr=knob.name, value=given, allowed=knob.allowed()) from exc
        return old, new

    def _apply_many(self, values: Mapping[str, Any]) -> list[tuple[str, Any, Any]]:
        """All-or-nothing version of ``_apply``: ``[(name, old, new)]`` of the values that changed."""
        checked = [(self._check(name, value), value) for name, value in values.items()]
        done: list[tuple[Knob, Any, Any]] = []
        try:
            for (knob, new), given in checked:
                r = self._put(knob, new, given)
                if r is not None:
                    done.append((knob, r[0], r[1]))
        except HookError as exc:
            for knob, old, new in reversed(done):  # undo, hooks included, newest first
                object.__setattr__(self, knob.slot, old)
                hook = self._ct_hooks.get(knob.name)
                if hook is not None:
                    try:
                        (getattr(self, hook) if isinstance(hook, str) else _bind(hook, self))(new, old)
                    except Exception as undo_exc:  # keep the value restored; say what the hook did
                        exc.add_note(f"undoing {knob.name!r} also failed in its hook: {undo_exc}")
            raise
        return [(k.name, old, new) for k, old, new in done]


def describe_attribute(a: Attribute, value: Any = None) -> dict[str, Any]:
    """The description of one declared attribute, as ``Entity.describe`` and ``docgen`` show it."""
    return {
        "name": a.name,
        "kind": a.kind,
        "type": a.type_text,
        "unit": a.unit,
        "writable": a.writable,
        "range": a.range(),
        "choices": a.choices(),
        "default": a.default,
        "doc": a.doc,
        "value": value,
    }


def _bind(fn: Callable[..., Any], obj: Any) -> Callable[[Any, Any], Any]:
    return lambda old, new: fn(obj, old, new)


def _same(old: Any, new: Any) -> bool:
    if old is new:
        return True
    if type(old) is not type(new):
        return False
    try:
        return bool(old == new)
    except Exception:  # e.g. arrays, whose == is elementwise
        return False


_HOOK = re.compile(r"on_set_(\w+)$")


def _build_control_table(cls: type[Entity]) -> None:
    """Collect ``cls``'s declarations (bases first; a subclass may redeclare an attribute, which keeps its
    place, or hide it with a plain class attribute), check them, and take plain statistics out of the class
    body so that they are ordinary instance attributes."""
    own = tuple(v for v in vars(cls).values() if isinstance(v, Attribute))
    cls._ct_own = own
    by_py: dict[str, Attribute] = {}
    for klass in reversed(cls.__mro__):
        declared = vars(klass).get("_ct_own", ())
        names = {a.pyname for a in declared}
        for name in vars(klass):
            if name in by_py and name not in names:
                del by_py[name]  # hidden by a plain class attribute or method of a subclass
        for a in declared:
            by_py[a.pyname] = a
    attrs: dict[str, Attribute] = {}
    for pyname, a in by_py.items():
        if a.name in _RESERVED:
            raise TypeError(f"{cls.__name__}.{pyname}: the control-table name {a.name!r} is reserved")
        if a.name in attrs:
            raise TypeError(f"{cls.__name__}: two attributes are named {a.name!r} in the control table")
        attrs[a.name] = a
    cls._ct_attrs = attrs
    for a in own:
        if type(a) is Stat:
            delattr(cls, a.pyname)

    hooks: dict[str, Any] = {}
    knob_names = {n for n, a in attrs.items() if isinstance(a, Knob)}
    knob_names |= {a.pyname for a in attrs.values() if isinstance(a, Knob)}
    for name in dir(cls):
        m = _HOOK.match(name)
        if m and m.group(1) not in knob_names:
            raise TypeError(f"{cls.__name__}.{name}: there is no knob {m.group(1)!r} for this hook")
    for name, a in attrs.items():
        if not isinstance(a, Knob):
            continue
        if a.on_set is not None:
            if isinstance(a.on_set, str) and not callable(getattr(cls, a.on_set, None)):
                raise TypeError(f"{cls.__name__}: knob {name!r} names hook {a.on_set!r}, which is not a method")
            hooks[name] = a.on_set
        elif hasattr(cls, f"on_set_{name}"):
            hooks[name] = f"on_set_{name}"
        elif hasattr(cls, f"on_set_{a.pyname}"):
            hooks[name] = f"on_set_{a.pyname}"
    cls._ct_hooks = hooks

    cls._ct_init = tuple((a.slot, a.default) for a in attrs.values() if not isinstance(a, ComputedStat))
    cls._ct_copy = tuple(slot for slot, d in cls._ct_init if isinstance(d, _MUTABLE))
    cls._ct_kind = next((k for k in (vars(c).get("kind") for c in cls.__mro__) if isinstance(k, str)), "entity")


_build_control_table(Entity)
