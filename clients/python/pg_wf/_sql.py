"""How the library calls the wf_* functions: named arguments, explicit casts.

Only the arguments a caller gives are sent, so every omitted one takes the
server's default. Every parameter is cast in the SQL text (`%s::interval`),
so that Python strings such as '5 minutes' work wherever a number of seconds
or a timedelta does.
"""
from __future__ import annotations

from datetime import timedelta
from typing import Any, Callable, Iterable, Optional, Sequence, Tuple

import psycopg
from psycopg.types.json import Jsonb

# (name or None for a positional argument, value, SQL type)
Arg = Tuple[Optional[str], Any, str]


def interval(value: Any) -> Any:
    """Seconds (int, float), a timedelta or an interval string."""
    if value is None or isinstance(value, (timedelta, str)):
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"an interval is seconds, a timedelta or a string, not {value!r}")
    return timedelta(seconds=value)


def adapt(value: Any, sql_type: str) -> Any:
    if value is None:
        return None
    if sql_type == "jsonb":
        return Jsonb(value)
    if sql_type == "jsonb[]":
        return [Jsonb(v) for v in value]
    if sql_type == "interval":
        return interval(value)
    if sql_type == "uuid":
        return str(value)
    if sql_type.endswith("[]"):
        return list(value)
    return value


def call(function: str, args: Iterable[Arg]) -> Tuple[str, list]:
    """`function(%s::type, name => %s::type, ...)` and its parameters; named
    arguments whose value is None are left out (the server's default)."""
    parts, params = [], []
    for name, value, sql_type in args:
        if name is None:
            parts.append(f"%s::{sql_type}")
        elif value is None:
            continue
        else:
            parts.append(f"{name} => %s::{sql_type}")
        params.append(adapt(value, sql_type))
    return f"{function}({', '.join(parts)})", params


def is_async(conn: Any) -> bool:
    return isinstance(conn, (psycopg.AsyncConnection, psycopg.AsyncCursor))


def _run(conn: Any, sql: str, params: list, fetch: str, then: Optional[Callable]) -> Any:
    """Runs on a connection or cursor; on an async one, returns a coroutine."""
    finish = then or (lambda value: value)
    if is_async(conn):
        async def run() -> Any:
            cur = await conn.execute(sql, params)
            return finish(await getattr(cur, fetch)())
        return run()
    return finish(getattr(conn.execute(sql, params), fetch)())


def scalar(conn: Any, function: str, args: Sequence[Arg], then: Optional[Callable] = None) -> Any:
    """SELECT function(...): its one value (then `then(value)`)."""
    expr, params = call(function, args)
    return _run(conn, f"SELECT {expr}", params, "fetchone",
                lambda row: (then or (lambda v: v))(row[0]))


def rows(conn: Any, columns: str, function: str, args: Sequence[Arg],
         then: Optional[Callable] = None) -> Any:
    """SELECT columns FROM function(...): every row (then `then(rows)`)."""
    expr, params = call(function, args)
    return _run(conn, f"SELECT {columns} FROM {expr}", params, "fetchall", then)
