// Turning JavaScript values into the parameters of pg_wf's SQL functions and back.
import type { Duration, Json, Timestamp } from './types.js';

/** A Duration as interval text (numbers are milliseconds); undefined and null stay as they are. */
export function interval<T extends Duration | null | undefined>(d: T): string | Exclude<T, Duration> {
  if (d === undefined || d === null) return d as Exclude<T, Duration>;
  if (typeof d === 'number') {
    if (!Number.isFinite(d)) throw new RangeError(`pg_wf: a duration must be finite, got ${d}`);
    return `${d} milliseconds`;
  }
  return d as string;
}

/** Milliseconds of a Duration given as a number; a string is only known to the server. */
export function millis(d: Duration): number | undefined {
  return typeof d === 'number' ? d : undefined;
}

/**
 * JSON text for a jsonb parameter. node-postgres would turn a JS array into a PostgreSQL array
 * literal, so every JSON value is sent as text and cast to jsonb in the SQL.
 */
export function json<T extends Json | undefined>(value: T): string | Exclude<T, Json> {
  if (value === undefined) return value as Exclude<T, Json>;
  return JSON.stringify(value);
}

export function timestamp<T extends Timestamp | null | undefined>(t: T): string | Exclude<T, Timestamp> {
  if (t === undefined || t === null) return t as Exclude<T, Timestamp>;
  return t instanceof Date ? t.toISOString() : (t as string);
}

/** A bigint job id (node-postgres reads int8 as text) as a number. */
export function toId(value: unknown): number {
  const n = typeof value === 'number' ? value : Number(value);
  if (!Number.isSafeInteger(n)) throw new RangeError(`pg_wf: job id ${String(value)} is not a safe integer`);
  return n;
}

/** A parameter and the SQL type it is cast to. */
export type Arg = [value: unknown, type: string];

/**
 * Builds `fn($1::t, ..., name => $n::t, ...)`: the positional arguments, then the named ones that
 * are not undefined (left out, they take the function's default).
 */
export function call(
  fn: string,
  positional: Arg[],
  named: Record<string, Arg> = {},
): { text: string; values: unknown[] } {
  const values: unknown[] = [];
  const parts: string[] = [];
  for (const [value, type] of positional) {
    values.push(value);
    parts.push(`$${values.length}::${type}`);
  }
  for (const [name, [value, type]] of Object.entries(named)) {
    if (value === undefined) continue;
    values.push(value);
    parts.push(`${name} => $${values.length}::${type}`);
  }
  return { text: `${fn}(${parts.join(', ')})`, values };
}
