// Connection strings: URLs (postgresql://...) as node-postgres reads them, and libpq's
// keyword=value form (host=/tmp port=5432 dbname=app), which node-postgres does not read, so that
// one DSN serves the Python and the TypeScript library alike.
import type pg from 'pg';

const KEYWORDS: Record<string, string> = {
  host: 'host',
  hostaddr: 'host',
  port: 'port',
  dbname: 'database',
  user: 'user',
  password: 'password',
  application_name: 'application_name',
  options: 'options',
  connect_timeout: 'connect_timeout',
  sslmode: 'sslmode',
};

/** libpq's keyword=value list: values bare, or in single quotes with \' and \\ escapes. */
function parseKeywordValue(dsn: string): Record<string, string> {
  const out: Record<string, string> = {};
  let i = 0;
  const n = dsn.length;
  const skipSpace = () => {
    while (i < n && /\s/.test(dsn[i]!)) i++;
  };
  for (;;) {
    skipSpace();
    if (i >= n) return out;
    let key = '';
    while (i < n && dsn[i] !== '=' && !/\s/.test(dsn[i]!)) key += dsn[i++];
    skipSpace();
    if (dsn[i] !== '=') throw new Error(`pg_wf: bad connection string: "=" expected after "${key}"`);
    i++;
    skipSpace();
    let value = '';
    if (dsn[i] === "'") {
      i++;
      for (;;) {
        if (i >= n) throw new Error('pg_wf: bad connection string: unterminated quote');
        const c = dsn[i++]!;
        if (c === "'") break;
        if (c === '\\' && i < n) value += dsn[i++];
        else value += c;
      }
    } else {
      while (i < n && !/\s/.test(dsn[i]!)) {
        const c = dsn[i++]!;
        if (c === '\\' && i < n) value += dsn[i++];
        else value += c;
      }
    }
    out[key] = value;
  }
}

/**
 * A node-postgres client config from a connection string: a URL (`postgresql://u@h/db`) or libpq's
 * keyword=value form (`host=/tmp port=5432 dbname=app user=worker`). Use it for a `pg.Pool` of
 * your own that should connect where the worker does.
 */
export function connectionConfig(dsn: string): pg.ClientConfig {
  const trimmed = dsn.trim();
  if (trimmed === '' || /^[a-z][a-z0-9+.-]*:\/\//i.test(trimmed)) return { connectionString: trimmed };
  const kv = parseKeywordValue(trimmed);
  const config: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(kv)) {
    const name = KEYWORDS[key];
    if (name === undefined) {
      throw new Error(`pg_wf: connection string keyword "${key}" is not supported here: use a URL or a client config`);
    }
    if (name === 'port') config.port = Number(value);
    else if (name === 'connect_timeout') config.connectionTimeoutMillis = Number(value) * 1000;
    else if (name === 'sslmode') {
      // as node-postgres reads sslmode in a URL: verify-full and verify-ca check the certificate
      if (value === 'disable') config.ssl = false;
      else if (value === 'verify-full' || value === 'verify-ca') config.ssl = {};
      else if (value === 'require') config.ssl = { rejectUnauthorized: false };
      else if (value !== 'prefer' && value !== 'allow') throw new Error(`pg_wf: sslmode "${value}" is not supported`);
    } else config[name] = value;
  }
  return config as pg.ClientConfig;
}
