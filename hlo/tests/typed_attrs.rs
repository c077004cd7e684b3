//! Attributes XLA types are decoded once, at parse time (`hlo::attrs`):
//! - a malformed value of each typed kind is a parse error at `key=` (shapes
//!   and literals in values: at the malformed part of the value) with
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
        // Found by cargo-fuzz: `<=[]` printed as `devices=[2,1]`, which
        // does not parse.
        "ROOT n = f32[4,6]{1,0} negate(p), sharding={devices=[2,1]<=[]}",
        "sharding",
        "iota tile assignment",
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
    (
        "ROOT b = f32[4,6]{1,0} batch-norm-inference(p, z, z, z, z), epsilon=tiny, feature_index=1",
        "epsilon",
        "float",
    ),
    (
        "ROOT b = f32[4,6]{1,0} batch-norm-inference(p, z, z, z, z), epsilon=1e39, feature_index=1",
        "epsilon",
        "float",
    ),
    (
        "ROOT a = f32[4,6]{1,0} parameter(2), parameter_replication={true,maybe}",
        "parameter_replication",
        "booleans",
    ),
    (
        "ROOT cp = f32[4,6]{1,0} collective-permute(p), source_target_pairs={{0,1}}, slice_sizes={{1,x}}",
        "slice_sizes",
        "integer lists",
    ),
    (
        "ROOT d = f32[4,8]{1,0} dot(p, q), lhs_contracting_dims={1}, rhs_contracting_dims={0}, algorithm=dot_f99_f99_f99",
        "algorithm",
        "dot algorithm",
    ),
    (
        "ROOT t = f32[4,6]{1,0} triangular-solve(p, p), left_side=true, transpose_a=SIDEWAYS",
        "transpose_a",
        "NO_TRANSPOSE",
    ),
    (
        "ROOT n = f32[4,6]{1,0} negate(p), origin={{\"a\" {x}}}",
        "origin",
        "integer",
    ),
    (
        "ROOT c = f32[4,8]{1,0} convolution(p, q), dim_labels=bf_io->bf, sparsity_config={rhs={sparsity=3y4}}",
        "sparsity_config",
        "`x`",
    ),
    (
        "ROOT o = token[] outfeed(p, token[] after-all()), outfeed_shape=f32[4,y]{1,0}",
        "outfeed_shape",
        "dimension size",
    ),
    (
        "ROOT cc = f32[4,6]{1,0} custom-call(p), custom_call_target=\"x\", operand_layout_constraints={f32[4,x]}",
        "operand_layout_constraints",
        "dimension size",
    ),
    (
        "ROOT cc = f32[4,6]{1,0} custom-call(p), custom_call_target=\"x\", literal=s32[2]{0} {1, x}",
        "literal",
        "integer for s32",
    ),
    (
        "ROOT cc = f32[4,6]{1,0} custom-call(p), custom_call_target=\"x\", schedule=SCHEDULE_SOON",
        "schedule",
        "SCHEDULE_LATEST",
    ),
    (
        "ROOT f = f32[] fusion(z, z), kind=kSideways, calls=add",
        "kind",
        "kLoop",
    ),
    (
        "ROOT f = c64[4,4]{1,0} fft(p), fft_type=FFTW, fft_length={6}",
        "fft_type",
        "RFFT",
    ),
    (
        "ROOT r = f32[4,6]{1,0} rng(z, z), distribution=rng_sideways",
        "distribution",
        "rng_uniform",
    ),
    (
        "ROOT r = (u64[2]{0}, u32[4]{0}) rng-bit-generator(u64[2]{0} constant({1, 2})), algorithm=rng_dice",
        "algorithm",
        "rng_philox",
    ),
    (
        "ROOT c = f32[4,8]{1,0} convolution(p, q), dim_labels=bf_io->bf, padding_type=PADDING_FULL",
        "padding_type",
        "PADDING_SAME",
    ),
    (
        "ROOT n = f32[4,6]{1,0} negate(p), sharding={mesh['x'=2], [{'y'}, {}]}",
        "sharding",
        "not an axis of the mesh",
    ),
    (
        "ROOT r = f32[4,6]{1,0} all-reduce(p), replica_groups=mesh['a'=2] {'b'}, to_apply=add",
        "replica_groups",
        "not an axis of the mesh",
    ),
];

