// Logging: the library writes through a Logger, never to the console directly.

/**
 * What the library logs through. `console` fits, and so do pino, winston and bunyan loggers: each
 * call passes one string.
 */
export interface Logger {
  debug(message: string): void;
  info(message: string): void;
  warn(message: string): void;
  error(message: string): void;
}

export type LogLevel = 'debug' | 'info' | 'warn' | 'error' | 'silent';

const RANK: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40, silent: 100 };

function parseLevel(value: string | undefined): LogLevel | undefined {
  const v = value?.trim().toLowerCase();
  return v !== undefined && v in RANK ? (v as LogLevel) : undefined;
}

/**
 * A logger that passes the calls at `level` and above to `target` (by default the console, whose
 * `warn` and `error` write to stderr). The library's default is
 * `levelLogger(process.env.PG_WF_LOG_LEVEL ?? 'warn')`: quiet unless something needs attention.
 */
export function levelLogger(level: LogLevel | string = 'warn', target: Logger = console): Logger {
  const min = RANK[parseLevel(level) ?? 'warn'];
  const pass = (l: LogLevel) => RANK[l] >= min;
  return {
    debug: (m) => { if (pass('debug')) target.debug(m); },
    info: (m) => { if (pass('info')) target.info(m); },
    warn: (m) => { if (pass('warn')) target.warn(m); },
    error: (m) => { if (pass('error')) target.error(m); },
  };
}

export function defaultLogger(): Logger {
  return levelLogger(parseLevel(process.env.PG_WF_LOG_LEVEL) ?? 'warn');
}
