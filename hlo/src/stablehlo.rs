//! StableHLO in: [`parse_stablehlo`] reads the MLIR text jax lowers a
//! program to (`jax.jit(f).lower(*args)`, printed in the generic op form)
//! into the same [`Module`] XLA's own MLIR-to-HLO conversion would give.
//!
//! Stages: `syntax` reads the text into a syntax tree; `lower` and its op rules (`ops`, `structured`,
//! `chlo` for the CHLO ops XLA expands)
//! write the HLO XLA's conversion writes, as HLO text; [`parse_module`]
//! reads that into the IR. Going through HLO text keeps one decoder of
//! every attribute (the HLO parser's) rather than two.

mod attr;
mod chlo;
mod lower;
mod ops;
mod structured;
mod syntax;

use crate::ir::hash::FxMap as HashMap;

use crate::{parse_module_named, Module, Result};

/// Deepest bracket nesting read (the reader recurses once per level).
const MAX_DEPTH: usize = 256;

/// Reads StableHLO MLIR text (generic op form) into a module.
pub fn parse_stablehlo(text: &str) -> Result<Module> {
    let hlo = stablehlo_to_hlo_text(text)?;
    parse_module_named(&hlo, "<stablehlo as hlo>")
}

/// The HLO text [`parse_stablehlo`] reads: what XLA's conversion would
/// print for `text`, up to names and layouts.
pub fn stablehlo_to_hlo_text(text: &str) -> Result<String> {
    check_depth(text)?;
    let top = syntax::file(text).map_err(|e| {
        // The reader stops at ASCII bytes; a char boundary all the same.
        let at = (0..=e.at.min(text.len()))
            .rev()
            .find(|&i| text.is_char_boundary(i))
            .unwrap_or(0);
        lower::Emitter::new(text, HashMap::default())
            .err(at, format!("not StableHLO in the generic op form: {e}"))
    })?;
    let module_name = top
        .attr("sym_name")
        .map(|s| s.trim_matches('"'))
        .unwrap_or("stablehlo");
    // Functions, and Shardy's meshes (which collectives name their
    // replica groups by).
    let (mut funcs, mut meshes) = (HashMap::default(), HashMap::default());
    for o in top.regions.iter().flatten().flat_map(|b| &b.ops) {
        let Some(sym) = o.attr("sym_name").map(|s| s.trim_matches('"')) else {
            continue;
        };
        match (o.name, o.attr("mesh")) {
            ("func.func", _) => {
                funcs.insert(sym, o);
            }
            ("sdy.mesh", Some(mesh)) => {
                meshes.insert(sym, mesh);
            }
            _ => {}
        }
    }
    let mut em = lower::Emitter::new(text, funcs);
    em.meshes = meshes;
    if !em.funcs.contains_key("main") {
        return Err(em.err(top.at, "the module has no `main` function"));
    }
    em.function("main", top.at)?;
    let mut out = format!("HloModule {module_name}\n\n");
    for c in &em.out {
        out.push_str(c);
        out.push('\n');
    }
    Ok(out)
}

fn check_depth(text: &str) -> Result<()> {
    let mut depth = 0usize;
    for (i, b) in text.bytes().enumerate() {
        match b {
            b'(' | b'[' | b'{' | b'<' => depth += 1,
            b')' | b']' | b'}' | b'>' => depth = depth.saturating_sub(1),
            _ => {}
        }
        if depth > MAX_DEPTH {
            return Err(lower::Emitter::new(text, HashMap::default())
                .err(i, format!("nesting deeper than {MAX_DEPTH}")));
        }
    }
    Ok(())
}
