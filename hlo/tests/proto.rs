//! `HloModuleProto` in and out, without XLA: ids survive a round trip, the
//! bytes of a re-written module are the same, fields the IR does not model
//! are reported, and bad protos (truncated, garbage, absurd sizes, dangling
//! ids, cycles) are clear errors, never panics.

mod common;

use hlo::proto::{self, xla};
use prost::Message;

const M: &str = r#"HloModule m, entry_computation_layout={(f32[4]{0}, f32[4]{0})->f32[4]{0}}

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

ENTRY %e (p: f32[4], q: f32[4]) -> f32[4] {
  %p = f32[4]{0} parameter(0)
  %q = f32[4]{0} parameter(1)
  %c = f32[] constant(0.5), metadata={op_name="c" source_line=3}
  %b = f32[4]{0} broadcast(%c), dimensions={}
  %m = f32[4]{0} multiply(%p, %b)
  %r = f32[] reduce(%q, %c), dimensions={0}, to_apply=%add
  %rb = f32[4]{0} broadcast(%r), dimensions={}
  ROOT %o = f32[4]{0} add(%m, %rb), sharding={replicated}
}
"#;

fn module_proto() -> xla::HloModuleProto {
    let m = hlo::parse_module(M).expect("test module parses");
    proto::module_to_proto(&m).expect("writes")
}

#[test]
fn ids_survive_a_round_trip() {
    let mut p = module_proto();
    // Ids as another producer might choose them: sparse and large.
    let mut remap = std::collections::HashMap::new();
    for (k, c) in p.computations.iter_mut().enumerate() {
        for (j, i) in c.instructions.iter_mut().enumerate() {
            let new = 1000 + 17 * (k as i64 * 100 + j as i64);
            remap.insert(i.id, new);
            i.id = new;
        }
    }
    for c in &mut p.computations {
        c.root_id = remap[&c.root_id];
        for i in &mut c.instructions {
            for o in i.operand_ids.iter_mut() {
                *o = remap[o];
            }
        }
        c.id += 40;
    }
    p.entry_computation_id += 40;
    for c in &mut p.computations {
        for i in &mut c.instructions {
            for cid in i.called_computation_ids.iter_mut() {
                *cid += 40;
            }
        }
    }
    let bytes = p.encode_to_vec();
    let m = proto::from_bytes(&bytes).expect("reads");
    let again = proto::module_to_proto(&m).expect("writes again");
    let ids = |p: &xla::HloModuleProto| -> Vec<(String, i64)> {
        let mut v: Vec<(String, i64)> = p
            .computations
            .iter()
            .flat_map(|c| {
                std::iter::once((format!("comp {}", c.name), c.id))
                    .chain(c.instructions.iter().map(|i| (i.name.clone(), i.id)))
            })
            .collect();
        v.sort();
        v
    };
    assert_eq!(ids(&p), ids(&again));
    assert_eq!(again.entry_computation_id, p.entry_computation_id);
    // The whole message survives, byte for byte.
    assert_eq!(again.encode_to_vec(), bytes);
}

#[test]
fn a_written_module_reads_back_the_same() {
    let m = hlo::parse_module(M).expect("parses");
    let bytes = proto::to_bytes(&m).expect("writes");
    let back = proto::from_bytes(&bytes).expect("reads");
    assert_eq!(
        hlo::print_module(&back),
        hlo::print_module(&hlo::parse_module(&hlo::print_module(&back)).expect("reparses"))
    );
    assert_eq!(back.instruction_count(), m.instruction_count());
    assert_eq!(proto::to_bytes(&back).expect("writes again"), bytes);
    for f in common::hlo_files(&common::testdata().join("hlo")) {
        let text = std::fs::read_to_string(&f).expect("readable");
        let m = hlo::parse_module(&text).expect("testdata parses");
        let Ok(bytes) = proto::to_bytes(&m) else {
            continue;
        };
        let back = proto::from_bytes(&bytes)
            .unwrap_or_else(|e| panic!("{}: our own proto does not read back: {e}", f.display()));
        let again = proto::to_bytes(&back).expect("writes again");
        // XLA's made-up values for an elided sub-byte literal `{...}` carry
        // bits above the element's width (written as XLA writes them); read
        // back they are the element's value, so the first re-write differs
        // in those bits only, and the next is the same.
        let (bytes, again) = if text.contains("{...}") {
            let back = proto::from_bytes(&again).expect("reads again");
            (again, proto::to_bytes(&back).expect("writes a third time"))
        } else {
            (bytes, again)
        };
        assert_eq!(
            again,
            bytes,
            "{}: the proto of the read module differs",
            f.display()
        );
    }
}

#[test]
fn content_tells_text_from_proto() {
    let bytes = module_proto().encode_to_vec();
    assert!(proto::looks_like_proto(&bytes));
    assert!(!proto::looks_like_proto(M.as_bytes()));
    assert!(!proto::looks_like_proto(b"  \n// c\nHloModule m"));
    assert!(!proto::looks_like_proto(b""));
}

#[test]
fn unknown_and_unmodeled_fields_are_reported() {
    let mut bytes = module_proto().encode_to_vec();
    // Field 120 (unknown to the schema) as a varint at the module level.
    bytes.extend_from_slice(&[0xc0, 0x07, 0x01]);
    let e = proto::from_bytes(&bytes).expect_err("unknown field is an error");
    assert!(e.to_string().contains("#120"), "{e}");
    let (_, report) = proto::from_bytes_lossy(&bytes).expect("lossy read works");
    assert_eq!(
        report.ignored,
        vec!["HloModuleProto field #120".to_string()]
    );

    let mut p = module_proto();
    p.computations[1].instructions[2].all_reduce_id = 7;
    p.device_type = "tpu".into();
    let e = proto::from_bytes(&p.encode_to_vec()).expect_err("unmodeled fields are an error");
    let msg = e.to_string();
    assert!(
        msg.contains("computations[1].instructions[2].all_reduce_id"),
        "{msg}"
    );
    assert!(msg.contains("device_type"), "{msg}");
}

