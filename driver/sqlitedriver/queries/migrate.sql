-- Bookkeeping around golang-migrate's version table (MigrateUp runs the up
-- migrations itself, in one write transaction; see migrate.go).

-- name: MigrateTableExists
SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations');

-- name: MigrateVersion
SELECT version, dirty FROM schema_migrations LIMIT 1;
