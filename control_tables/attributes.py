"""Control-table attribute declarations: ``Stat`` (read-only statistic) and ``Knob`` (validated setting).

Source: SPEC section 8; digest-004 section 2.I, R-ENT-02..05 (STREAM's Control Table, P1 section 6.1: statistics
attributes such as a queue's ``Count``, control attributes such as a synopsis's ``Memory``). An entity declares
its control table in its class body, so whoever opens an operator sees its statistics and knobs, and the
attribute tables in ``docs/control-tables.md`` are generated from the same declarations (``docgen``)::

    class SelectOp(Entity):
        tuples_in = Stat(int, unit="tuples", doc="tuples consumed")
        priority = Knob(int, default=0, ge=0, le=1000, doc="scheduler hint; higher runs first")

Cost. Operators touch statistics on every batch, so a plain ``Stat`` is not a descriptor at all: when the
entity class is built, ``Entity`` moves the declaration out of the class body into the class's control-table
metadata, and each new instance gets the default as an ordinary instance attribute (set one by one, so that
CPython keeps its fast inline attribute values). ``self.tuples_in += n`` is then exactly a plain attribute
update. Measured with ``timeit`` on CPython 3.11.7 (this container, best of 5 x 2M): ``o.n += 1`` costs
17.3 ns on a plain object and 17.3 ns on a ``Stat`` (ratio 1.0); a version where ``Stat`` was a non-data
descriptor cost 38 ns, and one that touched ``obj.__dict__`` 48 ns, which is why neither is used.
A ``Knob`` is a *data* descriptor, because an assignment to a knob is validated even when the entity's own
code makes it: a knob read costs about 60 ns instead of 7 ns (read knobs per batch, never per tuple) and a
validated write about 0.6 us. Re-measure with ``python -m timeit`` when it matters.
"""

from __future__ import annotations

import math
import numbers
import types
import typing
from collections.abc import Callable
from typing import Any, Literal, get_args, get_origin

from .errors import InvalidValueError

_MISSING: Any = object()
_NO: Any = object()  # "this alternative does not accept the value"


class Refused(Exception):
    """Internal signal: a value failed validation; ``reason`` says why. Turned into ``InvalidValueError`` by
    the caller, which knows the entity id."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


# --------------------------------------------------------------------------------------------------------------
# types
# --------------------------------------------------------------------------------------------------------------

def _check_int(v: Any) -> Any:
    if isinstance(v, bool) or not isinstance(v, numbers.Integral):
        return _NO
    return int(v)


def _check_float(v: Any) -> Any:
    # An int is a fine value for a float knob (JSON writes 2.0 as 2); it is stored as a float.
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        return _NO
    f = float(v)
    return _NO if math.isnan(f) else f


def _check_bool(v: Any) -> Any:
    return v if isinstance(v, bool) else _NO


def _check_str(v: Any) -> Any:
    return v if isinstance(v, str) else _NO


def _check_none(v: Any) -> Any:
    return None if v is None else _NO


_SIMPLE: dict[Any, Callable[[Any], Any]] = {
    int: _check_int, float: _check_float, bool: _check_bool, str: _check_str, type(None): _check_none,
    None: _check_none,
}


class TypeSpec:
    """A type annotation (``int``, ``float``, ``bool``, ``str``, ``X | None``, ``Optional[X]``,
    ``Literal[...]``, any class, ``Any``) compiled into a checker, a text for humans and its literal values.

    Values are never converted from text: ``"10"`` is not an int. Bools are not numbers, although Python
    says ``True == 1``. An int is accepted where a float is expected and stored as a float.

    >>> TypeSpec(int | None).text, TypeSpec(Literal["a", "b"]).literals
    ('int | None', ('a', 'b'))
    >>> TypeSpec(float).check(2), TypeSpec(int).check(True) is _NO
    (2.0, True)
    """

    def __init__(self, tp: Any) -> None:
        self.annotation = tp
        self._checks: list[Callable[[Any], Any]] = []
        self._texts: list[str] = []
        self.literals: tuple[Any, ...] | None = None
        self.allows_none = False
        self.numeric = False
        self.plain: list[type] = []  # int, float, bool, str accepted as such (not through a Literal)
        self._add(tp)

    def _add(self, tp: Any) -> None:
        origin = get_origin(tp)
        if origin is typing.Union or isinstance(tp, types.UnionType):
            for arg in get_args(tp):
                self._add(arg)
        elif origin is Literal:
            values = get_args(tp)
            self.literals = (self.literals or ()) + values

            def check(v: Any, values: tuple[Any, ...] = values) -> Any:
                for lv in values:
                    if type(v) is type(lv) and v == lv:
                        return lv
                return _NO

            self._checks.append(check)
            for lv in values:
                if lv is None:
                    self.allows_none = True
                self._text("None" if lv is None else type(lv).__name__)
        elif tp is Any:
            self._checks.append(lambda v: v)
            self._text("any")
        elif tp in _SIMPLE:
            if tp is None or tp is type(None):
                self.allows_none = True
                self._text("None")
            else:
                self.numeric |= tp in (int, float)
                self.plain.append(tp)
                self._text(tp.__name__)
            self._checks.append(_SIMPLE[tp])
        elif isinstance(tp, type):
            self._checks.append(lambda v, tp=tp: v if isinstance(v, tp) else _NO)
            self._text(tp.__name__)
        else:
            raise TypeError(f"unsupported control-table type {tp!r}: use int, float, bool, str, a class, "
                            f"X | None or Literal[...]")

    def _text(self, t: str) -> None:
        if t not in self._texts:
            self._texts.append(t)

    @property
    def text(self) -> str:
        """The type as users read it, ``None`` last: ``int | None``; a ``Literal`` of strings reads ``str``."""
        return " | ".join([t for t in self._texts if t != "None"] + (["None"] if self.allows_none else []))

    def check(self, v: Any) -> Any:
        """The value, converted (int -> float for a float), or ``_NO`` when no alternative accepts it."""
        for c in self._checks:
            out = c(v)
            if out is not _NO:
                return out
        return _NO

    def why_not(self, v: Any) -> str:
        """Why ``check`` refused ``v``, in words that tell a caller what to send instead."""
        if isinstance(v, bool) and self.numeric:
            return "a bool is not a number"
        if isinstance(v, float) and math.isnan(v):
            return "NaN is not allowed"
        if isinstance(v, str) and str not in self.plain and (self.numeric or bool in self.plain):
            want = "a JSON number" if self.numeric else "true or false"
            return f"got a string; text is not converted, send {want}"
        if self.literals is not None and any(type(v) is type(lv) for lv in self.literals):
            return "not one of the allowed values"
        return f"wrong type {type(v).__name__}"


def _default_for(spec: TypeSpec) -> Any:
    """The default a declaration gets when it gives none: None if allowed, else the type's zero."""
    if spec.allows_none:
        return None
    if spec.plain:
        return {int: 0, float: 0.0, bool: False, str: ""}[spec.plain[0]]
    if spec.literals:
        return spec.literals[0]
    return _MISSING


