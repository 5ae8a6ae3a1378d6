-- Bookkeeping around the version table (MigrateUp runs the up migrations
-- itself, in one write transaction; see migrate.go). Drover's version is in
-- drover_schema_migrations, shaped as golang-migrate's table; an earlier Drover
-- kept it in golang-migrate's default schema_migrations, which an
-- application's own golang-migrate in the same file uses too.

-- name: MigrateTableExists
-- Whether drover_schema_migrations exists, and whether an earlier Drover's
-- version is in schema_migrations instead (Drover's tables exist, its own
-- version table does not: it creates both in one transaction).
SELECT EXISTS (SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'drover_schema_migrations'),
       NOT EXISTS (SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'drover_schema_migrations')
       AND EXISTS (SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'schema_migrations')
       AND EXISTS (SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'drover_jobs');

-- name: MigrateVersion
SELECT version, dirty FROM drover_schema_migrations LIMIT 1;

-- name: MigrateLegacyVersion
SELECT version, dirty FROM schema_migrations LIMIT 1;
