import type { Duration, Json, Timestamp } from './types.js';
/** A Duration as interval text (numbers are milliseconds); undefined and null stay as they are. */
export declare function interval<T extends Duration | null | undefined>(d: T): string | Exclude<T, Duration>;
/** Milliseconds of a Duration given as a number; a string is only known to the server. */
export declare function millis(d: Duration): number | undefined;
/**
 * JSON text for a jsonb parameter. node-postgres would turn a JS array into a PostgreSQL array
 * literal, so every JSON value is sent as text and cast to jsonb in the SQL.
 */
export declare function json<T extends Json | undefined>(value: T): string | Exclude<T, Json>;
export declare function timestamp<T extends Timestamp | null | undefined>(t: T): string | Exclude<T, Timestamp>;
/** A bigint job id (node-postgres reads int8 as text) as a number. */
export declare function toId(value: unknown): number;
/** A parameter and the SQL type it is cast to. */
export type Arg = [value: unknown, type: string];
/**
 * Builds `fn($1::t, ..., name => $n::t, ...)`: the positional arguments, then the named ones that
 * are not undefined (left out, they take the function's default).
 */
export declare function call(fn: string, positional: Arg[], named?: Record<string, Arg>): {
    text: string;
    values: unknown[];
};
