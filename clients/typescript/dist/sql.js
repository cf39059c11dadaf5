/** A Duration as interval text (numbers are milliseconds); undefined and null stay as they are. */
export function interval(d) {
    if (d === undefined || d === null)
        return d;
    if (typeof d === 'number') {
        if (!Number.isFinite(d))
            throw new RangeError(`pg_wf: a duration must be finite, got ${d}`);
        return `${d} milliseconds`;
    }
    return d;
}
/** Milliseconds of a Duration given as a number; a string is only known to the server. */
export function millis(d) {
    return typeof d === 'number' ? d : undefined;
}
/**
 * JSON text for a jsonb parameter. node-postgres would turn a JS array into a PostgreSQL array
 * literal, so every JSON value is sent as text and cast to jsonb in the SQL.
 */
export function json(value) {
    if (value === undefined)
        return value;
    return JSON.stringify(value);
}
export function timestamp(t) {
    if (t === undefined || t === null)
        return t;
    return t instanceof Date ? t.toISOString() : t;
}
/** A bigint job id (node-postgres reads int8 as text) as a number. */
export function toId(value) {
    const n = typeof value === 'number' ? value : Number(value);
    if (!Number.isSafeInteger(n))
        throw new RangeError(`pg_wf: job id ${String(value)} is not a safe integer`);
    return n;
}
/**
 * Builds `fn($1::t, ..., name => $n::t, ...)`: the positional arguments, then the named ones that
 * are not undefined (left out, they take the function's default).
 */
export function call(fn, positional, named = {}) {
    const values = [];
    const parts = [];
    for (const [value, type] of positional) {
        values.push(value);
        parts.push(`$${values.length}::${type}`);
    }
    for (const [name, [value, type]] of Object.entries(named)) {
        if (value === undefined)
            continue;
        values.push(value);
        parts.push(`${name} => $${values.length}::${type}`);
    }
    return { text: `${fn}(${parts.join(', ')})`, values };
}
