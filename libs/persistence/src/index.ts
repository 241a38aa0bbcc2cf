export * from './sql-executor';
export * from './sqlite/sqlite-database';
export * from './postgres/postgres-database';
export * from './worker-session.repository';
export * from './api-key.repository';
export * from './audit.repository';
export * from './open-database';
export * from './migrations/run-migrations';
