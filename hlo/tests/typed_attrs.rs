//! Attributes XLA types are decoded once, at parse time (`hlo::attrs`):
//! - a malformed value of each typed kind is a parse error at `key=` with
//!   `file:line:col` and a message naming the key or kind, never a panic;
//! - the printer writes the typed value in XLA's spelling, which parses back
//!   to the same typed value;
//! - random edits inside typed attribute values of the testdata modules
//!   (deterministic seed, bounded count) never panic, and every accepted
//!   mutant round-trips.

mod common;

use common::*;

/// A module with one instruction whose attribute `key=value` is given.
fn module(line: &str) -> String {
    format!(
        "HloModule m\n\nadd {{\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}}\n\nENTRY e {{\n  p = f32[4,6]{{1,0}} parameter(0)\n  q = f32[6,8]{{1,0}} parameter(1)\n  z = f32[] constant(0)\n  {line}\n}}\n"
    )
}

/// (instruction line with a malformed typed attribute, the key, a word the message must hold).
const MALFORMED: &[(&str, &str, &str)] = &[
    (
        "ROOT t = f32[6,4]{1,0} transpose(p), dimensions={1,x}",
        "dimensions",
        "integers",
    ),
    (
        "ROOT t = f32[6,4]{1,0} transpose(p), dimensions=10",
        "dimensions",
        "braces",
    ),
    (
        "ROOT g = f32[4,6] get-tuple-element((f32[4,6]) tuple(p)), index=one",
        "index",
        "integer",
    ),
    (
        "ROOT s = f32[4,6]{1,0} sort(p), dimensions={1}, is_stable=yes",
        "is_stable",
        "true or false",
    ),
    (
        "ROOT r = f32[2,3]{1,0} reduce-window(p, z), window={size=2x2 stride=2}, to_apply=add",
        "window",
        "dimensions",
    ),
    (
        "ROOT r = f32[2,3]{1,0} reduce-window(p, z), window={size=2x2 pad=1x1}, to_apply=add",
        "window",
        "low_high",
    ),
    (
        "ROOT r = f32[2,3]{1,0} reduce-window(p, z), window={size=2x2 size=2x2}, to_apply=add",
        "window",
        "twice",
    ),
    (
        "ROOT d = f32[5,7]{1,0} pad(p, z), padding=0_1x1",
        "padding",
        "low_high",
    ),
    (
        "ROOT d = f32[2,3]{1,0} slice(p), slice={[0:2], [0:3:1:1]}",
        "slice",
        "[start:limit]",
    ),
    (
        "ROOT c = pred[4,6]{1,0} compare(p, p), direction=LESS",
        "direction",
        "comparison direction",
    ),
    (
        "ROOT c = pred[4,6]{1,0} compare(p, p), direction=LT, type=REAL",
        "type",
        "TOTALORDER",
    ),
    (
        "ROOT d = f32[4,8]{1,0} dot(p, q), lhs_contracting_dims={1}, rhs_contracting_dims={0}, operand_precision={highest,fast}",
        "operand_precision",
        "highest",
    ),
    (
        "ROOT cp = f32[4,6]{1,0} collective-permute(p), source_target_pairs={{0,1,2}}",
        "source_target_pairs",
        "pairs",
    ),
    (
        "ROOT cc = f32[4,6]{1,0} custom-call(p), custom_call_target=\"x\", api_version=API_VERSION_NEWEST",
        "api_version",
        "API version",
    ),
    (
        "ROOT n = f32[4,6]{1,0} negate(p), metadata={op_name=\"a\" source_line=x}",
        "metadata",
        "integer",
    ),
    (
        "ROOT n = f32[4,6]{1,0} negate(p), metadata={op_name=\"a\" colour=\"red\"}",
        "metadata",
        "colour",
    ),
    (
        "ROOT n = f32[4,6]{1,0} negate(p), metadata={op_name=\"a\" source_line=9999999999}",
        "metadata",
        "32 bits",
    ),
    (
        "ROOT n = f32[4,6]{1,0} negate(p), sharding={devices=[2,1]0,1 last_tile_dims={sideways}}",
        "sharding",
        "subgroup type",
    ),
    (
        "ROOT n = f32[4,6]{1,0} negate(p), sharding={maximal device=}",
        "sharding",
        "integer",
    ),
    (
        "ROOT n = f32[4,6]{1,0} negate(p), sharding={{replicated}, maximal device=0}",
        "sharding",
        "`{`",
    ),
    (
        "ROOT r = f32[4,6]{1,0} all-reduce(p), replica_groups={{0,1},{2,x}}, to_apply=add",
        "replica_groups",
        "integer",
    ),
    (
        "ROOT r = f32[4,6]{1,0} all-reduce(p), replica_groups=[4]<=[4], to_apply=add",
        "replica_groups",
        "iota",
    ),
    (
        "ROOT n = f32[4,6]{1,0} negate(p), frontend_attributes={a=\"1\" b=\"2\"}",
        "frontend_attributes",
        "`}`",
    ),
    (
        "ROOT n = f32[4,6]{1,0} negate(p), frontend_attributes={=\"1\"}",
        "frontend_attributes",
        "key",
    ),
    (
        "ROOT cc = f32[4,6]{1,0} custom-call(p), custom_call_target=\"x\", output_to_operand_aliasing={{}: 0, {}}",
        "output_to_operand_aliasing",
        "`(`",
    ),
    (
        "ROOT c = f32[4,8]{1,0} convolution(p, q), dim_labels=bf_io",
        "dim_labels",
        "lhs_rhs->out",
    ),
    (
        "ROOT c = f32[4,8]{1,0} convolution(p, q), dim_labels=bb_io->bf",
        "dim_labels",
        "twice",
    ),
    (
        "ROOT d = f32[4,6]{1,0} domain(p), domain={kind=\"sharding\", entry={replicated}}",
        "domain",
        "`exit`",
    ),
    (
        "ROOT n = f32[4,6]{1,0} negate(p), statistics={visualizing_index=x,s=1}",
        "statistics",
        "integer",
    ),
    (
        "ROOT n = f32[4,6]{1,0} exponential(p), result_accuracy={tolerance={atol=x}}",
        "result_accuracy",
        "number",
    ),
    (
        "ROOT cc = f32[4,6]{1,0} custom-call(p), custom_call_target=\"a\"b",
        "custom_call_target",
        "unexpected text",
    ),
];

