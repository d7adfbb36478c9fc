//! A loaded bundle: sources parsed, `load()` graph resolved inside the bundle, every module
//! evaluated and frozen exactly once, and the frozen `compose` function kept for reuse.

use std::{
    collections::{BTreeMap, HashMap},
    sync::atomic::{AtomicU64, Ordering},
};

use starlark::{
    docs::{DocItem, DocMember},
    environment::{FrozenModule, Globals, Module},
    eval::{Evaluator, FileLoader},
    syntax::AstModule,
    values::OwnedFrozenValue,
};

use crate::{Error, Limits, archive, sandbox};

/// The entry file every bundle must have at its root.
pub const ENTRY: &str = "compose.star";

/// A bundle ready to compose: immutable, `Send + Sync`, cheap to share behind an `Arc`.
pub struct Bundle {
    pub(crate) compose: OwnedFrozenValue,
    /// `compose` declares a third parameter: it is called as `compose(spec, config, root)`.
    pub(crate) takes_root: bool,
    modules: HashMap<String, FrozenModule>,
    composes: AtomicU64,
}

/// Counters showing how a bundle was used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BundleStats {
    /// Modules evaluated and frozen; fixed once the bundle is loaded.
    pub modules_frozen: usize,
    /// `compose` calls made on this bundle so far (successful or not).
    pub composes: u64,
}

/// Resolves `load()` against the bundle's already-frozen modules only.
struct BundleLoader<'a> {
    modules: &'a HashMap<String, FrozenModule>,
}

impl FileLoader for BundleLoader<'_> {
    fn load(&self, path: &str) -> starlark::Result<FrozenModule> {
        self.modules.get(path).cloned().ok_or_else(|| {
            starlark::Error::new_other(anyhow::anyhow!("module {path:?} is not in the bundle"))
        })
    }
}

impl Bundle {
    /// Loads a zip of `.star` files with [`ENTRY`] at its root.
    ///
    /// Every file is parsed (so a syntax error anywhere is reported now); the modules
    /// reachable from `compose.star` are evaluated once, in dependency order, under `limits`,
    /// and frozen. `compose.star` must define a function `compose`.
    pub fn from_zip(bytes: &[u8], limits: &Limits) -> Result<Self, Error> {
        let sources = archive::read_sources(bytes, limits)?;
        Self::from_sources(sources, limits)
    }

    /// Like [`Bundle::from_zip`] from already-extracted `path -> source` pairs.
    pub fn from_sources(sources: BTreeMap<String, String>, limits: &Limits) -> Result<Self, Error> {
        for path in sources.keys() {
            archive::check_path(path).map_err(Error::Bundle)?;
        }
        if !sources.contains_key(ENTRY) {
            return Err(Error::bundle(format!("no {ENTRY} at the bundle root")));
        }
        let dialect = sandbox::dialect();
        let mut asts = HashMap::new();
        let mut deps: HashMap<String, Vec<String>> = HashMap::new();
        for (path, src) in sources {
            let ast = AstModule::parse(&path, src, &dialect).map_err(|e| Error::Syntax {
                message: e.to_string(),
            })?;
            let mut loads = Vec::new();
            for load in ast.loads() {
                let target = load.module_id;
                archive::check_path(target)
                    .map_err(|e| Error::bundle(format!("{}: load: {e}", load.span)))?;
                loads.push(target.to_owned());
            }
            deps.insert(path.clone(), loads);
            asts.insert(path, ast);
        }
        let order = load_order(&deps)?;

        let globals = sandbox::globals();
        let mut modules: HashMap<String, FrozenModule> = HashMap::new();
        for path in order {
            let ast = asts.remove(&path).expect("ordered paths are parsed");
            let frozen = evaluate_module(ast, &globals, &modules, limits)?;
            modules.insert(path, frozen);
        }
        let entry = &modules[ENTRY];
        let compose = entry
            .get_option("compose")
            .map_err(|e| Error::bundle(format!("{ENTRY}: {e}")))?
            .ok_or_else(|| {
                Error::bundle(format!("{ENTRY} does not define compose(spec, config)"))
            })?;
        if compose.value().get_type() != "function" {
            return Err(Error::bundle(format!(
                "{ENTRY}: compose is a {}, not a function",
                compose.value().get_type()
            )));
        }
        // `def compose(spec, config, root)` opts into the root's identity; the two-parameter
        // form keeps working.
        let takes_root = match compose.value().documentation() {
            DocItem::Member(DocMember::Function(f)) => {
                f.params.pos_only.len() + f.params.pos_or_named.len() >= 3
                    || f.params.args.is_some()
            }
            _ => false,
        };
        Ok(Self {
            compose,
            takes_root,
            modules,
            composes: AtomicU64::new(0),
        })
    }