#[test]
fn malformed_typed_values_are_positioned_parse_errors() {
    let mut failures = Vec::new();
    for (line, key, word) in MALFORMED {
        let text = module(line);
        let err = match hlo::parse_module_named(&text, "typed.hlo") {
            Ok(_) => {
                failures.push(format!("accepted a malformed `{key}=`: {line}"));
                continue;
            }
            Err(e) => e.to_string(),
        };
        // The error points at `key=` on the instruction's line (line 13),
        // or (shapes and literals in values) further into the value.
        let col = line.find(&format!("{key}=")).expect("key in line") + 3;
        let at = err
            .strip_prefix("typed.hlo:13:")
            .and_then(|r| r.split(':').next())
            .and_then(|c| c.parse::<usize>().ok());
        if at.is_none_or(|at| at < col) || !err.contains(word) {
            failures.push(format!(
                "`{key}`: expected typed.hlo:13:{col}: (or further into the value) and `{word}` in: {err}"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
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
        "ROOT c = pred[4,6]{1,0} compare(p, p), direction=LT, type=TOTALORDER",
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
        // XLA prints a float attribute with six significant digits.
        "ROOT b = f32[4,6]{1,0} batch-norm-inference(p, z, z, z, z), epsilon=0.00001, feature_index=1",
        "epsilon=1e-05,",
    ),
    (
        // ... unless that would change the value.
        "ROOT b = f32[4,6]{1,0} batch-norm-inference(p, z, z, z, z), epsilon=0.12345678, feature_index=1",
        "epsilon=0.12345678,",
    ),
    (
        "ROOT cc = f32[4,6]{1,0} custom-call(p, z), custom_call_target=\"x\", operand_layout_constraints={ f32[4,6]{0,1} ,/* s */ f32[] }",
        "operand_layout_constraints={f32[4,6]{0,1}, f32[]}",
    ),
    (
        "ROOT a = f32[4,6]{1,0} parameter(2), parameter_replication={ true, false }",
        "parameter_replication={true,false}",
    ),
    (
        "ROOT cp = f32[4,6]{1,0} collective-permute(p), source_target_pairs={{0,1}}, slice_sizes={ {1,2}, {3} }",
        "slice_sizes={{1,2},{3}}",
    ),
    (
        "ROOT d = f32[4,8]{1,0} dot(p, q), lhs_contracting_dims={1}, rhs_contracting_dims={0}, algorithm=ALG_DOT_F32_F32_F32",
        "algorithm=dot_f32_f32_f32",
    ),
    (
        "ROOT t = f32[4,6]{1,0} triangular-solve(p, p), left_side=true, transpose_a=ADJOINT",
        "transpose_a=ADJOINT",
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
    "operand_layout_constraints=",
    "entry_computation_layout=",
    "input_output_alias=",
    "epsilon=",
    "origin_recovery_table=",
    // Typed since: dot algorithms, original values, sparsity, collective
    // slice sizes, the module header, stack frames, constant literals of
    // every type, named shardings and mesh replica groups, outfeed shapes.
    "algorithm=",
    "origin=",
    "sparsity_config=",
    "slice_sizes=",
    "buffer_donor=",
    "replica_count=",
    "is_scheduled=",
    "allow_spmd_sharding_propagation_to_output=",
    "stack_frame_id=",
    "file_name_id=",
    "parent_frame_id=",
    "constant(",
    "mesh[",
    "unreduced",
    "outfeed_shape=",
    "fft_type=",
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

/// A module whose header carries `header` (after the name), with a
/// two-parameter entry computation.
fn with_header(header: &str) -> String {
    format!(
        "HloModule m{header}\n\nENTRY e {{\n  p = f32[4,6]{{1,0}} parameter(0)\n  q = (f32[2]{{0}}, s32[]) parameter(1)\n  ROOT n = f32[4,6]{{1,0}} negate(p)\n}}\n"
    )
}

#[test]
fn header_attributes_print_in_xla_spelling_and_parse_back() {
    // An entry returning a pair, so that output index {1} exists.
    let text = with_header(
        ", is_scheduled=true, entry_computation_layout={(f32[4,6]{0,1}, /*index=1*/(f32[2]{0}, s32[]))->(f32[4,6]{1,0}, f32[4,6]{1,0})}, \
         input_output_alias={ {}: (0, {}), {1}: (1, {0, 1}, must-alias) }, buffer_donor={(1,{})}, replica_count=2, \
         num_partitions=1, allow_spmd_sharding_propagation_to_output={true,false}, \
         allow_spmd_sharding_propagation_to_parameters=false, frontend_attributes={b=\"2\",a=\"1\"}",
    )
    .replace(
        "ROOT n = f32[4,6]{1,0} negate(p)",
        "n = f32[4,6]{1,0} negate(p)\n  ROOT t = (f32[4,6]{1,0}, f32[4,6]{1,0}) tuple(n, n)",
    );
    let m = hlo::parse_module_named(&text, "header.hlo").unwrap_or_else(|e| panic!("{e}"));
    let l = m
        .entry_computation_layout()
        .expect("typed")
        .expect("present");
    assert_eq!(l.params.len(), 2);
    assert_eq!(hlo::print_shape(&m, l.params[0]), "f32[4,6]{0,1}");
    assert!(m.is_scheduled().expect("typed"));
    let first = hlo::print_module(&m)
        .lines()
        .next()
        .unwrap_or_default()
        .to_string();
    assert_eq!(
        first,
        "HloModule m, is_scheduled=true, entry_computation_layout={(f32[4,6]{0,1}, (f32[2]{0}, s32[]))->(f32[4,6]{1,0}, f32[4,6]{1,0})}, \
         input_output_alias={ {}: (0, {}, may-alias), {1}: (1, {0,1}, must-alias) }, buffer_donor={ (1, {}) }, replica_count=2, \
         num_partitions=1, allow_spmd_sharding_propagation_to_output={true,false}, \
         allow_spmd_sharding_propagation_to_parameters=false, frontend_attributes={a=\"1\",b=\"2\"}"
    );
    round_trip(&text, "header.hlo").unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn an_entry_layout_marks_every_fifth_parameter_as_xla_does() {
    let params: Vec<String> = (0..6)
        .map(|k| format!("  p{k} = f32[] parameter({k})"))
        .collect();
    let text = format!(
        "HloModule m, entry_computation_layout={{(f32[], f32[], f32[], f32[], f32[], f32[])->f32[]}}\n\nENTRY e {{\n{}\n  ROOT n = f32[] negate(p0)\n}}\n",
        params.join("\n")
    );
    let m = hlo::parse_module(&text).unwrap_or_else(|e| panic!("{e}"));
    assert!(hlo::print_module(&m).starts_with(
        "HloModule m, entry_computation_layout={(f32[], f32[], f32[], f32[], f32[], /*index=5*/f32[])->f32[]}\n"
    ));
}

/// (header attributes, the key the error must point at, a word of the message).
const MALFORMED_HEADER: &[(&str, &str, &str)] = &[
    (", replica_count=two", "replica_count", "integer"),
    (", is_scheduled=yes", "is_scheduled", "true or false"),
    (
        ", input_output_alias={ {0}: (zero, {}) }",
        "input_output_alias",
        "input_output_alias",
    ),
    (", buffer_donor={ (0 {}) }", "buffer_donor", "buffer_donor"),
    (
        ", allow_spmd_sharding_propagation_to_output={true,1}",
        "allow_spmd_sharding_propagation_to_output",
        "booleans",
    ),
    (
        ", frontend_attributes={a=\"1\" b=\"2\"}",
        "frontend_attributes",
        "`}`",
    ),
    (", num_partitions=-x", "num_partitions", "integer"),
    (
        ", replica_count=99999999999999999999",
        "replica_count",
        "integer",
    ),
    (
        ", use_spmd_partitioning=1",
        "use_spmd_partitioning",
        "true or false",
    ),
    (
        ", alias_passthrough_params=TRUE",
        "alias_passthrough_params",
        "true or false",
    ),
    (
        ", allow_spmd_sharding_propagation_to_parameters={true,false,maybe}",
        "allow_spmd_sharding_propagation_to_parameters",
        "booleans",
    ),
    (
        ", input_output_alias={ {0}: (0, {}, sometimes-alias) }",
        "input_output_alias",
        "sometimes-alias",
    ),
    (
        ", input_output_alias={ {x}: (0, {}) }",
        "input_output_alias",
        "integer",
    ),
    (", buffer_donor={ (0, {x}) }", "buffer_donor", "integer"),
    // As XLA's parser checks it (testdata/invalid has the aliasing cases).
    (
        ", buffer_donor={ (-1, {}) }",
        "buffer_donor",
        "parameter number -1 is negative",
    ),
];

#[test]
fn malformed_header_attributes_are_positioned_parse_errors() {
    for (header, key, word) in MALFORMED_HEADER {
        let text = with_header(header);
        let err = match hlo::parse_module_named(&text, "header.hlo") {
            Ok(_) => panic!("accepted a malformed `{key}=`: {header}"),
            Err(e) => e.to_string(),
        };
        let col = text.find(&format!("{key}=")).expect("key in header") + 1;
        let at = format!("header.hlo:1:{col}:");
        assert!(err.contains(&at), "`{key}`: expected {at} in: {err}");
        assert!(err.contains(word), "`{key}`: expected `{word}` in: {err}");
    }
}

/// The stack frame sections are decoded into XLA's `StackFrameIndexProto`,
/// printed from it and written to the proto from it.
#[test]
fn stack_frame_sections_are_typed() {
    let text = "HloModule m\n\nFileNames\n1 \"a.py\"\n2 \"b.py\"\n\nFunctionNames\n1 \"f\"\n\nFileLocations\n1 {file_name_id=1 function_name_id=1 line=3 end_line=3 column=1 end_column=9}\n2 {file_name_id=2 function_name_id=1 line=7 end_line=8 column=2 end_column=4}\n\nStackFrames\n1 {file_location_id=1 parent_frame_id=1}\n2 {file_location_id=2 parent_frame_id=2}\n\nENTRY e {\n  ROOT c = pred[] constant(true), metadata={op_name=\"x\" stack_frame_id=2}\n}\n";
    let m = hlo::parse_module(text).unwrap_or_else(|e| panic!("{e}"));
    let sf = m.stack_frames.as_deref().expect("sections");
    assert_eq!(sf.file_names, ["a.py", "b.py"]);
    assert_eq!(sf.file_locations[1].end_line, 8);
    // The text counts parents from 1, the proto from 0.
    assert_eq!(sf.stack_frames[1].parent_frame_id, 1);
    let printed = hlo::print_module(&m);
    assert!(printed.starts_with("HloModule m\n\nFileNames\n1 \"a.py\"\n2 \"b.py\"\n\nFunctionNames\n1 \"f\"\n\nFileLocations\n"), "{printed}");
    assert!(printed.contains("StackFrames\n1 {file_location_id=1 parent_frame_id=1}\n2 {file_location_id=2 parent_frame_id=2}\n\nENTRY"), "{printed}");
    round_trip(text, "frames.hlo").unwrap_or_else(|e| panic!("{e}"));
    let p = hlo::proto::module_to_proto(&m).unwrap_or_else(|e| panic!("{e}"));
    let index = p.stack_frame_index.clone().expect("written");
    assert_eq!(index.stack_frames.len(), 2);
    let (back, _) = hlo::proto::module_from_proto(&p).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        back.stack_frames.as_deref().map(|s| s.stack_frames.len()),
        Some(2)
    );
}

/// `origin_recovery_table=` of the header: entries sorted as XLA sorts them
/// (by original array), each recovery module parsed into a module (a module
/// without its `HloModule` line is named after its entry, as XLA names it),
/// printed as XLA prints the table (quotes inside a module escaped, so the
/// text reads back), and written to and read from
/// `HloModuleProto.original_value_recovery_table`.
#[test]
fn the_original_value_recovery_table_is_typed() {
    let text = with_header(
        r#", origin_recovery_table={
  {"z" {1}} : {"z__ovp0"}, "ENTRY %r (p: f32[2]) -> f32[2] { ROOT %p = f32[2]{0} parameter(0), metadata={op_name=\"a\\\\b\"} }"
  {"a"}:{"a"}
}"#,
    );
    let m = hlo::parse_module_named(&text, "table.hlo").unwrap_or_else(|e| panic!("{e}"));
    let Some(hlo::AttrValue::RecoveryTable(t)) = m
        .attrs
        .iter()
        .find(|a| &*a.key == "origin_recovery_table")
        .map(|a| &a.value)
    else {
        panic!("the table is not typed");
    };
    assert_eq!(t.entries.len(), 2);
    assert_eq!(t.entries[0].old, ("a".to_string(), vec![]));
    assert!(t.entries[0].module.is_none());
    assert_eq!(t.entries[1].old, ("z".to_string(), vec![1]));
    assert_eq!(t.entries[1].new, ("z__ovp0".to_string(), vec![]));
    let r = t.entries[1].module.as_deref().expect("a recovery module");
    assert_eq!(&*r.name, "module_r");
    let p = r.inst(r.comp(r.entry).root);
    assert_eq!(
        p.metadata().expect("typed").map(|md| md.op_name.as_str()),
        Some("a\\b")
    );
    let printed = hlo::print_module(&m);
    let expected = "HloModule m, origin_recovery_table={\n  {\"a\"} : {\"a\"}\n  {\"z\" {1}} : {\"z__ovp0\"},\n  \"\n    HloModule module_r\n\n    ENTRY %r (p: f32[2]) -> f32[2] {\n      ROOT %p = f32[2]{0} parameter(0), metadata={op_name=\\\"a\\\\\\\\b\\\"}\n    }\n\n\n  \"\n}\n\n\nENTRY %e";
    assert!(printed.starts_with(expected), "{printed}");
    round_trip(&text, "table.hlo").unwrap_or_else(|e| panic!("{e}"));

    let p = hlo::proto::module_to_proto(&m).unwrap_or_else(|e| panic!("{e}"));
    let table = p.original_value_recovery_table.as_ref().expect("written");
    assert_eq!(table.entries.len(), 2);
    assert_eq!(
        table.entries[1]
            .new_original_array
            .as_ref()
            .map(|a| a.instruction_name.as_str()),
        Some("z__ovp0")
    );
    assert_eq!(
        table.entries[1]
            .recovery_module
            .as_ref()
            .map(|r| r.name.as_str()),
        Some("module_r")
    );
    let (back, report) = hlo::proto::module_from_proto(&p).unwrap_or_else(|e| panic!("{e}"));
    assert!(report.ignored.is_empty(), "{:?}", report.ignored);
    // Read from a proto, a module has its entry layout (as in XLA).
    let again = hlo::print_module(&back);
    assert!(
        again.contains(
            "\n    HloModule module_r, entry_computation_layout={(f32[2]{0})->f32[2]{0}}\n"
        ),
        "{again}"
    );
    let rewritten = hlo::proto::module_to_proto(&back).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        rewritten.original_value_recovery_table,
        p.original_value_recovery_table
    );

    // An empty table is no table, in text and in the proto (as in XLA).
    let m = hlo::parse_module(&with_header(", origin_recovery_table={}")).expect("parses");
    assert!(hlo::print_module(&m).starts_with("HloModule m\n"));
    let p = hlo::proto::module_to_proto(&m).unwrap_or_else(|e| panic!("{e}"));
    assert!(p.original_value_recovery_table.is_none());
}

/// (table, the text the error must point at, a word of the message).
const MALFORMED_TABLES: &[(&str, &str, &str)] = &[
    // A comma promises a recovery module.
    (r#"{ {"a"} : {"b"}, 7 }"#, "7 }", "quoted string"),
    (r#"{ {"a"} {"b"} }"#, r#"{"b"} }"#, "`:`"),
    (r#"{ {"a" {x}} : {"b"} }"#, "x}}", "integer"),
    (
        r#"{ {"a"} : {"b"} {"a"} : {"c"} }"#,
        r#"{"a"} : {"c"}"#,
        "twice",
    ),
    // Inside a recovery module, at its place in the file.
    (
        r#"{ {"a"} : {"b"}, "ENTRY %r { ROOT %n = f32[] negate(%undefined) }" }"#,
        "%undefined",
        "undefined",
    ),
];

#[test]
fn malformed_recovery_tables_are_positioned_parse_errors() {
    for (table, at, word) in MALFORMED_TABLES {
        let header = format!(", origin_recovery_table={table}");
        let text = with_header(&header);
        let err = match hlo::parse_module_named(&text, "table.hlo") {
            Ok(_) => panic!("accepted a malformed table: {table}"),
            Err(e) => e,
        };
        let offset = text.find(&header).expect("header in text") + header.len() - table.len()
            + table.find(at).expect("`at` in the table");
        let col = offset + 1;
        let msg = err.to_string();
        assert!(
            msg.contains(&format!("table.hlo:1:{col}:")),
            "{table}: expected 1:{col} in: {msg}"
        );
        assert!(msg.contains(word), "{table}: expected `{word}` in: {msg}");
    }
}

/// Every attribute XLA (jaxlib 0.10.2) defines is typed at parse time over
/// the test data and the shared corpus; only these keys may stay text.
const KEPT_AS_TEXT: &[(&str, &str)] = &[
    ("backend_config", "opaque to XLA too"),
    (
        "#wrapped_opcode",
        "the async shorthand's marker, not an attribute of the text",
    ),
    (
        "sharding",
        "named shardings in syntax newer than jaxlib 0.10.2 only",
    ),
    (
        "replica_groups",
        "mesh-axes replica groups in syntax newer than jaxlib 0.10.2 only",
    ),
    ("debug_attributes", "newer XLA; jaxlib 0.10.2 rejects it"),
];

#[test]
fn attributes_xla_defines_are_not_kept_as_text() {
    let mut dirs = vec![testdata()];
    dirs.extend(shared().map(|s| s.join("corpus")));
    let mut files = Vec::new();
    while let Some(d) = dirs.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "hlo") {
                files.push(p);
            }
        }
    }
    files.sort();
    let mut parsed = 0usize;
    let mut bad = Vec::new();
    for path in &files {
        let Ok(text) = std::fs::read_to_string(path) else {
            continue;
        };
        let Ok(m) = hlo::parse_module(&text) else {
            continue;
        };
        parsed += 1;
        let mut check = |what: &str, attrs: &[hlo::ir::Attr]| {
            for a in attrs {
                if matches!(a.value, hlo::AttrValue::Raw(_))
                    && !KEPT_AS_TEXT.iter().any(|(k, _)| *k == &*a.key)
                {
                    bad.push(format!("{}: {what} `{}`", path.display(), a.key));
                }
            }
        };
        check("module attribute", &m.attrs);
        for c in m.computations() {
            check("computation attribute", &m.comp(c).attrs);
        }
        for i in m.all_instructions() {
            check(m.inst(i).opcode.name(), &m.inst(i).attrs);
        }
    }
    assert!(parsed > 0, "no module parsed");
    assert!(bad.is_empty(), "kept as text:\n{}", bad.join("\n"));
}

/// (stack frame sections, `line:col` of the error, a word of the message).
const MALFORMED_FRAMES: &[(&str, &str, &str)] = &[
    // Not a section entry at all (a file name is quoted).
    ("FileNames\n1 a.py\n", "4:3", "`a.py`"),
    ("FileNames\nx \"a.py\"\n", "4:3", "`\"`"),
    (
        "FileNames\n1 \"a.py\"\n\nFunctionNames\n1 \"f\"\n\nFileLocations\n1 {file_name_id=1 function_name_id=1 line=x}\n",
        "10:43",
        "integer",
    ),
    (
        "FileNames\n1 \"a.py\"\n\nFunctionNames\n1 \"f\"\n\nFileLocations\n1 {file_name_id=1 function_name_id=1 line=99999999999}\n",
        "10:38",
        "32 bits",
    ),
    (
        "FileNames\n1 \"a.py\"\n\nFunctionNames\n1 \"f\"\n\nFileLocations\n1 {file_name_id=1 function_name_id=1 line=3\n",
        "10:3",
        "unclosed",
    ),
    (
        // The text counts parents from 1; the proto's id would be i32::MIN - 1.
        "StackFrames\n1 {file_location_id=1 parent_frame_id=-2147483648}\n",
        "4:3",
        "parent_frame_id",
    ),
    // An entry before any section name is no debug section.
    ("1 \"a.py\"\n", "3:3", "`\"`"),
];

/// A malformed stack frame section is a parse error at the offending
/// token of the entry, never a panic (nor an overflow of the text's 1-based ids).
#[test]
fn malformed_stack_frame_sections_are_positioned_parse_errors() {
    for (sections, at, word) in MALFORMED_FRAMES {
        let text = format!(
            "HloModule m\n\n{sections}\nENTRY e {{\n  ROOT c = pred[] constant(true)\n}}\n"
        );
        let err = match hlo::parse_module_named(&text, "frames.hlo") {
            Ok(_) => panic!("accepted malformed sections:\n{sections}"),
            Err(e) => e.to_string(),
        };
        assert!(
            err.contains(&format!("frames.hlo:{at}:")),
            "{sections}: expected {at} in: {err}"
        );
        assert!(
            err.contains(word),
            "{sections}: expected `{word}` in: {err}"
        );
    }
}