#[test]
fn malformed_typed_values_are_positioned_parse_errors() {
    for (line, key, word) in MALFORMED {
        let text = module(line);
        let err = match hlo::parse_module_named(&text, "typed.hlo") {
            Ok(_) => panic!("accepted a malformed `{key}=`: {line}"),
            Err(e) => e.to_string(),
        };
        // The error points at `key=` on the instruction's line (line 13).
        let col = line.find(&format!("{key}=")).expect("key in line") + 3;
        let at = format!("typed.hlo:13:{col}:");
        assert!(err.contains(&at), "`{key}`: expected {at} in: {err}");
        assert!(
            err.contains(word),
            "`{key}`: expected `{word}` in the message: {err}"
        );
    }
}

/// (instruction line, the attribute as the printer writes it).
const CANONICAL: &[(&str, &str)] = &[
    (
        "ROOT t = f32[6,4]{1,0} transpose(p), dimensions={ 1 , 0 }",
        "dimensions={1,0}",
    ),
    (
        "ROOT r = f32[2,3]{1,0} reduce-window(p, z), window={stride=2x2 size=2x2 rhs_dilate=1x1}, to_apply=add",
        "window={size=2x2 stride=2x2}",
    ),
    (
        "ROOT r = f32[4,6]{1,0} reduce-window(p, z), window={size=1x3 pad=0_0x1_1 rhs_reversal=0x1}, to_apply=add",
        "window={size=1x3 pad=0_0x1_1 rhs_reversal=0x1}",
    ),
    (
        "ROOT d = f32[5,13]{1,0} pad(p, z), padding=0_1x1_1_1",
        "padding=0_1_0x1_1_1",
    ),
    (
        "ROOT d = f32[2,3]{1,0} slice(p), slice={[0:4:2],[0:3:1]}",
        "slice={[0:4:2], [0:3]}",
    ),
    (
        "ROOT c = pred[4,6]{1,0} compare(p, p), direction=LT, type=totalorder",
        "type=TOTALORDER",
    ),
    (
        "ROOT d = f32[4,8]{1,0} dot(p, q), lhs_contracting_dims={1}, rhs_contracting_dims={0}, operand_precision={HIGHEST,default}",
        "operand_precision={highest,default}",
    ),
    (
        "ROOT cp = f32[4,6]{1,0} collective-permute(p), source_target_pairs={ {0,1}, {1,0} }",
        "source_target_pairs={{0,1},{1,0}}",
    ),
    (
        "ROOT n = f32[4,6]{1,0} negate(p), metadata={ source_line=3 op_name=\"a\\\"b\" /* c */ op_type=\"Neg\" profile_type={FLAG} }",
        "metadata={op_type=\"Neg\" op_name=\"a\\\"b\" source_line=3 profile_type={2}}",
    ),
    (
        "ROOT n = f32[4,6]{1,0} negate(p), sharding={ devices=[2,1,2]<=[2,2]T(1,0) last_tile_dims={ manual } metadata={op_name=\"x\"} }",
        "sharding={devices=[2,1,2]<=[2,2]T(1,0) last_tile_dims={manual} metadata={op_name=\"x\"}}",
    ),
    (
        // XLA's parser needs `T(...)` after more than one reshape dimension.
        "ROOT n = f32[4,6]{1,0} negate(p), sharding={devices=[2,2]<=[2,2]}",
        "sharding={devices=[2,2]<=[2,2]T(0,1)}",
    ),
    (
        "ROOT n = f32[4,6]{1,0} negate(p), sharding={{replicated},{maximal device=1}, /*index=2*/ {devices=[1,2]0,1 shard_like 3}}",
        "sharding={{replicated}, {maximal device=1}, {devices=[1,2]0,1 shard_like 3}}",
    ),
    (
        // XLA marks every fifth element of a tuple.
        "ROOT n = f32[4,6]{1,0} negate(p), sharding={{manual},{manual},{manual},{manual},{manual},{manual}}",
        "sharding={{manual}, {manual}, {manual}, {manual}, {manual}, /*index=5*/{manual}}",
    ),
    (
        "ROOT r = f32[4,6]{1,0} all-reduce(p), replica_groups={ {0, 1}, {2,3} }, to_apply=add",
        "replica_groups={{0,1},{2,3}}",
    ),
    (
        "ROOT r = f32[4,6]{1,0} all-reduce(p), replica_groups=[2, 2]<=[2,2]T(1,0), to_apply=add",
        "replica_groups=[2,2]<=[2,2]T(1,0)",
    ),
    (
        "ROOT r = f32[4,6]{1,0} all-reduce(p), replica_groups=[1,4]<=[4], to_apply=add",
        "replica_groups=[1,4]<=[4],",
    ),
    (
        "ROOT cc = (f32[4,6]{1,0}, f32[]) custom-call(p, z), custom_call_target=\"x\", output_to_operand_aliasing={ {1}: ( 1, { } ),{0}:(0,{})}",
        "output_to_operand_aliasing={{1}: (1, {}), {0}: (0, {})}",
    ),
    (
        "ROOT c = f32[4,8]{1,0} convolution(p, q), dim_labels= bf_io->bf ",
        "dim_labels=bf_io->bf",
    ),
    (
        // `?`: a dimension without a role, kept in place.
        "ROOT c = f32[4,8]{1,0} convolution(p, q), dim_labels=?bf_i?o->bf?",
        "dim_labels=?bf_i?o->bf?",
    ),
    (
        "ROOT d = f32[4,6]{1,0} domain(p), domain={ kind=\"sharding\" ,entry={maximal device=0}, exit={ replicated } }",
        "domain={kind=\"sharding\", entry={maximal device=0}, exit={replicated}}",
    ),
    (
        "ROOT n = f32[4,6]{1,0} negate(p), statistics={visualizing_index=1, stat-1=33.5,stat-2=1e-07}",
        "statistics={visualizing_index=1,stat-1=33.5,stat-2=1e-7}",
    ),
    (
        "ROOT n = f32[4,6]{1,0} exponential(p), result_accuracy={mode=HIGHEST}",
        "result_accuracy={mode=highest}",
    ),
    (
        "ROOT n = f32[4,6]{1,0} exponential(p), result_accuracy={tolerance={ulps=2}}",
        "result_accuracy={tolerance={atol=0,rtol=0,ulps=2}}",
    ),
    (
        // Strings are stored unescaped and printed quoted, escaped as XLA does.
        "ROOT cc = f32[4,6]{1,0} custom-call(p), custom_call_target=\"a\\x41\\102\\t\"",
        "custom_call_target=\"aAB\\t\"",
    ),
    (
        // Keys in order; a key that is not a plain word stays quoted.
        "ROOT n = f32[4,6]{1,0} negate(p), frontend_attributes={ z=\"2\", \"a b\"=1 ,_x=\"q\\\"\" }",
        "frontend_attributes={_x=\"q\\\"\",\"a b\"=\"1\",z=\"2\"}",
    ),
    (
        // A braced value (an MLIR dictionary of a composite call) is a string.
        "ROOT n = f32[4,6]{1,0} negate(p), frontend_attributes={composite.attributes={n = 1 : i32},composite.name=\"f\"}",
        "frontend_attributes={composite.attributes=\"{n = 1 : i32}\",composite.name=\"f\"}",
    ),
    (
        // Replica groups over mesh axes.
        "ROOT r = f32[4,6]{1,0} all-reduce(p), replica_groups=mesh[ 'a'=2, 'b'=2 ] { 'b' }, to_apply=add",
        "replica_groups=mesh['a'=2,'b'=2] {'b'},",
    ),
    (
        // A named sharding, in XLA's spelling (`, ` separators; an empty
        // dimension list with every axis unreduced is `unreduced`).
        "ROOT n = f32[4,6]{1,0} negate(p), sharding={{mesh['x'=2] [{'x'},{?}]}, {mesh['x'=2] [], unreduced={'x'}}}",
        "sharding={{mesh['x'=2], [{'x'}, {?}]}, {mesh['x'=2], unreduced}}",
    ),
    (
        // A named sharding in syntax newer than jaxlib 0.10.2 (a reduction
        // kind) is kept as written.
        "ROOT n = f32[4,6]{1,0} negate(p), sharding={mesh['x'=2], [{}, {}], unreduced=max{'x'}}",
        "sharding={mesh['x'=2], [{}, {}], unreduced=max{'x'}}",
    ),
];