    /// Usage counters (for tests and metrics).
    pub fn stats(&self) -> BundleStats {
        BundleStats {
            modules_frozen: self.modules.len(),
            composes: self.composes.load(Ordering::Relaxed),
        }
    }

    pub(crate) fn count_compose(&self) {
        self.composes.fetch_add(1, Ordering::Relaxed);
    }
}

/// Evaluates one module's top level with its dependencies available to `load()`, then
/// freezes it.
fn evaluate_module(
    ast: AstModule,
    globals: &Globals,
    modules: &HashMap<String, FrozenModule>,
    limits: &Limits,
) -> Result<FrozenModule, Error> {
    let loader = BundleLoader { modules };
    let deadline = sandbox::Deadline::after(limits.deadline);
    Module::with_temp_heap(|module| {
        {
            let mut eval = Evaluator::new(&module);
            eval.set_loader(&loader);
            sandbox::limit(&mut eval, limits, &deadline)?;
            if let Err(e) = eval.eval_module(ast, globals) {
                return Err(sandbox::classify(e, &eval, limits, &deadline));
            }
            sandbox::check_after(&eval, limits, &deadline)?;
        }
        module
            .freeze()
            .map_err(|e| Error::bundle(format!("freezing a module failed: {e:?}")))
    })
}

/// Orders the modules reachable from [`ENTRY`] so each comes after everything it loads.
/// A load of a path not in the bundle, or a cycle of loads, is an error.
fn load_order(deps: &HashMap<String, Vec<String>>) -> Result<Vec<String>, Error> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        Visiting,
        Done,
    }
    fn visit(
        path: &str,
        deps: &HashMap<String, Vec<String>>,
        marks: &mut HashMap<String, Mark>,
        stack: &mut Vec<String>,
        order: &mut Vec<String>,
    ) -> Result<(), Error> {
        match marks.get(path) {
            Some(Mark::Done) => return Ok(()),
            Some(Mark::Visiting) => {
                let start = stack.iter().position(|p| p == path).unwrap_or(0);
                let mut cycle = stack[start..].to_vec();
                cycle.push(path.to_owned());
                return Err(Error::bundle(format!("load cycle: {}", cycle.join(" -> "))));
            }
            None => {}
        }
        let Some(loads) = deps.get(path) else {
            let from = stack.last().map(String::as_str).unwrap_or("?");
            return Err(Error::bundle(format!(
                "{from} loads {path:?}, which is not in the bundle"
            )));
        };
        marks.insert(path.to_owned(), Mark::Visiting);
        stack.push(path.to_owned());
        for dep in loads {
            visit(dep, deps, marks, stack, order)?;
        }
        stack.pop();
        marks.insert(path.to_owned(), Mark::Done);
        order.push(path.to_owned());
        Ok(())
    }
    let mut order = Vec::new();
    visit(
        ENTRY,
        deps,
        &mut HashMap::new(),
        &mut Vec::new(),
        &mut order,
    )?;
    Ok(order)
}