def _short(v: Any, limit: int = 80) -> str:
    r = repr(v)
    return r if len(r) <= limit else r[: limit - 3] + "..."


# --------------------------------------------------------------------------------------------------------------
# attributes
# --------------------------------------------------------------------------------------------------------------

class Attribute:
    """What ``Stat`` and ``Knob`` share: a control-table name, a type, a unit, a default and a doc line.

    ``name`` is the control-table name; it defaults to the Python attribute name and may differ from it (a
    synopsis's knob ``kind`` can live in a Python attribute ``kind_knob``).
    """

    kind: str = "attribute"  # "stat" or "knob"
    writable: bool = False
    _slot_prefix = ""  # the instance attribute holding the value is _slot_prefix + the Python name

    def __init__(self, type_: Any, *, default: Any = _MISSING, unit: str | None = None, doc: str = "",
                 name: str | None = None) -> None:
        self.type = type_
        self.spec = TypeSpec(type_)
        self.unit = unit
        self.doc = doc
        self.name: str = name or ""
        self.pyname: str = ""
        self.slot: str = ""
        self.default = _default_for(self.spec) if default is _MISSING else default
        if self.default is _MISSING:
            raise TypeError(f"{type(self).__name__}({self.spec.text}) needs a default")

    def __set_name__(self, owner: type, pyname: str) -> None:
        if not self.pyname:
            self.pyname = pyname
            self.slot = self._slot_prefix + pyname
        if not self.name:
            self.name = pyname

    @property
    def type_text(self) -> str:
        """The declared type as text, e.g. ``int | None``."""
        return self.spec.text

    def value_of(self, obj: Any) -> Any:
        """The attribute's current value on ``obj``."""
        return getattr(obj, self.slot, self.default)

    def range(self) -> dict[str, Any] | None:
        """The bounds given (``ge``, ``le``, ``gt``, ``lt``), or None."""
        return None

    def choices(self) -> list[Any] | None:
        """The values allowed, when the declaration lists them, else None."""
        return list(self.spec.literals) if self.spec.literals else None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name}: {self.spec.text})"


