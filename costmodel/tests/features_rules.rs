//! The featurization rules, one small module each: what becomes a node, an
//! edge, a split, a configurable node, and what the documented fallbacks do.

use costmodel::features::{
    featurize, idx, is_configurable, layout_config_tensors, opcode::UNKNOWN_OPCODE_ID,
    ConfigTensors,
};
use costmodel::graph::NODE_FEAT_DIM;
use costmodel::{CostModelError, Task};

fn parse(text: &str) -> hlo::Module {
    hlo::parse_module(text).unwrap_or_else(|e| panic!("{e}"))
}

fn feat(g: &costmodel::Graph, node: usize) -> &[f32] {
    &g.node_feat[node * NODE_FEAT_DIM..(node + 1) * NODE_FEAT_DIM]
}

const CALLS: &str = r#"
HloModule calls

%add_f32 (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %sum = f32[] add(%a, %b)
}

%while_cond (c: (s32[], f32[4])) -> pred[] {
  %c = (s32[], f32[4]{0}) parameter(0)
  %i = s32[] get-tuple-element(%c), index=0
  %n = s32[] constant(3)
  ROOT %lt = pred[] compare(%i, %n), direction=LT
}

%while_body (p: (s32[], f32[4])) -> (s32[], f32[4]) {
  %p = (s32[], f32[4]{0}) parameter(0)
  %j = s32[] get-tuple-element(%p), index=0
  %v = f32[4]{0} get-tuple-element(%p), index=1
  %vv = f32[4]{0} add(%v, %v)
  ROOT %t = (s32[], f32[4]{0}) tuple(%j, %vv)
}

ENTRY %main (x: f32[4]) -> f32[] {
  %x = f32[4]{0} parameter(0)
  %zero = s32[] constant(0)
  %init = (s32[], f32[4]{0}) tuple(%zero, %x)
  %w = (s32[], f32[4]{0}) while(%init), condition=%while_cond, body=%while_body
  %y = f32[4]{0} get-tuple-element(%w), index=1
  %z = f32[] constant(0)
  ROOT %r = f32[] reduce(%y, %z), dimensions={0}, to_apply=%add_f32
}
"#;

#[test]
fn nodes_follow_module_order_and_edges_are_deduplicated_operands_plus_called_roots() {
    let m = parse(CALLS);
    let f = featurize(&m, Task::Layout).expect("featurize");
    let g = &f.graph;
    let name = |k: usize| &*m.inst(f.node_inst[k]).name;
    let names: Vec<&str> = (0..g.num_nodes()).map(name).collect();
    assert_eq!(
        names,
        [
            "a", "b", "sum", "c", "i", "n", "lt", "p", "j", "v", "vv", "t", "x", "zero", "init",
            "w", "y", "z", "r"
        ]
    );
    let node = |n: &str| names.iter().position(|&x| x == n).expect("node") as i64;
    // add(%v, %v) has one edge to %v.
    assert_eq!(
        g.edge_index.iter().filter(|e| e[0] == node("vv")).count(),
        1
    );
    // while: its operand, and the roots of condition and body.
    let w: Vec<i64> = g
        .edge_index
        .iter()
        .filter(|e| e[0] == node("w"))
        .map(|e| e[1])
        .collect();
    assert_eq!(w, [node("lt"), node("t"), node("init")]);
    // reduce: operands and the root of to_apply.
    let r: Vec<i64> = g
        .edge_index
        .iter()
        .filter(|e| e[0] == node("r"))
        .map(|e| e[1])
        .collect();
    assert_eq!(r, [node("sum"), node("y"), node("z")]);
    // Sorted, unique.
    assert!(g.edge_index.windows(2).all(|p| p[0] < p[1]));
}

#[test]
fn splits_close_after_computations_named_cluster_while_or_cond() {
    let m = parse(CALLS);
    let g = featurize(&m, Task::Layout).expect("featurize").graph;
    // add_f32 (3) does not close a split; while_cond (4) and while_body (5)
    // do; the entry (7) is closed by the final total.
    assert_eq!(g.node_splits, [0, 7, 12, 19]);
}

