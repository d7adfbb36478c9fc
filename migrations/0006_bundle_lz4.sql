-- Provider-config bundles (WASM components, Starlark zips) are written lz4-compressed rather
-- than with PostgreSQL's default pglz. A 12 MB JavaScript component took 390 ms of server CPU
-- to store with pglz and 84 ms with lz4 (46 ms uncompressed), to about the same size (5.3 vs
-- 5.9 MB), and every kind's default config can carry one. Only values written from now on are
-- lz4; existing ones stay readable as they are. A server built without lz4 keeps pglz.
DO $$
BEGIN
    ALTER TABLE providerconfigs ALTER COLUMN data SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported THEN
    RAISE NOTICE 'this PostgreSQL has no lz4: provider-config bundles stay pglz-compressed';
END
$$;