class Stat(Attribute):
    """A read-only statistic (tuples in/out, selectivity, bytes...), updated by its own entity.

    The entity assigns it like any attribute (``self.tuples_in += n``): the declaration is moved out of the
    class into the class's control-table metadata, the value is an ordinary instance attribute, and reads and
    writes cost what a plain attribute costs (see the module docstring). The control-table API refuses to
    write it. ``compute`` (a method name or a function of the entity) makes a statistic computed when read,
    for values that already live elsewhere (``len(self._items)``); such a statistic cannot be assigned.

    >>> s = Stat(int, unit="tuples", doc="tuples consumed")
    >>> s.default, s.writable, s.type_text
    (0, False, 'int')
    """

    kind = "stat"
    writable = False

    def __new__(cls, *args: Any, compute: str | Callable[[Any], Any] | None = None, **kwargs: Any) -> Stat:
        if compute is not None and cls is Stat:
            return super().__new__(ComputedStat)
        return super().__new__(cls)

    def __init__(self, type_: Any, *, default: Any = _MISSING, unit: str | None = None, doc: str = "",
                 name: str | None = None, compute: str | Callable[[Any], Any] | None = None) -> None:
        super().__init__(type_, default=default, unit=unit, doc=doc, name=name)
        self.compute = compute

    # A plain Stat is deliberately not a descriptor: Entity takes it out of the class body once the class is
    # built, so that ``self.tuples_in`` is an ordinary instance attribute (see the module docstring).


class ComputedStat(Stat):
    """A statistic computed on read from ``compute``; created by ``Stat(..., compute=...)``."""

    def __get__(self, obj: Any, objtype: type | None = None) -> Any:
        if obj is None:
            return self
        c = self.compute
        return getattr(obj, c)() if isinstance(c, str) else c(obj)  # type: ignore[misc]

    def __set__(self, obj: Any, value: Any) -> None:
        raise AttributeError(f"{self.name!r} is a computed statistic and cannot be assigned")