#[test]
fn typed_values_print_in_xla_spelling_and_parse_back() {
    for (line, printed) in CANONICAL {
        let text = module(line);
        let m =
            hlo::parse_module_named(&text, "typed.hlo").unwrap_or_else(|e| panic!("{line}: {e}"));
        let out = hlo::print_module(&m);
        assert!(
            out.contains(printed),
            "expected `{printed}` in the printed module:\n{out}"
        );
        round_trip(&text, "typed.hlo").unwrap_or_else(|e| panic!("{line}: {e}"));
    }
}

/// Text that may replace a character inside a typed attribute value.
const EDITS: &[&str] = &[
    "",
    "x",
    "-",
    "_",
    ":",
    ",",
    "{",
    "}",
    "[",
    "]",
    "=",
    " ",
    "9223372036854775808",
    "-1",
    "0",
    "1x",
    "__",
    "::",
    "?",
    "\"",
];

/// Keys whose values the parser types (a sample of every kind).
const TYPED_KEYS: &[&str] = &[
    "dimensions=",
    "index=",
    "window=",
    "padding=",
    "slice=",
    "direction=",
    "lhs_contracting_dims=",
    "source_target_pairs=",
    "operand_precision=",
    "is_stable=",
    "kind=",
    "api_version=",
    "metadata=",
    "sharding=",
    "replica_groups=",
    "frontend_attributes=",
    "output_to_operand_aliasing=",
    "dim_labels=",
    "domain=",
    "statistics=",
    "result_accuracy=",
    "custom_call_target=",
];