#[test]
fn root_parameter_number_shape_and_layout_features() {
    let m = parse(CALLS);
    let g = featurize(&m, Task::Layout).expect("featurize").graph;
    // %b: parameter 1, not a root, f32 scalar: product of no dims is 1.
    let b = feat(&g, 1);
    assert_eq!(b[idx::IS_ROOT], 0.0);
    assert_eq!(b[idx::PARAMETER_NUMBER], 1.0);
    assert_eq!(b[idx::ELEMENT_TYPE + 11], 1.0, "is_f32");
    assert_eq!(b[idx::SHAPE_DIMS + 7], 1.0, "dims product of a scalar");
    // %sum is its computation's root.
    assert_eq!(feat(&g, 2)[idx::IS_ROOT], 1.0);
    // %t: a tuple of 2; no dims, no layout.
    let t = feat(&g, 11);
    assert_eq!(t[idx::ELEMENT_TYPE + 16], 1.0, "is_tuple");
    assert_eq!(t[idx::TUPLE_SHAPES_SIZE], 2.0);
    assert_eq!(&t[idx::LAYOUT_MINOR_TO_MAJOR..], &[0.0; 6]);
    // %r: reduce dimensions={0}; %y: f32[4]{0}.
    let y = feat(&g, 16);
    assert_eq!(
        &y[idx::SHAPE_DIMS..idx::SHAPE_DIMS + 8],
        &[4.0, 0.0, 0.0, 0.0, 0.0, 0.0, 4.0, 4.0]
    );
    // Window, slice, dynamic slice, padding of an instruction without them:
    // zeros and products of 1, as the dataset has them.
    assert_eq!(y[idx::WINDOW + 7], 1.0);
    assert_eq!(
        y[idx::WINDOW + 6 * 8 + 7],
        0.0,
        "window reversal false count"
    );
    assert_eq!(y[idx::SLICE_DIMS + 3], 1.0);
    assert_eq!(y[idx::FEATURE_GROUP_COUNT], 0.0);
}

const CONFIGURABLE: &str = r#"
HloModule configurable

%fused (fp: f32[2,3]) -> f32[3,2] {
  %fp = f32[2,3]{1,0} parameter(0)
  ROOT %fr = f32[3,2]{1,0} reshape(%fp)
}

