/**
 * `pg` is loaded when a PostgreSQL database is opened, not when a module that names it is: the
 * standalone (SQLite) control plane never pays for it (ADR 0020).
 */
// eslint-disable-next-line @typescript-eslint/no-require-imports
export const loadPg = () => require('pg') as typeof import('pg');
