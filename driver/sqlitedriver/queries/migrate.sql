-- Bookkeeping around golang-migrate. Its SQLite driver locks only within one
-- migrate instance, so MigrateUp takes this lease row first: two processes (or
-- goroutines) migrating the same file then run one after the other instead of
-- both applying 001 and leaving the schema dirty.

-- name: MigrateLockCreate
CREATE TABLE IF NOT EXISTS drover_migrate_lock (
    name       TEXT    PRIMARY KEY,
    holder     TEXT    NOT NULL,
    expires_at INTEGER NOT NULL
);

-- name: MigrateLockAcquire
INSERT INTO drover_migrate_lock (name, holder, expires_at) VALUES ('migrate', :holder, :expires_at)
ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
WHERE drover_migrate_lock.expires_at < :now
RETURNING holder;

-- name: MigrateLockRelease
DELETE FROM drover_migrate_lock WHERE name = 'migrate' AND holder = :holder;

-- name: MigrateTableExists
SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations');

-- name: MigrateVersion
SELECT version, dirty FROM schema_migrations LIMIT 1;