/// A result accuracy on an op that does not take one (only unary
/// transcendental ops do) is dropped by XLA's proto reader, and refused by
/// its text parser (parser test 349): hlo-opt reports it as a field it
/// drops, and keeps it on an op that takes it.
#[test]
fn a_result_accuracy_xla_drops_is_reported() {
    let text = "HloModule m\n\nENTRY e {\n  x = f32[4]{0} parameter(0)\n  \
                t = f32[4]{0} tanh(x), result_accuracy={mode=highest}\n  \
                ROOT a = f32[4]{0} abs(t)\n}\n";
    let m = hlo::parse_module(text).expect("parses");
    let mut p = proto::module_to_proto(&m).expect("writes");
    let insts = &mut p.computations[0].instructions;
    let tanh = insts.iter().position(|i| i.opcode == "tanh").expect("tanh");
    let abs = insts.iter().position(|i| i.opcode == "abs").expect("abs");
    insts[abs].result_accuracy = insts[tanh].result_accuracy.clone();
    let bytes = p.encode_to_vec();
    let e = proto::from_bytes(&bytes).expect_err("a dropped field is an error");
    let path = format!("computations[0].instructions[{abs}].result_accuracy");
    assert!(e.to_string().contains(&path), "{e}");
    let (back, report) = proto::from_bytes_lossy(&bytes).expect("lossy read works");
    assert_eq!(report.ignored, vec![path]);
    let printed = hlo::print_module(&back);
    assert!(
        printed.contains("tanh(%x), result_accuracy={mode=highest}"),
        "{printed}"
    );
    assert!(printed.contains("abs(%t)\n"), "{printed}");
}

