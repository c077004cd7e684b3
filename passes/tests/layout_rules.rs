//! The rules of layout propagation and copy insertion, each pinned down on a
//! small module: decisions go in through `assign`, the rewritten module
//! comes out.

use hlo::{InstId, Module, Opcode};
use indexmap::IndexMap;
use passes::layout::assign::{assign, Assignment, Decision};
use passes::layout::dims::M2M;
use smallvec::SmallVec;

fn parse(text: &str) -> Module {
    hlo::parse_module(text).expect("parses")
}

fn find(m: &Module, name: &str) -> InstId {
    m.find_instruction(name)
        .unwrap_or_else(|| panic!("no %{name}"))
}

fn layout_of(m: &Module, name: &str) -> Vec<i64> {
    let s = m.inst_shape(find(m, name));
    s.as_array()
        .and_then(|a| a.layout.as_ref())
        .map(|l| l.minor_to_major.to_vec())
        .unwrap_or_default()
}

fn m2m(v: &[i64]) -> M2M {
    SmallVec::from_slice(v)
}

fn decide(
    m: &Module,
    name: &str,
    output: Option<&[i64]>,
    operands: &[(usize, &[i64])],
) -> IndexMap<InstId, Decision> {
    let mut d = IndexMap::new();
    d.insert(
        find(m, name),
        Decision {
            output: output.map(m2m),
            operands: operands.iter().map(|(k, l)| (*k, m2m(l))).collect(),
        },
    );
    d
}

/// Parses `text`, assigns the one decision `decide` makes for `%name`, and
/// checks that the rewritten module verifies.
fn assign_one(
    text: &str,
    name: &str,
    output: Option<&[i64]>,
    operands: &[(usize, &[i64])],
) -> (Module, Assignment) {
    let mut m = parse(text);
    let d = decide(&m, name, output, operands);
    let a = assign(&mut m, &d).expect("assigns");
    hlo::verify(&m).expect("verifies");
    (m, a)
}

fn copies(m: &Module) -> Vec<String> {
    m.all_instructions()
        .filter(|&i| m.inst(i).opcode == Opcode::Copy)
        .map(|i| {
            let c = m.inst(i);
            format!("{} <- {}", c.name, m.inst(c.operands[0]).name)
        })
        .collect()
}

const DOT_CHAIN: &str = r#"
HloModule chain, entry_computation_layout={(f32[8,16]{1,0}, f32[16,4]{1,0})->f32[8,4]{1,0}}