class Knob(Attribute):
    """A writable setting, validated on every write: through the control table (``Entity.set``,
    ``Registry.set``), and also when the entity's own code assigns it, so a bad value from a config file is
    caught where it enters.

    Validation, in order: the type (``int``, ``float``, ``bool``, ``str``, ``X | None``, ``Literal[...]``;
    bools are not ints; an int is fine for a float; text is never converted), ``choices``, the bounds
    ``ge``/``le``/``gt``/``lt`` (None passes them), then ``validate(value)``, a custom check that returns
    None or True to accept, False or a message string to refuse, or raises ``ValueError``.

    ``on_set`` names the entity method that reacts to a control-table write, ``method(old, new)``; without
    it the entity's ``on_set_<name>`` method is used when there is one. A hook that raises makes the write
    fail and the old value is put back.

    >>> k = Knob(int, default=0, ge=0, le=1000, doc="scheduler hint")
    >>> k.coerce(7), k.allowed()
    (7, 'int with 0 <= value <= 1000')
    >>> k.coerce(-1)
    Traceback (most recent call last):
    ...
    control_tables.attributes.Refused: -1 is below the minimum 0
    """

    kind = "knob"
    writable = True
    _slot_prefix = "_knob_"

    def __init__(self, type_: Any, *, default: Any = _MISSING, unit: str | None = None, doc: str = "",
                 name: str | None = None, ge: float | None = None, le: float | None = None,
                 gt: float | None = None, lt: float | None = None, choices: typing.Iterable[Any] | None = None,
                 validate: Callable[[Any], Any] | None = None,
                 on_set: str | Callable[[Any, Any, Any], Any] | None = None) -> None:
        self.ge, self.le, self.gt, self.lt = ge, le, gt, lt
        self._choices = tuple(choices) if choices is not None else None
        self.validate = validate
        self.on_set = on_set
        super().__init__(type_, default=default, unit=unit, doc=doc, name=name)
        if (ge, le, gt, lt) != (None, None, None, None) and not self.spec.numeric:
            raise TypeError(f"Knob({self.spec.text}): bounds need an int or float type")
        if self._choices is not None:
            for c in self._choices:
                if self.spec.check(c) is _NO:
                    raise TypeError(f"Knob({self.spec.text}): choice {c!r} is not of the knob's type")
        try:
            self.default = self.coerce(self.default)
        except Refused as exc:
            raise TypeError(f"Knob({self.spec.text}): default {self.default!r} is not allowed: "
                            f"{exc.reason}") from None

    # -- descriptor: the value lives in the instance attribute ``_knob_<python name>`` (``slot``) ----------------
    def __get__(self, obj: Any, objtype: type | None = None) -> Any:
        if obj is None:
            return self
        return getattr(obj, self.slot, self.default)

    def __set__(self, obj: Any, value: Any) -> None:
        try:
            object.__setattr__(obj, self.slot, self.coerce(value))
        except Refused as exc:
            raise self.error(value, exc.reason, who=getattr(obj, "label", type(obj).__name__),
                             entity_id=getattr(obj, "id", None)) from None

    # -- validation ------------------------------------------------------------------------------------------
    def coerce(self, value: Any) -> Any:
        """The value as it will be stored, or ``Refused`` saying why it is not allowed. Changes nothing."""
        v = self.spec.check(value)
        if v is _NO:
            raise Refused(self.spec.why_not(value))
        if v is None:
            return v
        if self._choices is not None and not any(type(v) is type(c) and v == c for c in self._choices):
            raise Refused("not one of the choices")
        if self.ge is not None and not v >= self.ge:
            raise Refused(f"{_short(v)} is below the minimum {self.ge}")
        if self.gt is not None and not v > self.gt:
            raise Refused(f"{_short(v)} is not above {self.gt}")
        if self.le is not None and not v <= self.le:
            raise Refused(f"{_short(v)} is above the maximum {self.le}")
        if self.lt is not None and not v < self.lt:
            raise Refused(f"{_short(v)} is not below {self.lt}")
        if self.validate is not None:
            try:
                verdict = self.validate(v)
            except (ValueError, TypeError) as exc:
                raise Refused(str(exc) or f"refused by {_name(self.validate)}") from None
            if verdict is False:
                raise Refused(f"refused by {_name(self.validate)}")
            if isinstance(verdict, str):
                raise Refused(verdict)
        return v

    def error(self, value: Any, reason: str, *, who: str, entity_id: str | None = None) -> InvalidValueError:
        """The ``InvalidValueError`` for a refused write: names the entity, the attribute, the value given,
        why it was refused and what is allowed."""
        allowed = self.allowed()
        return InvalidValueError(
            f"{who}: cannot set {self.name!r} to {_short(value)}: {reason}; allowed: {allowed}",
            entity_id=entity_id, attr=self.name, value=value, allowed=allowed)

    def choices(self) -> list[Any] | None:
        if self._choices is not None:
            return list(self._choices)
        return super().choices()

    def range(self) -> dict[str, Any] | None:
        r = {k: v for k, v in (("ge", self.ge), ("gt", self.gt), ("le", self.le), ("lt", self.lt))
             if v is not None}
        return r or None

    def range_text(self) -> str | None:
        """The bounds as ``0 <= value <= 1000``, ``value > 0``..., or None."""
        lo = f"{self.ge} <=" if self.ge is not None else f"{self.gt} <" if self.gt is not None else None
        hi = f"<= {self.le}" if self.le is not None else f"< {self.lt}" if self.lt is not None else None
        if lo and hi:
            return f"{lo} value {hi}"
        if lo:
            return "value " + (f">= {self.ge}" if self.ge is not None else f"> {self.gt}")
        if hi:
            return f"value {hi}"
        return None

    def allowed(self) -> str:
        """What a write may give, in one phrase: ``int with value >= 0, or None``."""
        choices = self.choices()
        if choices is not None:
            base = "one of " + ", ".join(repr(c) for c in choices)
        else:
            base = " | ".join(t for t in self.spec.text.split(" | ") if t != "None")
        rng = self.range_text()
        if rng:
            base += f" with {rng}"
        if self.validate is not None:
            base += f", accepted by {_name(self.validate)}"
        if self.spec.allows_none and (choices is None or None not in choices):
            base = f"{base}, or None" if base else "None"
        return base


def _name(fn: Any) -> str:
    return getattr(fn, "__name__", None) or repr(fn)


# --------------------------------------------------------------------------------------------------------------
# cheap statistics
# --------------------------------------------------------------------------------------------------------------

def ewma(old: float | None, sample: float, alpha: float = 0.2) -> float:
    """Exponentially weighted moving average: ``alpha * sample + (1 - alpha) * old``.

    Used for cost per tuple and selectivity, updated once per batch (not per tuple) so that the statistic
    costs nothing measurable. When ``old`` is None the sample is the first value: declare such a statistic
    ``Stat(float | None, default=None)`` so the first batches are not pulled towards an arbitrary 0.

    >>> ewma(None, 0.5)
    0.5
    >>> round(ewma(0.5, 1.0, alpha=0.2), 6)
    0.6
    """
    if old is None:
        return float(sample)
    return alpha * sample + (1.0 - alpha) * old
