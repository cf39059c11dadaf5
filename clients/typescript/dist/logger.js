// Logging: the library writes through a Logger, never to the console directly.
const RANK = { debug: 10, info: 20, warn: 30, error: 40, silent: 100 };
function parseLevel(value) {
    const v = value?.trim().toLowerCase();
    return v !== undefined && v in RANK ? v : undefined;
}
/**
 * A logger that passes the calls at `level` and above to `target` (by default the console, whose
 * `warn` and `error` write to stderr). The library's default is
 * `levelLogger(process.env.PG_WF_LOG_LEVEL ?? 'warn')`: quiet unless something needs attention.
 */
export function levelLogger(level = 'warn', target = console) {
    const min = RANK[parseLevel(level) ?? 'warn'];
    const pass = (l) => RANK[l] >= min;
    return {
        debug: (m) => { if (pass('debug'))
            target.debug(m); },
        info: (m) => { if (pass('info'))
            target.info(m); },
        warn: (m) => { if (pass('warn'))
            target.warn(m); },
        error: (m) => { if (pass('error'))
            target.error(m); },
    };
}
export function defaultLogger() {
    return levelLogger(parseLevel(process.env.PG_WF_LOG_LEVEL) ?? 'warn');
}