ENTRY %main (x: f32[1,8,8,4], k: f32[3,3,4,2], a: f32[2,3], b: f32[3,5]) -> f32[2,5] {
  %x = f32[1,8,8,4]{3,2,1,0} parameter(0)
  %k = f32[3,3,4,2]{3,2,1,0} parameter(1)
  %a = f32[2,3]{1,0} parameter(2)
  %b = f32[3,5]{1,0} parameter(3)
  %conv = f32[1,8,8,2]{3,2,1,0} convolution(%x, %k), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f, feature_group_count=1
  %fus = f32[3,2]{1,0} fusion(%a), kind=kLoop, calls=%fused
  %rs = f32[2,3]{1,0} reshape(%fus)
  ROOT %dot = f32[2,5]{1,0} dot(%rs, %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
"#;

#[test]
fn convolutions_dots_and_reshapes_outside_fusions_are_configurable() {
    let m = parse(CONFIGURABLE);
    let f = featurize(&m, Task::Layout).expect("featurize");
    let names: Vec<&str> = f.config_nodes.iter().map(|&i| &*m.inst(i).name).collect();
    assert_eq!(
        names,
        ["conv", "rs", "dot"],
        "the reshape inside %fused is not configurable"
    );
    assert_eq!(f.graph.node_config_ids, [6, 8, 9]);
    let fr = f.node_inst[1];
    assert_eq!(&*m.inst(fr).name, "fr");
    assert!(!is_configurable(&m, fr));
    assert!(is_configurable(&m, f.node_inst[6]));
    // The tile task has no configurable nodes.
    assert!(featurize(&m, Task::Tile)
        .expect("featurize")
        .graph
        .node_config_ids
        .is_empty());
}

#[test]
fn config_tensors_are_output_then_operand0_then_operand1() {
    let m = parse(CONFIGURABLE);
    let f = featurize(&m, Task::Layout).expect("featurize");
    let id = |k: usize| f.node_inst[k];
    let (x, k, b, fus) = (id(2), id(3), id(5), id(7));
    assert_eq!(
        layout_config_tensors(&m, id(6)),
        ConfigTensors {
            output: id(6),
            input: Some(x),
            kernel: Some(k)
        }
    );
    assert_eq!(
        layout_config_tensors(&m, id(8)),
        ConfigTensors {
            output: id(8),
            input: Some(fus),
            kernel: None
        }
    );
    assert_eq!(
        layout_config_tensors(&m, id(9)),
        ConfigTensors {
            output: id(9),
            input: Some(id(8)),
            kernel: Some(b)
        }
    );
}

#[test]
fn convolution_window_and_dimension_numbers() {
    let m = parse(CONFIGURABLE);
    let g = featurize(&m, Task::Layout).expect("featurize").graph;
    let c = feat(&g, 6);
    assert_eq!(
        &c[idx::WINDOW..idx::WINDOW + 8],
        &[3.0, 3.0, 0.0, 0.0, 0.0, 0.0, 6.0, 9.0],
        "size"
    );
    assert_eq!(
        &c[idx::WINDOW + 8..idx::WINDOW + 16],
        &[1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 2.0, 1.0],
        "stride"
    );
    assert_eq!(
        &c[idx::WINDOW + 48..idx::WINDOW + 56],
        &[0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 2.0],
        "reversal"
    );
    assert_eq!(
        &c[idx::CONV_DIMS..idx::CONV_DIMS + 14],
        &[0.0, 3.0, 1.0, 2.0, 0.0, 0.0, 2.0, 3.0, 0.0, 1.0, 0.0, 0.0, 0.0, 3.0]
    );
    assert_eq!(
        (c[idx::FEATURE_GROUP_COUNT], c[idx::BATCH_GROUP_COUNT]),
        (1.0, 1.0)
    );
}

#[test]
fn an_opcode_unknown_to_tpugraphs_gets_id_zero() {
    let m = parse(
        "HloModule u\n\nENTRY %e (x: f32[2]) -> f32[2] {\n  %x = f32[2]{0} parameter(0)\n  ROOT %y = f32[2]{0} erf(%x)\n}\n",
    );
    let g = featurize(&m, Task::Layout).expect("featurize").graph;
    assert_eq!(g.node_opcode, [63, UNKNOWN_OPCODE_ID]);
}

#[test]
fn rank_above_six_keeps_six_leading_values_and_aggregates_all() {
    let m = parse(
        "HloModule r\n\nENTRY %e (x: f32[1,2,3,4,5,6,7]) -> f32[1,2,3,4,5,6,7] {\n  ROOT %x = f32[1,2,3,4,5,6,7]{6,5,4,3,2,1,0} parameter(0)\n}\n",
    );
    let g = featurize(&m, Task::Layout).expect("featurize").graph;
    let x = feat(&g, 0);
    assert_eq!(
        &x[idx::SHAPE_DIMS..idx::SHAPE_DIMS + 8],
        &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 28.0, 5040.0]
    );
    assert_eq!(
        &x[idx::LAYOUT_MINOR_TO_MAJOR..],
        &[6.0, 5.0, 4.0, 3.0, 2.0, 1.0]
    );
}

#[test]
fn an_array_without_layout_gets_the_default_layout() {
    let m = parse("HloModule d\n\nENTRY %e (x: f32[2,3]) -> f32[2,3] {\n  ROOT %x = f32[2,3] parameter(0)\n}\n");
    let g = featurize(&m, Task::Layout).expect("featurize").graph;
    assert_eq!(
        &feat(&g, 0)[idx::LAYOUT_MINOR_TO_MAJOR..],
        &[1.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    );
}

#[test]
fn a_malformed_attribute_is_an_error_naming_the_instruction() {
    let mut m = parse(CONFIGURABLE);
    let conv = m.find_instruction("conv").expect("conv");
    m.inst_mut(conv)
        .set_attr("window", hlo::AttrValue::Raw("{size=3x3 stride=2}".into()));
    match featurize(&m, Task::Layout) {
        Err(CostModelError::Featurize(msg)) => {
            assert!(msg.contains("%conv") && msg.contains("window"), "{msg}")
        }
        other => panic!("expected a featurization error, got {other:?}"),
    }
}

/// Each attribute of XLA's text lands in the proto field TpuGraphs reads:
/// `lhs_dilate` is the window's base dilation, `rhs_dilate` its window
/// dilation; a pad's `lo_hi_interior` gives edge_padding_low and _high; a
/// slice's `[start:limit:stride]` is read as start, stride, limit.
const ATTRIBUTES: &str = r#"
HloModule attributes

ENTRY %main (x: f32[1,8,8,4], k: f32[3,3,4,2], v: f32[10]) -> (f32[1,16,5,2], f32[13], f32[3]) {
  %x = f32[1,8,8,4]{3,2,1,0} parameter(0)
  %k = f32[3,3,4,2]{3,2,1,0} parameter(1)
  %v = f32[10]{0} parameter(2)
  %conv = f32[1,16,5,2]{3,2,1,0} convolution(%x, %k), window={size=3x3 stride=1x2 pad=1_2x3_4 lhs_dilate=2x1 rhs_dilate=1x3 rhs_reversal=1x0}, dim_labels=b01f_01io->b01f
  %z = f32[] constant(0)
  %pad = f32[13]{0} pad(%v, %z), padding=2_1_0
  %sl = f32[3]{0} slice(%v), slice={[1:8:3]}
  ROOT %t = (f32[1,16,5,2]{3,2,1,0}, f32[13]{0}, f32[3]{0}) tuple(%conv, %pad, %sl)
}
"#;

#[test]
fn window_padding_and_slice_attributes_map_to_their_proto_fields() {
    let m = parse(ATTRIBUTES);
    let g = featurize(&m, Task::Layout).expect("featurize").graph;
    let group = |f: &[f32], k: usize| f[idx::WINDOW + 8 * k..idx::WINDOW + 8 * k + 8].to_vec();
    let conv = feat(&g, 3);
    let expected: [(usize, [f32; 8], &str); 6] = [
        (1, [1.0, 2.0, 0.0, 0.0, 0.0, 0.0, 3.0, 2.0], "stride"),
        (2, [1.0, 3.0, 0.0, 0.0, 0.0, 0.0, 4.0, 3.0], "padding_low"),
        (3, [2.0, 4.0, 0.0, 0.0, 0.0, 0.0, 6.0, 8.0], "padding_high"),
        (
            4,
            [1.0, 3.0, 0.0, 0.0, 0.0, 0.0, 4.0, 3.0],
            "window_dilation",
        ),
        (5, [2.0, 1.0, 0.0, 0.0, 0.0, 0.0, 3.0, 2.0], "base_dilation"),
        (
            6,
            [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0],
            "window_reversal",
        ),
    ];
    for (k, want, field) in expected {
        assert_eq!(group(conv, k), want, "{field}");
    }
    let pad = feat(&g, 5);
    assert_eq!(
        &pad[idx::PADDING..idx::PADDING + 8],
        &[2.0, 0.0, 2.0, 2.0, 1.0, 0.0, 1.0, 1.0]
    );
    let sl = feat(&g, 6);
    assert_eq!(
        &sl[idx::SLICE_DIMS..idx::SLICE_DIMS + 12],
        &[1.0, 0.0, 1.0, 1.0, 3.0, 0.0, 3.0, 3.0, 8.0, 0.0, 8.0, 8.0]
    );
}

#[test]
fn dim_labels_that_leave_a_dimension_unassigned_are_an_error() {
    let text = ATTRIBUTES.replace("dim_labels=b01f_01io->b01f", "dim_labels=b01f_01io->b0?f");
    match featurize(&parse(&text), Task::Layout) {
        Err(CostModelError::Featurize(msg)) => {
            assert!(msg.contains("%conv") && msg.contains("dim_labels"), "{msg}")
        }
        other => panic!("expected a featurization error, got {other:?}"),
    }
}

#[test]
fn a_module_without_instructions_is_an_error() {
    let m = hlo::Module::new("empty");
    assert!(matches!(
        featurize(&m, Task::Tile),
        Err(CostModelError::Featurize(_))
    ));
}
