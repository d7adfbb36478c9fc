-- converge: drop flowed_spec. Forward-only.
--
-- flowed_spec(dependent, spec) computed one dependent's flowed spec with a query per call;
-- since 0012 the cascade uses flowed_specs(ids) for a whole batch, and nothing else calls it.
DROP FUNCTION flowed_spec(uuid, jsonb);
