//! The pass registry and the pipeline runner.
//!
//! The registry is one `match` from `--pass` name to pass ([`create_pass`]);
//! [`list_passes`] is the same list with descriptions, for `--list-passes`.
//! [`run_pipeline`] runs `"a,b,c"` in order on one module, running the
//! verifier after each pass when `verify_each` is set (tests always set it).
//! A pass that fails leaves the module as the failing pass left it; callers
//! that need all-or-nothing run the pipeline on a clone.

use hlo::{Layout, Module, Shape};

use crate::{layout, Changed, Pass, PassContext, PassError};

/// Every registered pass: name (the `--pass` value) and a one-line description.
pub fn list_passes() -> &'static [(&'static str, &'static str)] {
    &[
        (
            "layout",
            "layout assignment: choose the minor-to-major layouts of convolutions, dots and reshapes with the \
             layout cost model, propagate them, insert copies",
        ),
        (
            "tile",
            "tile selection: enumerate the tile sizes of each kernel, rank them with the tile cost model, \
             record the best in its backend_config",
        ),
        (
            "xla-cpu",
            "XLA:CPU kernel choice: predict which work to hand to YNNPACK (a compile option) with a model \
             learned on this CPU; the module is unchanged, the option is reported (--compile-options)",
        ),
    ]
}

/// The registered pass names, comma-separated (for error messages).
pub fn pass_names() -> String {
    list_passes()
        .iter()
        .map(|(n, _)| *n)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The pass registered under `name`.
pub fn create_pass(name: &str) -> Result<Box<dyn Pass>, PassError> {
    match name {
        "layout" => Ok(Box::new(layout::LayoutPass::new())),
        "tile" => Ok(Box::new(crate::tile::TilePass::new())),
        "xla-cpu" => Ok(Box::new(crate::xla_cpu::XlaCpuPass)),
        _ => Err(PassError::UnknownPass {
            name: name.to_string(),
            known: pass_names(),
        }),
    }
}

/// The pass names of a comma-separated `--pass` list, in order (blank
/// entries and surrounding white space dropped).
pub fn split_pass_list(passes: &str) -> Vec<&str> {
    passes
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect()
}

/// The pass names of a comma-separated `--pass` list, in order, checked:
/// an empty list, an empty entry (`layout,,tile`, a trailing comma) or an
/// unknown name is an error naming the known passes. Surrounding white
/// space is dropped.
pub fn parse_pass_list(passes: &str) -> Result<Vec<&str>, PassError> {
    let names: Vec<&str> = passes.split(',').map(str::trim).collect();
    if names.iter().all(|n| n.is_empty()) {
        return Err(PassError::PassList(format!(
            "`{passes}` names no pass (known passes: {})",
            pass_names()
        )));
    }
    if let Some(k) = names.iter().position(|n| n.is_empty()) {
        return Err(PassError::PassList(format!(
            "`{passes}` has an empty entry (entry {} of {}); write the names separated by single commas, e.g. `layout,tile`",
            k + 1,
            names.len()
        )));
    }
    for n in &names {
        create_pass(n)?;
    }
    Ok(names)
}

/// Runs the comma-separated pass list `passes` on `m` in order. The list is
/// checked ([`parse_pass_list`]) before any pass runs. Returns whether any
/// pass changed the module.
pub fn run_pipeline(
    m: &mut Module,
    passes: &str,
    cx: &mut PassContext,
) -> Result<Changed, PassError> {
    let names = parse_pass_list(passes)?;
    let mut pipeline = Vec::with_capacity(names.len());
    for name in names {
        pipeline.push(create_pass(name)?);
    }
    let mut changed = false;
    for mut pass in pipeline {
        changed |= pass.run(m, cx)?;
        if cx.options.verify_each {
            verify_module(m).map_err(|source| PassError::Verify {
                pass: pass.name(),
                source,
            })?;
        }
    }
    Ok(changed)
}

/// The checks run between passes: the module verifier plus the layout
/// invariant every pass here keeps once layouts are assigned (a layout, when
/// present, is a permutation of the array's dimensions).
pub fn verify_module(m: &Module) -> Result<(), hlo::Error> {
    hlo::verify(m)?;
    for i in m.all_instructions() {
        let inst = m.inst(i);
        if let Some(msg) = bad_layout(m, inst.shape) {
            let comp = m.comp(inst.parent).name.to_string();
            return Err(hlo::Error::Verify {
                computation: comp,
                instruction: inst.name.to_string(),
                message: msg,
                offset: m.source_offset(i),
                at: None,
            });
        }
    }
    Ok(())
}

fn bad_layout(m: &Module, s: hlo::ShapeId) -> Option<String> {
    match m.shape(s) {
        Shape::Array(a) => {
            let l = a.layout.as_ref()?;
            if hlo::ir::layout::is_permutation(&l.minor_to_major, a.rank()) {
                None
            } else {
                Some(format!(
                    "layout {} is not a permutation of the {} dimensions",
                    Layout::order_text(&l.minor_to_major),
                    a.rank()
                ))
            }
        }
        Shape::Tuple(e) => e.iter().find_map(|&x| bad_layout(m, x)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PassOptions;

    #[test]
    fn unknown_pass_names_list_the_known_ones() {
        let mut m = Module::new("m");
        let mut cx = PassContext::new(PassOptions::default());
        let err = run_pipeline(&mut m, "layout,nope", &mut cx).expect_err("unknown pass");
        let msg = err.to_string();
        assert!(msg.contains("`nope`") && msg.contains("layout"), "{msg}");
        assert!(run_pipeline(&mut m, " , ", &mut cx).is_err());
    }

    #[test]
    fn pass_lists_with_empty_entries_are_refused() {
        for bad in ["layout,,tile", "layout,", ",tile", "", " "] {
            let err = parse_pass_list(bad).expect_err(bad);
            assert!(matches!(err, PassError::PassList(_)), "{bad}: {err}");
        }
        assert_eq!(
            parse_pass_list(" layout , tile ").expect("valid"),
            ["layout", "tile"]
        );
        assert_eq!(
            parse_pass_list("layout,layout").expect("valid"),
            ["layout", "layout"]
        );
    }

    #[test]
    fn every_listed_pass_is_registered_under_its_name() {
        for (name, description) in list_passes() {
            assert!(!description.is_empty());
            assert_eq!(create_pass(name).expect("registered").name(), *name);
        }
    }
}
