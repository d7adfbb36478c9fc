-- Tokens with a life cycle (issue 46): bearer tokens minted through the API
-- (POST /api/v1/tokens), listed, revoked (DELETE, which removes the row) and optionally
-- expiring. Only the SHA-256 of a token is stored; the secret is answered once at minting.
-- AUTH_FILE stays the bootstrap and break-glass source; these apply only when it is set.
-- Every process holds the rows in its principal index (converge-auth `Authenticator`),
-- re-read on the `api_tokens_changed` NOTIFY the writers send in their transaction and by a
-- failsafe poll. `last_used_at` is written coalesced (at most once a minute per token and
-- process), off the request path.
CREATE TABLE api_tokens (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name         text NOT NULL UNIQUE CHECK (char_length(name) BETWEEN 1 AND 128),
    token_sha256 bytea NOT NULL UNIQUE CHECK (octet_length(token_sha256) = 32),
    role         text NOT NULL CHECK (role IN ('viewer', 'operator', 'admin', 'worker')),
    kinds        text[] NOT NULL DEFAULT '{}',
    created_at   timestamptz NOT NULL DEFAULT now(),
    created_by   text,
    expires_at   timestamptz,
    last_used_at timestamptz,
    CHECK ((role = 'worker') = (cardinality(kinds) > 0))
);
