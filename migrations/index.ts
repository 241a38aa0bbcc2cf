import { Initial1764547200000 as PostgresInitial } from './postgres/1764547200000-initial';
import { Initial1764547200000 as SqliteInitial } from './sqlite/1764547200000-initial';

/** Migrations per dialect, in order. Listed explicitly so tests and the built app load the same set. */
export const SQLITE_MIGRATIONS = [SqliteInitial];
export const POSTGRES_MIGRATIONS = [PostgresInitial];
