import type pg from 'pg';
/**
 * A node-postgres client config from a connection string: a URL (`postgresql://u@h/db`) or libpq's
 * keyword=value form (`host=/tmp port=5432 dbname=app user=worker`). Use it for a `pg.Pool` of
 * your own that should connect where the worker does.
 */
export declare function connectionConfig(dsn: string): pg.ClientConfig;
