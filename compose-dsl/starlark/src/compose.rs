//! Runs the frozen `compose(spec, config[, root])` of a bundle on a fresh heap, under limits.

use serde_json::Value;
use starlark::{environment::Module, eval::Evaluator};

use crate::{Bundle, ComposeOutput, Error, LimitKind, Limits, json, output, sandbox};

impl Bundle {
    /// Calls `compose(spec, config)` and validates what it returns.
    ///
    /// Each call gets a fresh heap and evaluator: nothing a call allocates survives it, and
    /// the bundle's modules (frozen at load) are shared, never re-evaluated. The result must
    /// be a dict `{children, edges, configs, status}` (see the crate docs). Any error is
    /// terminal and must never be treated as an empty compose.
    pub fn compose(
        &self,
        spec: &Value,
        config: &Value,
        limits: &Limits,
    ) -> Result<ComposeOutput, Error> {
        self.compose_root(&Value::Null, spec, config, limits)
    }

    /// Like [`compose`](Self::compose), handing `root` (the composite's identity, e.g.
    /// `{"name", "kind", "kind_version", "labels"}`) to a `compose` that declares a third
    /// parameter; a two-parameter `compose` never sees it.
    pub fn compose_root(
        &self,
        root: &Value,
        spec: &Value,
        config: &Value,
        limits: &Limits,
    ) -> Result<ComposeOutput, Error> {
        self.count_compose();
        let input = json::len(spec).saturating_add(json::len(config));
        if input > limits.max_input_bytes {
            return Err(Error::Limit(LimitKind::InputSize));
        }
        let deadline = sandbox::Deadline::after(limits.deadline);
        let json = Module::with_temp_heap(|module| {
            let mut eval = Evaluator::new(&module);
            sandbox::limit(&mut eval, limits, &deadline)?;
            let heap = module.heap();
            let compose = heap.access_owned_frozen_value(&self.compose);
            let args = [heap.alloc(spec), heap.alloc(config), heap.alloc(root)];
            let args = if self.takes_root {
                &args[..]
            } else {
                &args[..2]
            };
            let result = match eval.eval_function(compose, args, &[]) {
                Ok(v) => v,
                Err(e) => return Err(sandbox::classify(e, &eval, limits, &deadline)),
            };
            sandbox::check_after(&eval, limits, &deadline)?;
            json::to_json(result)
                .map_err(|e| Error::output(format!("result is not JSON-representable: {e}")))
        })?;
        output::from_json(json, limits)
    }
}
