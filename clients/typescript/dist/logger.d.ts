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
/**
 * A logger that passes the calls at `level` and above to `target` (by default the console, whose
 * `warn` and `error` write to stderr). The library's default is
 * `levelLogger(process.env.PG_WF_LOG_LEVEL ?? 'warn')`: quiet unless something needs attention.
 */
export declare function levelLogger(level?: LogLevel | string, target?: Logger): Logger;
export declare function defaultLogger(): Logger;