fn read_err(p: &xla::HloModuleProto) -> String {
    match proto::from_bytes(&p.encode_to_vec()) {
        Ok(_) => panic!("a bad proto was accepted"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn dangling_ids_and_cycles_are_errors() {
    let base = module_proto();
    let entry = base.computations.len() - 1;

    let mut p = base.clone();
    p.computations[entry].instructions[4].operand_ids[0] = 999;
    assert!(read_err(&p).contains("instruction id 999 does not exist"));

    let mut p = base.clone();
    let add_param = p.computations[0].instructions[0].id;
    p.computations[entry].instructions[4].operand_ids[0] = add_param;
    assert!(read_err(&p).contains("belongs to another computation"));

    let mut p = base.clone();
    p.computations[entry].root_id = 12345;
    assert!(read_err(&p).contains("root id 12345"));

    let mut p = base.clone();
    p.entry_computation_id = 77;
    assert!(read_err(&p).contains("entry computation id 77"));

    let mut p = base.clone();
    let reduce = p.computations[entry]
        .instructions
        .iter_mut()
        .find(|i| i.opcode == "reduce")
        .expect("a reduce");
    reduce.called_computation_ids = vec![55];
    assert!(read_err(&p).contains("called computation id 55 does not exist"));

    let mut p = base.clone();
    let dup = p.computations[entry].instructions[1].id;
    p.computations[entry].instructions[2].id = dup;
    assert!(read_err(&p).contains("appears twice"));

    // A computation that calls itself.
    let mut p = base.clone();
    let add_id = p.computations[0].id;
    let mut call = p.computations[0].instructions[2].clone();
    call.opcode = "call".into();
    call.name = "self_call".into();
    call.id = 900;
    call.called_computation_ids = vec![add_id];
    p.computations[0].instructions.push(call);
    let e = read_err(&p);
    assert!(e.contains("call chain"), "{e}");

    // An operand cycle inside a computation.
    let mut p = base.clone();
    let c = &mut p.computations[entry];
    let (m_id, o_id) = (c.instructions[4].id, c.instructions[7].id);
    c.instructions[4].operand_ids[0] = o_id;
    let _ = m_id;
    let e = read_err(&p);
    assert!(!e.is_empty());
}

#[test]
fn truncated_garbage_and_absurd_bytes_are_errors_not_panics() {
    let bytes = module_proto().encode_to_vec();
    for n in 0..bytes.len() {
        let _ = proto::from_bytes(&bytes[..n]); // must not panic
    }
    assert!(proto::from_bytes(&bytes[..bytes.len() / 2]).is_err());
    // A length prefix far past the end.
    let absurd = [0x1a, 0xff, 0xff, 0xff, 0xff, 0x0f];
    let e = proto::from_bytes(&absurd).expect_err("absurd length");
    assert!(e.to_string().contains("not a valid HloModuleProto"), "{e}");
    // Deep nesting (tuple shapes in tuple shapes) is bounded, not a stack overflow.
    let mut deep = Vec::new();
    for _ in 0..10_000 {
        let mut outer = vec![0x22]; // ShapeProto.tuple_shapes
        prost::encoding::encode_varint(deep.len() as u64, &mut outer);
        outer.extend_from_slice(&deep);
        deep = outer;
    }
    let mut inst = vec![0x1a]; // HloInstructionProto.shape
    prost::encoding::encode_varint(deep.len() as u64, &mut inst);
    inst.extend_from_slice(&deep);
    let mut comp = vec![0x12]; // HloComputationProto.instructions
    prost::encoding::encode_varint(inst.len() as u64, &mut comp);
    comp.extend_from_slice(&inst);
    let mut module = vec![0x1a]; // HloModuleProto.computations
    prost::encoding::encode_varint(comp.len() as u64, &mut module);
    module.extend_from_slice(&comp);
    assert!(proto::from_bytes(&module).is_err());
    // Pseudo-random garbage.
    let mut x: u64 = 0x9e3779b97f4a7c15;
    for len in [1usize, 7, 64, 1000] {
        let g: Vec<u8> = (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        assert!(proto::from_bytes(&g).is_err());
    }
}

/// XLA prints `/*index=5*/` inside long tuple shardings (jax's and
/// TpuGraphs' entry parameters carry them); the writer reads comments as
/// white space, as XLA's lexer does.
#[test]
fn index_comments_inside_a_tuple_sharding_are_white_space() {
    let elems = (0..7).map(|_| "f32[2]").collect::<Vec<_>>().join(", ");
    let shardings = (0..7)
        .map(|k| {
            let c = if k == 5 { "/*index=5*/" } else { "" };
            format!("{c}{{maximal device={k}}}")
        })
        .collect::<Vec<_>>()
        .join(", ");
    let text = format!(
        "HloModule t\n\nENTRY e {{\n  p = ({elems}) parameter(0), sharding={{{shardings}}}\n  ROOT g = f32[2] get-tuple-element(p), index=6\n}}\n"
    );
    let m = hlo::parse_module(&text).expect("parses");
    let p = proto::module_to_proto(&m).expect("writes");
    let s = p.computations[0].instructions[0]
        .sharding
        .as_ref()
        .expect("a sharding");
    let devices: Vec<i64> = s
        .tuple_shardings
        .iter()
        .flat_map(|t| t.tile_assignment_devices.clone())
        .collect();
    assert_eq!(devices, (0..7).collect::<Vec<i64>>());
}

/// `to_bytes` encodes while it builds (instructions one at a time,
/// computations spliced into the module): its bytes must be those of
/// encoding the whole message, for every testdata module the writer takes.
#[test]
fn streamed_bytes_equal_the_encoded_message() {
    let mut compared = 0;
    for path in common::hlo_files(&common::testdata().join("hlo")) {
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let Ok(m) = hlo::parse_module(&text) else {
            continue;
        };
        let Ok(whole) = proto::module_to_proto(&m) else {
            assert!(proto::to_bytes(&m).is_err(), "{}", path.display());
            continue;
        };
        let streamed = proto::to_bytes(&m).expect("writes what module_to_proto writes");
        assert!(
            streamed == whole.encode_to_vec(),
            "{}: streamed bytes differ from the encoded message",
            path.display()
        );
        compared += 1;
    }
    assert!(compared > 20, "only {compared} modules compared");
}

#[test]
fn the_report_summary_folds_indices_and_counts() {
    let report = proto::ReadReport {
        ignored: vec![
            "computations[0].instructions[3].statistics_viz".into(),
            "device_assignment".into(),
            "computations[2].instructions[10].statistics_viz".into(),
        ],
    };
    assert_eq!(
        report.summary(),
        "computations[].instructions[].statistics_viz (2x), device_assignment (1x)"
    );
}

/// Names that XLA's parser would rename (`x.0` is `x` with suffix 0, taken
/// by `x`; `y.01` is `y.1` written with a leading zero) are renamed as
/// XLA's `NameUniquer` does (checked against jaxlib 0.10.2's
/// `hlo_module_from_text`): `x, x.1, y.1, y.0`. Unique names stay as written.
#[test]
fn names_xla_would_rename_are_renamed_as_xla_does() {
    let text = "HloModule names\n\nENTRY main {\n  x = f32[2]{0} parameter(0)\n  \
                x.0 = f32[2]{0} parameter(1)\n  y.01 = f32[2]{0} add(x, x.0)\n  \
                ROOT y.1 = f32[2]{0} add(y.01, x)\n}\n";
    let names = |text: &str| -> Vec<String> {
        let m = hlo::parse_module(text).expect("parses");
        let p = xla::HloModuleProto::decode(&proto::to_bytes(&m).expect("writes")[..])
            .expect("decodes");
        p.computations[0]
            .instructions
            .iter()
            .map(|i| i.name.clone())
            .collect()
    };
    assert_eq!(names(text), ["x", "x.1", "y.1", "y.0"]);
    let unique = text.replace("x.0", "z.3").replace("y.01", "y.2");
    assert_eq!(names(&unique), ["x", "z.3", "y.2", "y.1"]);
}

/// An operand precision outside XLA's enumeration is an error naming it,
/// not `default` (which wrote back as 0: a broken write/read fixed point
/// that cargo-fuzz's `proto` target found).
#[test]
fn an_unknown_operand_precision_is_an_error() {
    let text = "HloModule m\n\nENTRY e {\n  a = f32[2,2]{1,0} parameter(0)\n  \
                ROOT d = f32[2,2]{1,0} dot(a, a), lhs_contracting_dims={1}, \
                rhs_contracting_dims={0}, operand_precision={high,packed_nibble}\n}\n";
    let m = hlo::parse_module(text).expect("parses");
    let mut p = proto::module_to_proto(&m).expect("writes");
    let back = proto::from_bytes(&p.encode_to_vec()).expect("reads its own proto");
    assert!(
        hlo::print_module(&back).contains("operand_precision={high,packed_nibble}"),
        "{}",
        hlo::print_module(&back)
    );
    let dot = p.computations[0]
        .instructions
        .iter_mut()
        .find(|i| i.opcode == "dot")
        .expect("a dot");
    dot.precision_config
        .as_mut()
        .expect("a precision config")
        .operand_precision = vec![0, 1663];
    let e = read_err(&p);
    assert!(e.contains("unknown operand precision 1663"), "{e}");
}

/// A constant's literal holds its values in the fields of its own shape's
/// element type; a literal whose shape is not the instruction's (a `pred[]`
/// constant holding an `f32` value, which cargo-fuzz's `proto` target found
/// read as `pred[] constant(1e-05)` and then refused by the writer) is an
/// error naming both shapes.
#[test]
fn a_literal_of_another_shape_than_its_constant_is_an_error() {
    let text = "HloModule m\n\nENTRY e {\n  ROOT c = pred[] constant(true)\n}\n";
    let m = hlo::parse_module(text).expect("parses");
    let mut p = proto::module_to_proto(&m).expect("writes");
    proto::from_bytes(&p.encode_to_vec()).expect("reads its own proto");
    let c = &mut p.computations[0].instructions[0];
    let lit = c.literal.as_mut().expect("a literal");
    let shape = lit.shape.as_mut().expect("a literal shape");
    shape.element_type = 11; // F32
    lit.preds.clear();
    lit.f32s = vec![1e-5];
    let e = read_err(&p);
    assert!(
        e.contains("the literal's shape f32[] is not the instruction's pred[]"),
        "{e}"
    );
    // Another dimension count is refused too.
    let lit = p.computations[0].instructions[0]
        .literal
        .as_mut()
        .expect("a literal");
    let shape = lit.shape.as_mut().expect("a literal shape");
    shape.element_type = 1; // PRED
    shape.dimensions = vec![1];
    shape.is_dynamic_dimension = vec![false];
    shape.layout = None;
    lit.f32s.clear();
    lit.preds = vec![true];
    let e = read_err(&p);
    assert!(e.contains("is not the instruction's pred[]"), "{e}");
}

/// One line per computation and instruction of a proto, with the fields
/// the async shorthand's expansion sets (ids, names, operands, callees,
/// threads, the wrapped op's and the async ops' attributes).
fn async_listing(p: &xla::HloModuleProto) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    for c in &p.computations {
        let thread = match c.execution_thread.as_str() {
            "" => String::new(),
            t => format!(" thread={t}"),
        };
        writeln!(out, "comp {} %{} root={}{thread}", c.id, c.name, c.root_id)
            .expect("a String takes any text");
        for i in &c.instructions {
            let mut f = Vec::new();
            if !i.called_computation_ids.is_empty() {
                f.push(format!("calls={:?}", i.called_computation_ids));
            }
            if !i.async_execution_thread.is_empty() {
                f.push(format!("async_thread={}", i.async_execution_thread));
            }
            if !i.custom_call_target.is_empty() {
                f.push(format!("target={}", i.custom_call_target));
            }
            if !i.fusion_kind.is_empty() {
                f.push(format!("kind={}", i.fusion_kind));
            }
            if !i.comparison_direction.is_empty() {
                f.push(format!("direction={}", i.comparison_direction));
            }
            if !i.dimensions.is_empty() {
                f.push(format!("dimensions={:?}", i.dimensions));
            }
            if let Some(d) = &i.dot_dimension_numbers {
                f.push(format!(
                    "contracting={:?}x{:?}",
                    d.lhs_contracting_dimensions, d.rhs_contracting_dimensions
                ));
            }
            if let Some(md) = i.metadata.as_ref().filter(|m| !m.op_name.is_empty()) {
                f.push(format!("op_name={}", md.op_name));
            }
            if !i.backend_config.is_empty() {
                f.push(format!(
                    "backend_config={}",
                    String::from_utf8_lossy(&i.backend_config)
                ));
            }
            if let Some(fa) = i.frontend_attributes.as_ref().filter(|f| !f.map.is_empty()) {
                f.push(format!("frontend={:?}", fa.map));
            }
            if let Some(o) = &i.original_value {
                let names: Vec<&str> = o
                    .elements
                    .iter()
                    .filter_map(|e| e.original_array.as_ref())
                    .map(|a| a.instruction_name.as_str())
                    .collect();
                f.push(format!("origin={names:?}"));
            }
            writeln!(
                out,
                "  {} %{} = {}{:?}{}",
                i.id,
                i.name,
                i.opcode,
                i.operand_ids,
                f.iter().map(|f| format!(" {f}")).collect::<String>()
            )
            .expect("a String takes any text");
        }
    }
    out
}

/// XLA's async shorthand (`custom-call-start`, `add-start`, `dot-start`,
/// `reduce-start`, `compare-start`, `fusion-start`, `call-start`, a
/// `custom-call-done` of an async-start with `calls=`) is written as XLA's
/// parser builds it: an async-start calling an `async_wrapped` computation
/// (placed before its caller) of `async_param`s and the wrapped op, which
/// holds the op's attributes and the shared ones (metadata, backend config,
/// frontend attributes, origin: the last of the chain wins); the thread
/// reaches the wrapped computation and what it calls; the user's
/// `%custom-call` is renamed because the wrapped op takes its name first.
/// The proto conformance test checks XLA reads it as the text.
#[test]
fn the_async_shorthand_is_written_as_xla_builds_it() {
    let path = common::testdata().join("hlo/own_async_shorthand.hlo");
    let text = std::fs::read_to_string(&path).expect("readable");
    let m = hlo::parse_module(&text).expect("parses");
    let p = proto::module_to_proto(&m).expect("writes");
    insta::assert_snapshot!(async_listing(&p));
    // Streamed and built the same.
    assert_eq!(proto::to_bytes(&m).expect("writes"), p.encode_to_vec());
}

/// The reader folds the wrapped computations XLA's parser makes back into
/// the shorthand (the module read from the proto is the module read from
/// the text, instruction for instruction, and is written again with the
/// same ids); a computation a compiler pass made (`%offloaded`) keeps its
/// `calls=` form.
#[test]
fn wrapped_computations_read_back_as_the_shorthand() {
    let path = common::testdata().join("hlo/own_async_shorthand.hlo");
    let text = std::fs::read_to_string(&path).expect("readable");
    let m = hlo::parse_module(&text).expect("parses");
    let bytes = proto::to_bytes(&m).expect("writes");
    let back = proto::from_bytes(&bytes).expect("reads");
    let printed = hlo::print_module(&back);
    assert!(!printed.contains("async_wrapped"), "{printed}");
    assert_eq!(back.num_computations(), m.num_computations());
    assert_eq!(back.instruction_count(), m.instruction_count());
    for line in [
        "custom-call-start(%custom-call.1), custom_call_target=\"foo\"",
        "custom-call-update(%cc-start)",
        "add-done(%add-start), origin={{\"sum\"}}",
        "compare-start(%add-done, %n), direction=LT",
        "fusion-start(%dot-done), calls=%fused, kind=kLoop",
        "call-start(%fusion-done), to_apply=%host_fn, async_execution_thread=\"host\"",
        "async-start(%y), calls=%offloaded, async_execution_thread=\"host\"",
        "async-done(%async-start)",
    ] {
        assert!(printed.contains(line), "missing `{line}` in\n{printed}");
    }
    assert_eq!(proto::to_bytes(&back).expect("writes again"), bytes);
    // The printed text parses back to the same module. (Its computations
    // are printed in XLA's order for a module read from a proto, which the
    // text then keeps; the proto lists them in the module's order.)
    let again = hlo::parse_module(&printed).expect("reparses");
    assert_eq!(hlo::print_module(&again), printed);
    assert_eq!(again.num_computations(), back.num_computations());
    assert_eq!(again.instruction_count(), back.instruction_count());
}

/// What XLA's proto cannot carry is an error naming the instruction: an
/// async-update of the shorthand binding further operands (newer XLA's
/// late binding).
#[test]
fn a_late_bound_async_update_is_an_error() {
    let text = "HloModule m\n\nENTRY e {\n  a = f32[4]{0} parameter(0)\n  \
                b = f32[4]{0} parameter(1)\n  \
                s = ((f32[4]{0}), f32[4]{0}, s32[]) negate-start(a)\n  \
                u = ((f32[4]{0}), f32[4]{0}, s32[]) negate-update(s, b)\n  \
                ROOT d = f32[4]{0} negate-done(u)\n}\n";
    let m = hlo::parse_module(text).expect("parses (late binding)");
    let e = proto::to_bytes(&m)
        .expect_err("cannot be written")
        .to_string();
    assert!(
        e.contains("cannot write %u to a proto") && e.contains("binds 2 operands"),
        "{e}"
    );
}

/// `result_accuracy={mode=default}` is no field in the proto, as XLA
/// (jaxlib 0.10.2) writes it: the reader reads no field as no attribute, so
/// writing one broke the write -> read -> write fixed point (found by
/// cargo-fuzz's `parse_print` target, a seed of the shared corpus).
#[test]
fn a_default_result_accuracy_is_not_written() {
    let text = "HloModule m\n\nENTRY e {\n  a = f32[] parameter(0)\n  \
                ROOT x = f32[] exponential(a), result_accuracy={mode=default}\n}\n";
    let m = hlo::parse_module(text).expect("parses");
    let p = proto::module_to_proto(&m).expect("writes");
    assert_eq!(p.computations[0].instructions[1].result_accuracy, None);
    let once = proto::to_bytes(&m).expect("writes");
    let back = proto::from_bytes(&once).expect("reads back");
    assert_eq!(proto::to_bytes(&back).expect("writes again"), once);
    // A mode other than the default is written.
    let highest = text.replace("mode=default", "mode=highest");
    let m = hlo::parse_module(&highest).expect("parses");
    let p = proto::module_to_proto(&m).expect("writes");
    assert!(p.computations[0].instructions[1].result_accuracy.is_some());
}

/// A `backend_config` read from a proto is printed as braces only when the
/// text reads back as the same bytes; brackets that do not balance as the
/// parser checks them, a comment or a control character make it a quoted
/// string (cargo-fuzz's `proto` target found `{ ( }` and a NUL byte printed
/// as braces, module texts that did not parse).
#[test]
fn a_backend_config_prints_as_text_that_reads_back() {
    let text = "HloModule m\n\nENTRY e {\n  a = f32[] parameter(0)\n  \
                ROOT n = f32[] negate(a), backend_config={\"k\":1}\n}\n";
    let m = hlo::parse_module(text).expect("parses");
    let base = proto::module_to_proto(&m).expect("writes");
    for config in [
        &b"{\"k\": ( }"[..],
        b"{\"k\": [1}",
        b"{ /* } */ }",
        b"{\"u\": 1 // }",
        b"{\"k\": \"(\"}",
        b"{\"k\": \"\0\"}",
        b"{\"k\":\x01 1}",
    ] {
        let mut p = base.clone();
        p.computations[0].instructions[1].backend_config = config.to_vec();
        let bytes = p.encode_to_vec();
        let read = proto::from_bytes(&bytes).expect("reads");
        let printed = hlo::print_module(&read);
        let again = hlo::parse_module(&printed).unwrap_or_else(|e| {
            panic!(
                "{}: the printed module does not parse: {e}\n{printed}",
                String::from_utf8_lossy(config)
            )
        });
        let q = proto::module_to_proto(&again).expect("writes again");
        assert_eq!(
            q.computations[0].instructions[1].backend_config, config,
            "{printed}"
        );
    }
}

/// The writer writes only a module whose proto reads back: a module the
/// parser accepts but the reader's checks refuse (the verifier's structure
/// checks, which the parser leaves to the verifier) is an error when
/// writing, naming why. cargo-fuzz's `parse_print` target found these
/// written, then refused by our own reader.
#[test]
fn a_module_the_reader_would_refuse_is_not_written() {
    let cases = [
        (
            // The entry layout's result is not the root's shape.
            "HloModule m, entry_computation_layout={(f32[3,4]{1,0})->f32[1,4]{1,0}}\n\n\
             ENTRY e {\n  a = f32[3,4] parameter(0)\n  ROOT c = f32[3,4] cbrt(a)\n}\n",
            "entry_computation_layout",
        ),
        (
            // A layout that is not a permutation of its dimensions.
            "HloModule m\n\nENTRY e {\n  a = f32[2,3]{1,0} parameter(0)\n  \
             ROOT n = f32[2,3]{0,0} negate(a)\n}\n",
            "{0,0}",
        ),
        (
            // The same in the module header's entry layout ...
            "HloModule m, entry_computation_layout={(f32[2,2]{0,8})->f32[2,2]{1,0}}\n\n\
             ENTRY e {\n  a = f32[2,2]{1,0} parameter(0)\n  ROOT n = f32[2,2]{1,0} negate(a)\n}\n",
            "{0,8}",
        ),
        (
            // ... and in a custom-call's operand layout constraints.
            "HloModule m\n\nENTRY e {\n  a = f32[4,4]{1,0} parameter(0)\n  \
             ROOT c = f32[4,4]{1,0} custom-call(a), custom_call_target=\"t\", \
             operand_layout_constraints={f32[4,4]{0,0}}\n}\n",
            "operand_layout_constraints",
        ),
        (
            // A while whose body calls itself.
            "HloModule m\n\ncond {\n  p = s32[] parameter(0)\n  ROOT t = pred[] constant(true)\n}\n\n\
             body {\n  p = s32[] parameter(0)\n  ROOT w = s32[] while(p), body=body, condition=cond\n}\n\n\
             ENTRY e {\n  a = s32[] parameter(0)\n  ROOT w = s32[] while(a), body=body, condition=cond\n}\n",
            "call chain",
        ),
    ];
    for (text, word) in cases {
        let m = hlo::parse_module(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        for e in [
            proto::to_bytes(&m).expect_err("an unreadable module is not written"),
            proto::module_to_proto(&m).expect_err("an unreadable module is not written"),
        ] {
            let e = e.to_string();
            assert!(
                e.contains("cannot write an invalid module to a proto") && e.contains(word),
                "{text}: {e}"
            );
        }
    }
}

/// Instructions (and computations) take the order of their ids, as XLA's
/// `CreateFromProto` sorts them, so that XLA reads our printed text as the
/// module it reads from the proto; ids that would put a use before its
/// definition (a compiler's) keep the proto's order instead.
#[test]
fn instructions_take_the_order_of_their_ids_unless_it_uses_before_defining() {
    let entry_order = |p: &xla::HloModuleProto| -> Vec<String> {
        let m = proto::from_bytes(&p.encode_to_vec()).unwrap_or_else(|e| panic!("{e}"));
        let c = m.comp(m.entry);
        c.order
            .iter()
            .map(|&i| m.inst(i).name.to_string())
            .collect()
    };
    let renumber = |p: &mut xla::HloModuleProto, ids: &dyn Fn(usize, usize) -> i64| {
        let c = p.computations.last_mut().expect("entry is last");
        let n = c.instructions.len();
        let remap: std::collections::HashMap<i64, i64> = c
            .instructions
            .iter()
            .enumerate()
            .map(|(k, i)| (i.id, ids(k, n)))
            .collect();
        for i in &mut c.instructions {
            i.id = remap[&i.id];
            for o in i.operand_ids.iter_mut() {
                *o = remap[o];
            }
        }
        c.root_id = remap[&c.root_id];
    };
    let listed: Vec<String> = {
        let p = module_proto();
        let c = p.computations.last().expect("entry");
        c.instructions.iter().map(|i| i.name.clone()).collect()
    };
    // The two parameters' ids swapped: still defined before use.
    let mut p = module_proto();
    let (pk, qk) = (
        listed.iter().position(|n| n == "p").expect("p"),
        listed.iter().position(|n| n == "q").expect("q"),
    );
    renumber(&mut p, &|k, _| {
        if k == pk {
            1000 + qk as i64
        } else if k == qk {
            1000 + pk as i64
        } else {
            1000 + k as i64
        }
    });
    let mut by_id = listed.clone();
    by_id.swap(pk, qk);
    assert_eq!(entry_order(&p), by_id);
    // As listed, for data that counts instructions in the proto's order.
    let (m, _) = proto::module_from_proto_as_listed(&p).unwrap_or_else(|e| panic!("{e}"));
    let as_listed: Vec<String> = m
        .comp(m.entry)
        .order
        .iter()
        .map(|&i| m.inst(i).name.to_string())
        .collect();
    assert_eq!(as_listed, listed);
    // Ids in reverse: every use before its definition, so the proto's order.
    let mut p = module_proto();
    renumber(&mut p, &|k, n| 1000 + (n - k) as i64);
    assert_eq!(entry_order(&p), listed);
}

/// Found by the parse_print fuzzer: `dim_labels` whose kernel part has fewer
/// spatial dimensions than the input parse (unverified, `?` for the missing
/// one), and the writer wrote -1, which its own reader refuses. The writer
/// refuses it instead, naming the attribute.
#[test]
fn a_convolution_with_an_unassigned_spatial_dimension_is_not_written() {
    let text = "HloModule m\n\nENTRY e {\n  x = f32[2,8,8,4]{3,2,1,0} parameter(0)\n  k = f32[1,1,4,4]{3,2,1,0} parameter(1)\n  ROOT c = f32[2,8,8,4]{3,2,1,0} convolution(x, k), window={size=1x1}, dim_labels=b01f_0io->b01f\n}\n";
    let m = hlo::parse_module(text).expect("parses (the verifier, not the parser, rejects it)");
    let err = proto::to_bytes(&m).expect_err("no proto carries an unassigned spatial dimension");
    assert!(
        err.to_string().contains("spatial dimension unassigned"),
        "{err}"
    );
    let ok = text.replace("b01f_0io->b01f", "b01f_01io->b01f");
    let m = hlo::parse_module(&ok).expect("parses");
    let bytes = proto::to_bytes(&m).expect("a full dim_labels is written");
    proto::from_bytes(&bytes).expect("and reads back");
}

/// Found by the proto fuzzer: a mesh axis named `]` read from a proto printed
/// as `mesh[']'=2]`, text the parser's bracket scan cannot read back. Axis
/// names text cannot carry are an error when read, naming the name.
#[test]
fn a_mesh_axis_name_text_cannot_carry_is_an_error() {
    let text = "HloModule m\n\nENTRY e {\n  p = f32[8,8]{1,0} parameter(0), sharding={mesh['x'=2,'y'=2], [{'x'}, {'y'}]}\n  ROOT c = f32[8,8]{1,0} copy(p)\n}\n";
    let m = hlo::parse_module(text).expect("parses");
    let bytes = proto::to_bytes(&m).expect("writes");
    proto::from_bytes(&bytes).expect("reads back");
    for bad in ["]", "a[b]", "{", "(", "\"", "'", "x\ny"] {
        let mut p = xla::HloModuleProto::decode(bytes.as_slice()).expect("decodes");
        let sharding = p.computations[0]
            .instructions
            .iter_mut()
            .find_map(|i| i.sharding.as_mut())
            .expect("the parameter's sharding");
        let mesh = sharding
            .named_sharding
            .as_mut()
            .and_then(|n| n.mesh.as_mut())
            .expect("a named sharding's mesh");
        mesh.axes[1].name = bad.to_string();
        let err = read_err(&p);
        assert!(
            err.contains("cannot be written in HLO text"),
            "{bad:?}: {err}"
        );
    }
}

/// Found by the proto fuzzer: a tiled sharding with tile dimensions but
/// neither devices nor an iota printed as `devices=[4,2]
/// last_tile_dim_replicate`, text the parser refuses. Reading it is an error.
#[test]
fn a_tiled_sharding_without_devices_is_an_error() {
    let text = "HloModule m\n\nENTRY e {\n  p = f32[8,8]{1,0} parameter(0), sharding={devices=[2,1]0,1}\n  ROOT c = f32[8,8]{1,0} copy(p)\n}\n";
    let m = hlo::parse_module(text).expect("parses");
    let bytes = proto::to_bytes(&m).expect("writes");
    proto::from_bytes(&bytes).expect("reads back");
    let mut p = xla::HloModuleProto::decode(bytes.as_slice()).expect("decodes");
    let sharding = p.computations[0]
        .instructions
        .iter_mut()
        .find_map(|i| i.sharding.as_mut())
        .expect("the parameter's sharding");
    assert!(sharding.iota_reshape_dims.is_empty(), "{sharding:?}");
    sharding.tile_assignment_devices.clear();
    let err = read_err(&p);
    assert!(err.contains("without devices"), "{err}");
}

/// `text` written to a proto reads back, prints with `printed` in it, and
/// writes the same bytes again (a fuzz finding's fixed point).
fn reads_back_printing(text: &str, printed: &str) {
    let m = hlo::parse_module(text).expect("parses");
    let bytes = proto::to_bytes(&m).expect("writes");
    let back = proto::from_bytes(&bytes).unwrap_or_else(|e| panic!("{e}"));
    let out = hlo::print_module(&back);
    assert!(out.contains(printed), "{out}");
    assert_eq!(proto::to_bytes(&back).expect("writes again"), bytes);
}

/// Found by the parse_print fuzzer: a broadcast of a non-scalar operand with
/// `dimensions={}` (XLA reads it, from text and from its proto) was written
/// with no dimensions, which the reader took for a missing `dimensions=`
/// and refused. It reads back with `dimensions={}`, as XLA prints it.
#[test]
fn a_broadcast_with_empty_dimensions_reads_back() {
    let text = "HloModule m\n\nENTRY e {\n  p = f32[1,4]{1,0} parameter(0)\n  ROOT b = f32[1,4]{1,0} broadcast(p), dimensions={}\n}\n";
    reads_back_printing(text, "broadcast(%p), dimensions={}");
}

/// Found by the parse_print fuzzer: stack frame sections that no
/// instruction uses (`metadata={stack_frame_id=0}`) were written as an empty
/// `stack_frame_index`, read back as none, so the proto read back wrote
/// different bytes. As XLA does, no index is written.
#[test]
fn unused_stack_frames_are_a_write_read_fixed_point() {
    let text = "HloModule m\n\nFileNames\n1 \"a.py\"\n\nFunctionNames\n1 \"f\"\n\nFileLocations\n1 {file_name_id=1 function_name_id=1 line=1 end_line=2 column=0 end_column=1}\n\nStackFrames\n1 {file_location_id=1 parent_frame_id=1}\n\nENTRY e {\n  p = f32[4]{0} parameter(0)\n  ROOT n = f32[4]{0} negate(p), metadata={stack_frame_id=0}\n}\n";
    let m = hlo::parse_module(text).expect("parses");
    let once = proto::to_bytes(&m).expect("writes");
    let p = xla::HloModuleProto::decode(once.as_slice()).expect("decodes");
    assert!(p.stack_frame_index.is_none(), "{:?}", p.stack_frame_index);
    let back = proto::from_bytes(&once).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(proto::to_bytes(&back).expect("writes again"), once);
}

/// Found by the parse_print fuzzer: a dynamic-slice with
/// `dynamic_slice_sizes={}` (XLA reads it, from text and from its proto)
/// was written with no sizes, which the reader took for missing ones and
/// refused. It reads back with `dynamic_slice_sizes={}`.
#[test]
fn a_dynamic_slice_with_empty_sizes_reads_back() {
    let text = "HloModule m\n\nENTRY e {\n  p = f32[4]{0} parameter(0)\n  i = s32[] parameter(1)\n  ROOT d = f32[4]{0} dynamic-slice(p, i), dynamic_slice_sizes={}\n}\n";
    reads_back_printing(text, "dynamic_slice_sizes={}");
}

/// Found by the parse_print fuzzer: a scan with `num_carries=0` was written
/// with the proto's default, which the reader took for a missing
/// `num_carries=` and refused. It reads back with `num_carries=0`.
#[test]
fn a_scan_with_no_carries_reads_back() {
    let text = "HloModule m\n\nadd {\n  x = f32[200] parameter(0)\n  y = f32[200] parameter(1)\n  a = f32[200] add(x, y)\n  ROOT t = (f32[200], f32[200]) tuple(a, a)\n}\n\nENTRY main {\n  input = f32[100,200] parameter(0)\n  zero = f32[] constant(0)\n  init = f32[200] broadcast(zero), dimensions={}\n  ROOT scan = (f32[100,200], f32[200]) scan(input, init), dimensions={0}, num_carries=0, is_associative=true, to_apply=add\n}\n";
    reads_back_printing(text, "num_carries=0");
}

/// Found by the parse_print fuzzer: XLA's text parser takes a mesh axis of
/// size 0 in a sharding, its proto reader (and ours) refuses one. The writer
/// refused nothing and wrote a proto its own reader refused; it now refuses
/// the sharding by name, in an instruction's `sharding=` and in a tuple's
/// element, where XLA's text parser takes it.
#[test]
fn a_mesh_axis_of_size_zero_is_not_written() {
    for sharding in [
        "{mesh['x'=0] []}",
        "{{mesh['x'=2] [], unreduced={'x'}}, {mesh['x'=0] [], unreduced={'x'}}}",
    ] {
        let shape = if sharding.starts_with("{{") {
            "(f32[8]{0}, f32[8]{0})"
        } else {
            "f32[8]{0}"
        };
        let text = format!(
            "HloModule m\n\nENTRY e {{\n  p = {shape} parameter(0), sharding={sharding}\n  ROOT c = {shape} copy(p)\n}}\n"
        );
        let m = hlo::parse_module(&text).expect("XLA's text parser takes it");
        let err = proto::to_bytes(&m)
            .expect_err("a proto cannot carry it")
            .to_string();
        assert!(
            err.contains("`sharding` cannot be written to a proto")
                && err.contains("mesh axis 'x' has size 0"),
            "{err}"
        );
        let err = proto::module_to_proto(&m)
            .expect_err("nor as a message")
            .to_string();
        assert!(err.contains("mesh axis 'x' has size 0"), "{err}");
    }
}

/// XLA numbers the stack frame tables (`FileNames`, `FunctionNames`,
/// `FileLocations`, `StackFrames`) of a module it reads from a proto in the
/// order its instructions use them (computations in XLA's order,
/// instructions by id, each frame after its parents), not as the proto
/// lists them: the optimized module of a sharded jax program comes out of
/// XLA's compiler with its tables in another order. hlo-opt reads them so:
/// a proto whose tables are listed backwards reads as the proto in use
/// order (the generated corpus checks this against XLA, `jax_gen.rs`).
#[test]
fn stack_frames_read_from_a_proto_are_numbered_in_use_order() {
    let text = std::fs::read_to_string(common::testdata().join("hlo/mlp.pre_debug.hlo"))
        .expect("testdata/hlo/mlp.pre_debug.hlo");
    let m = hlo::parse_module(&text).expect("parses");
    let p = proto::module_to_proto(&m).expect("writes");
    let expected = hlo::print_module(&proto::module_from_proto(&p).expect("reads").0);
    // The same index listed backwards, every id renumbered with it.
    let mut q = p.clone();
    let sf = q
        .stack_frame_index
        .as_mut()
        .expect("the module has stack frames");
    let rev = |n: usize, id: i32| if id == 0 { 0 } else { n as i32 + 1 - id };
    let (nf, nu, nl, ns) = (
        sf.file_names.len(),
        sf.function_names.len(),
        sf.file_locations.len(),
        sf.stack_frames.len(),
    );
    assert!(nl > 2 && ns > 2, "too few frames to reorder");
    sf.file_names.reverse();
    sf.function_names.reverse();
    sf.file_locations.reverse();
    sf.stack_frames.reverse();
    for l in &mut sf.file_locations {
        l.file_name_id = rev(nf, l.file_name_id);
        l.function_name_id = rev(nu, l.function_name_id);
    }
    for f in &mut sf.stack_frames {
        f.file_location_id = rev(nl, f.file_location_id);
        f.parent_frame_id = rev(ns, f.parent_frame_id);
    }
    for c in &mut q.computations {
        for i in &mut c.instructions {
            if let Some(md) = &mut i.metadata {
                md.stack_frame_id = rev(ns, md.stack_frame_id);
            }
        }
    }
    let got = hlo::print_module(&proto::module_from_proto(&q).expect("reads").0);
    assert_eq!(got, expected);
}

#[test]
fn a_caller_listed_before_its_callee_is_an_error() {
    // XLA builds a proto's computations in their listed order, and refuses
    // an instruction calling one not built yet ("references invalid
    // computation id(s)"): here the entry, listed first, calls %add.
    let mut p = module_proto();
    let entry = p.computations.pop().expect("an entry");
    p.computations.insert(0, entry);
    let e = read_err(&p);
    assert!(
        e.contains("computation `e` (listed 1): instruction `r` calls computation `add`")
            && e.contains("listed 2"),
        "{e}"
    );
}

/// The module config's device assignment and SPMD shardings, which a proto
/// carries and text does not, are held and written back; a device
/// assignment XLA refuses (jaxlib 0.10.2: no replica or no computation, a
/// list of devices per computation, a device per replica in each) and a
/// sharding the reader refuses on an instruction are refused, naming the
/// field; any device ids are taken, as XLA takes them.
#[test]
fn the_device_assignment_and_spmd_shardings_are_held_and_checked() {
    let devices = |replicas: i32, lists: &[&[i64]]| xla::DeviceAssignmentProto {
        replica_count: replicas,
        computation_count: lists.len() as i32,
        computation_devices: lists
            .iter()
            .map(|l| xla::ComputationDevice {
                replica_device_ids: l.to_vec(),
            })
            .collect(),
    };
    let tiled = xla::OpSharding {
        r#type: 3, // OTHER
        tile_assignment_dimensions: vec![2],
        iota_reshape_dims: vec![2],
        iota_transpose_perm: vec![0],
        ..Default::default()
    };
    let mut p = module_proto();
    p.device_assignment = Some(devices(1, &[&[1], &[0]]));
    p.spmd_output_sharding = Some(tiled.clone());
    p.spmd_parameters_shardings = vec![tiled.clone()];
    let bytes = p.encode_to_vec();
    let (m, report) = proto::from_bytes_lossy(&bytes).expect("reads");
    assert!(report.ignored.is_empty(), "{:?}", report.ignored);
    let config = m.config.as_deref().expect("held");
    assert_eq!(config.device_assignment, p.device_assignment);
    assert_eq!(config.spmd_output_sharding.as_ref(), Some(&tiled));
    let back =
        xla::HloModuleProto::decode(&proto::to_bytes(&m).expect("writes")[..]).expect("decodes");
    assert_eq!(back.device_assignment, p.device_assignment);
    assert_eq!(back.spmd_output_sharding, p.spmd_output_sharding);
    assert_eq!(back.spmd_parameters_shardings, p.spmd_parameters_shardings);
    // XLA prints none of them; neither does hlo-opt.
    let text = hlo::print_module(&m);
    assert!(!text.contains("device") && !text.contains("spmd"), "{text}");
    // Device ids are not checked (XLA takes negative and repeated ones).
    let mut q = p.clone();
    q.device_assignment = Some(devices(2, &[&[-1, -1]]));
    assert!(proto::from_bytes(&q.encode_to_vec()).is_ok());

    for (da, expected) in [
        (devices(0, &[&[]]), "0 replicas of 1 computations"),
        (devices(1, &[]), "1 replicas of 0 computations"),
        (
            xla::DeviceAssignmentProto {
                computation_count: 2,
                ..devices(1, &[&[0]])
            },
            "computation_count 2 but devices for 1 computations",
        ),
        (
            devices(2, &[&[0, 1], &[2]]),
            "computation_devices[1]: 1 devices for 2 replicas",
        ),
    ] {
        let mut q = p.clone();
        q.device_assignment = Some(da.clone());
        let e = proto::from_bytes(&q.encode_to_vec())
            .expect_err("refused")
            .to_string();
        assert!(e.contains(expected), "{expected}: {e}");
        // The writer refuses what the reader refuses.
        let mut held = m.clone();
        held.config.as_mut().expect("config").device_assignment = Some(da);
        let e = proto::to_bytes(&held).expect_err("not written").to_string();
        assert!(e.contains(expected), "{expected}: {e}");
    }
    let maximal_without_device = xla::OpSharding {
        r#type: 1, // MAXIMAL
        ..Default::default()
    };
    let mut q = p.clone();
    q.spmd_parameters_shardings = vec![tiled, maximal_without_device];
    let e = proto::from_bytes(&q.encode_to_vec())
        .expect_err("refused")
        .to_string();
    assert!(
        e.contains("spmd_parameters_shardings[1]")
            && e.contains("maximal sharding without a device"),
        "{e}"
    );
}