ENTRY %main (a: f32[8,16], b: f32[16,4]) -> f32[8,4] {
  %a = f32[8,16]{1,0} parameter(0)
  %b = f32[16,4]{1,0} parameter(1)
  %na = f32[8,16]{1,0} negate(%a)
  %dot = f32[8,4]{1,0} dot(%na, %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  %e = f32[8,4]{1,0} exponential(%dot)
  ROOT %r = f32[8,4]{1,0} add(%e, %e)
}
"#;

#[test]
fn a_chosen_layout_flows_to_consumers_until_a_constraint_needs_a_copy() {
    let (m, a) = assign_one(DOT_CHAIN, "dot", Some(&[0, 1]), &[]);
    // The root keeps {1,0}; between the dot ({0,1}) and the root exactly one
    // copy converts (the free exponential may sit on either side of it).
    assert_eq!(layout_of(&m, "dot"), vec![0, 1]);
    assert_eq!(layout_of(&m, "r"), vec![1, 0]);
    assert_eq!(a.copies.len(), 1);
    let c = &m.inst(a.copies[0].copy);
    assert!(
        ["dot", "e"].contains(&&*m.inst(c.operands[0]).name),
        "{}",
        c.name
    );
    // Both operands of the add read the same value: one copy serves both.
    let r = m.inst(find(&m, "r"));
    assert_eq!(r.operands[0], r.operands[1]);
}

#[test]
fn an_operand_requirement_is_adopted_by_a_free_producer_instead_of_copying() {
    // The dot wants its lhs column-major: %na (a negate) can produce that
    // directly, so the copy moves up to the parameter, which may not change.
    let (m, _) = assign_one(DOT_CHAIN, "dot", None, &[(0, &[0, 1])]);
    assert_eq!(layout_of(&m, "na"), vec![0, 1]);
    assert_eq!(
        layout_of(&m, "a"),
        vec![1, 0],
        "entry parameters keep their layout"
    );
    assert_eq!(copies(&m), vec!["copy.1 <- a".to_string()]);
}

#[test]
fn no_decision_no_copy() {
    let mut m = parse(DOT_CHAIN);
    let a = assign(&mut m, &IndexMap::new()).expect("assigns");
    assert!(a.copies.is_empty());
    assert_eq!(a.relayouted, 0);
}

#[test]
fn transpose_and_reduce_map_dimensions() {
    // %t and %r feed dots, which read any layout: they keep the layouts
    // that make them bitcasts of %n.
    let text = r#"
HloModule t

%sum (x: f32[], y: f32[]) -> f32[] {
  %x = f32[] parameter(0)
  %y = f32[] parameter(1)
  ROOT %s = f32[] add(%x, %y)
}

ENTRY %main (p: f32[2,3,4]) -> (f32[4,4], f32[2,2]) {
  %p = f32[2,3,4]{2,1,0} parameter(0)
  %n = f32[2,3,4]{2,1,0} negate(%p)
  %t = f32[4,2,3]{2,1,0} transpose(%n), dimensions={2,0,1}
  %z = f32[] constant(0)
  %r = f32[2,4]{1,0} reduce(%n, %z), dimensions={1}, to_apply=%sum
  %d1 = f32[4,4]{1,0} dot(%t, %t), lhs_contracting_dims={1,2}, rhs_contracting_dims={1,2}
  %d2 = f32[2,2]{1,0} dot(%r, %r), lhs_contracting_dims={1}, rhs_contracting_dims={1}
  ROOT %out = (f32[4,4]{1,0}, f32[2,2]{1,0}) tuple(%d1, %d2)
}
"#;
    let (m, a) = assign_one(text, "n", Some(&[0, 1, 2]), &[]);
    // transpose: output dim i is operand dim perm[i]; the bitcast layout of
    // {0,1,2} through perm {2,0,1} is {1,2,0}.
    assert_eq!(layout_of(&m, "t"), vec![1, 2, 0]);
    // reduce drops dim 1 and renumbers: {0,1,2} -> {0,1}.
    assert_eq!(layout_of(&m, "r"), vec![0, 1]);
    // %n's requirement on %p: the negate could not adopt (its consumers
    // need nothing), so the copy is the only one, at the parameter.
    assert_eq!(a.copies.len(), 1);
    assert_eq!(copies(&m), vec!["copy.1 <- p".to_string()]);
}

#[test]
fn a_while_body_takes_its_callers_layout_and_gives_it_back() {
    let text = r#"
HloModule w

%cond (c: (s32[], f32[4,8])) -> pred[] {
  %c = (s32[], f32[4,8]) parameter(0)
  %i = s32[] get-tuple-element(%c), index=0
  %k = s32[] constant(3)
  ROOT %lt = pred[] compare(%i, %k), direction=LT
}

%body (b: (s32[], f32[4,8])) -> (s32[], f32[4,8]) {
  %b = (s32[], f32[4,8]) parameter(0)
  %i = s32[] get-tuple-element(%b), index=0
  %one = s32[] constant(1)
  %i2 = s32[] add(%i, %one)
  %x = f32[4,8]{1,0} get-tuple-element(%b), index=1
  %w = f32[8,8]{1,0} constant({...})
  %d = f32[4,8]{1,0} dot(%x, %w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT %t = (s32[], f32[4,8]{1,0}) tuple(%i2, %d)
}

ENTRY %main (p: f32[4,8]) -> f32[4,8] {
  %p = f32[4,8]{1,0} parameter(0)
  %z = s32[] constant(0)
  %init = (s32[], f32[4,8]{1,0}) tuple(%z, %p)
  %loop = (s32[], f32[4,8]{1,0}) while(%init), condition=%cond, body=%body
  ROOT %res = f32[4,8]{1,0} get-tuple-element(%loop), index=1
}
"#;
    let (m, _) = assign_one(text, "d", Some(&[0, 1]), &[]);
    assert_eq!(layout_of(&m, "d"), vec![0, 1]);
    // The body must hand back what it received: a copy before its root tuple.
    assert_eq!(copies(&m), vec!["copy.1 <- d".to_string()]);
}

#[test]
fn custom_call_operand_layout_constraints_are_kept() {
    let text = r#"
HloModule cc

ENTRY %main (p: f32[4,8]) -> f32[4,4] {
  %p = f32[4,8]{1,0} parameter(0)
  %d = f32[4,4]{1,0} dot(%p, %p), lhs_contracting_dims={1}, rhs_contracting_dims={1}
  ROOT %c = f32[4,4]{1,0} custom-call(%d), custom_call_target="foo", operand_layout_constraints={f32[4,4]{1,0}}
}
"#;
    let (m, _) = assign_one(text, "d", Some(&[0, 1]), &[]);
    assert_eq!(layout_of(&m, "d"), vec![0, 1]);
    assert_eq!(copies(&m), vec!["copy.1 <- d".to_string()]);
}

#[test]
fn entry_layouts_that_contradict_the_entry_computation_layout_are_an_error() {
    let text = DOT_CHAIN.replace(
        "%a = f32[8,16]{1,0} parameter(0)",
        "%a = f32[8,16]{0,1} parameter(0)",
    );
    let Ok(mut m) = hlo::parse_module(&text) else {
        return;
    };
    let err = assign(&mut m, &IndexMap::new()).expect_err("conflict");
    let msg = err.to_string();
    assert!(
        msg.contains("entry_computation_layout") && msg.contains("%a"),
        "{msg}"
    );
}