#[test]
fn edits_inside_typed_values_never_panic() {
    let mut rng = Rng(0x7e57_da7a);
    let mut edited = 0usize;
    for path in hlo_files(&testdata().join("hlo")) {
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let sites: Vec<usize> = TYPED_KEYS
            .iter()
            .flat_map(|k| text.match_indices(k).map(|(i, k)| i + k.len()))
            .collect();
        if sites.is_empty() {
            continue;
        }
        for _ in 0..20 {
            let at = sites[rng.below(sites.len())];
            // A position within the first few characters of the value.
            let mut pos = at + rng.below(6);
            while !text.is_char_boundary(pos.min(text.len())) {
                pos += 1;
            }
            let pos = pos.min(text.len());
            let mut end = (pos + rng.below(2)).min(text.len());
            while !text.is_char_boundary(end) {
                end += 1;
            }
            let mutant = format!(
                "{}{}{}",
                &text[..pos],
                EDITS[rng.below(EDITS.len())],
                &text[end..]
            );
            edited += 1;
            let name = path.display().to_string();
            let outcome = std::panic::catch_unwind(|| {
                if hlo::parse_module_named(&mutant, &name).is_ok() {
                    round_trip(&mutant, &name)
                } else {
                    Ok(())
                }
            });
            match outcome {
                Ok(Ok(())) => {}
                Ok(Err(e)) => panic!("{name}: an accepted mutant does not round-trip: {e}"),
                Err(_) => panic!("{name}: the parser panicked on an edit at byte {pos}"),
            }
        }
    }
    assert!(
        edited > 100,
        "too few typed attribute sites edited ({edited})"
    );
}
