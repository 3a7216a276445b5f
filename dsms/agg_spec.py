"""Aggregate specs as the logical plan holds them, ``(func, column, distinct)``, and the constant parameter
an approximate aggregate carries in its function name (issue 14 item 4); the planner and the aggregate
operators both read them, so they live below both."""

from __future__ import annotations

#: approximate aggregates: (result type given the argument's type, or None for the argument's own type)
APPROX_RESULT_TYPES: dict[str, str | None] = {"APPROX_COUNT_DISTINCT": "INT", "APPROX_QUANTILE": None,
                                              "APPROX_TOP_K": "STRING"}


def agg_func(func: str) -> tuple[str, float | int | None]:
    """An aggregate spec's function and its constant parameter: ``"APPROX_QUANTILE:0.5"`` is APPROX_QUANTILE
    with q = 0.5 (the parameter is part of the function, so specs stay (func, column, distinct) triples and
    two queries share an aggregate only when the parameter is the same).

    >>> agg_func("APPROX_QUANTILE:0.5"), agg_func("APPROX_TOP_K:3"), agg_func("SUM")
    (('APPROX_QUANTILE', 0.5), ('APPROX_TOP_K', 3), ('SUM', None))
    """
    name, _, p = func.partition(":")
    if not p:
        return name, None
    return name, float(p) if "." in p or "e" in p else int(p)


def agg_label(func: str, arg: int | None, distinct: bool) -> str:
    """An aggregate spec as EXPLAIN shows it.

    >>> agg_label("COUNT", None, False), agg_label("APPROX_QUANTILE:0.9", 2, False)
    ('COUNT(*)', 'APPROX_QUANTILE($2, 0.9)')
    """
    name, p = agg_func(func)
    inner = "*" if arg is None else f"${arg}"
    return f"{name}({'DISTINCT ' if distinct else ''}{inner}{'' if p is None else f', {p}'})"
