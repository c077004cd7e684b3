//! Bad input to the tile pass: a kernel it cannot tile is skipped with a
//! warning naming it (and left unchanged), the other kernels are still
//! tiled, and nothing panics.

use costmodel::reference::ReferenceModel;
use costmodel::Task;
use passes::tile::{backend, TilePass};
use passes::{Pass, PassContext, PassOptions};

/// Runs the pass; returns the output module and the warnings.
fn run(text: &str) -> (hlo::Module, Vec<String>, String) {
    let mut m = hlo::parse_module(text).expect("the test input parses");
    let mut cx = PassContext::new(PassOptions::default());
    let mut pass = TilePass::with_model(Box::new(ReferenceModel::new(Task::Tile)));
    pass.run(&mut m, &mut cx)
        .expect("a bad kernel is not an error of the pass");
    (m, pass.warnings().to_vec(), cx.explain)
}

fn decision_of(m: &hlo::Module, name: &str) -> Option<passes::tile::TileConfig> {
    let id = m.find_instruction(name)?;
    backend::read_decision(m.inst(id).raw_attr("backend_config"))
}

fn module(kernel: &str) -> String {
    format!(
        "HloModule bad\n\n\
         ENTRY %main (p0: f32[16,256], p1: f32[16,256]) -> (f32[16,256], f32[16,256]) {{\n  \
           %p0 = f32[16,256]{{1,0}} parameter(0)\n  \
           %p1 = f32[16,256]{{1,0}} parameter(1)\n  \
           %good = f32[16,256]{{0,1}} copy(%p0)\n  \
           {kernel}\n  \
           ROOT %t = (f32[16,256], f32[16,256]) tuple(%good, %bad)\n\
         }}\n"
    )
}

fn assert_skipped(text: &str, why: &str) {
    let (m, warnings, explain) = run(text);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains("%bad"),
        "the warning names the kernel: {}",
        warnings[0]
    );
    assert!(
        warnings[0].contains(why),
        "the warning says why ({why}): {}",
        warnings[0]
    );
    assert!(explain.contains(&warnings[0]));
    assert!(
        decision_of(&m, "bad").is_none(),
        "the skipped kernel is unchanged"
    );
    assert!(
        decision_of(&m, "good").is_some(),
        "the other kernels are tiled"
    );
}

#[test]
fn a_backend_config_that_is_not_json_is_skipped() {
    assert_skipped(
        &module(r#"%bad = f32[16,256]{0,1} copy(%p1), backend_config="this is not json""#),
        "not JSON",
    );
}

#[test]
fn a_backend_config_that_is_a_json_array_is_skipped() {
    assert_skipped(
        &module(r#"%bad = f32[16,256]{0,1} copy(%p1), backend_config="[1,2]""#),
        "not an object",
    );
}

#[test]
fn an_unknown_fusion_kind_is_skipped() {
    let text = "HloModule bad\n\n\
        %fused (a: f32[16,256]) -> f32[16,256] {\n  \
          %a = f32[16,256]{1,0} parameter(0)\n  \
          ROOT %n = f32[16,256]{1,0} negate(%a)\n\
        }\n\n\
        ENTRY %main (p0: f32[16,256], p1: f32[16,256]) -> (f32[16,256], f32[16,256]) {\n  \
          %p0 = f32[16,256]{1,0} parameter(0)\n  \
          %p1 = f32[16,256]{1,0} parameter(1)\n  \
          %good = f32[16,256]{0,1} copy(%p0)\n  \
          %bad = f32[16,256]{1,0} fusion(%p1), kind=kMystery, calls=%fused\n  \
          ROOT %t = (f32[16,256], f32[16,256]) tuple(%good, %bad)\n\
        }\n";
    match hlo::parse_module(text) {
        Ok(_) => assert_skipped(text, "unknown fusion kind `kMystery`"),
        // A parser that rejects the kind outright is a clear error too.
        Err(e) => {
            println!("the parser rejects it: {e}");
            assert!(e.to_string().contains("kMystery"), "{e}")
        }
    }
}

#[test]
fn a_zero_sized_kernel_is_skipped() {
    let text = "HloModule bad\n\n\
        ENTRY %main (p0: f32[16,256], p1: f32[0,256]) -> (f32[16,256], f32[0,256]) {\n  \
          %p0 = f32[16,256]{1,0} parameter(0)\n  \
          %p1 = f32[0,256]{1,0} parameter(1)\n  \
          %good = f32[16,256]{0,1} copy(%p0)\n  \
          %bad = f32[0,256]{0,1} copy(%p1)\n  \
          ROOT %t = (f32[16,256], f32[0,256]) tuple(%good, %bad)\n\
        }\n";
    assert_skipped(text, "zero-sized");
}

#[test]
fn a_dynamic_kernel_is_skipped() {
    let text = "HloModule bad\n\n\
        ENTRY %main (p0: f32[16,256], p1: f32[<=16,256]) -> (f32[16,256], f32[<=16,256]) {\n  \
          %p0 = f32[16,256]{1,0} parameter(0)\n  \
          %p1 = f32[<=16,256]{1,0} parameter(1)\n  \
          %good = f32[16,256]{0,1} copy(%p0)\n  \
          %bad = f32[<=16,256]{0,1} copy(%p1)\n  \
          ROOT %t = (f32[16,256], f32[<=16,256]) tuple(%good, %bad)\n\
        }\n";
    assert_skipped(text, "dynamic");
}

#[test]
fn a_convolution_with_bad_dim_labels_is_skipped() {
    let text = "HloModule bad\n\n\
        ENTRY %main (p0: f32[16,256], p1: f32[8,128], p2: f32[128,64]) -> (f32[16,256], f32[8,64]) {\n  \
          %p0 = f32[16,256]{1,0} parameter(0)\n  \
          %p1 = f32[8,128]{1,0} parameter(1)\n  \
          %p2 = f32[128,64]{1,0} parameter(2)\n  \
          %good = f32[16,256]{0,1} copy(%p0)\n  \
          %bad = f32[8,64]{1,0} convolution(%p1, %p2), dim_labels=bf_oi->bx\n  \
          ROOT %t = (f32[16,256], f32[8,64]) tuple(%good, %bad)\n\
        }\n";
    match hlo::parse_module(text) {
        Ok(_) => assert_skipped(text, "dim_labels"),
        Err(e) => println!("the parser rejects it: {e}"),
    }
}

#[test]
fn a_module_without_kernels_is_unchanged() {
    let text = "HloModule empty\n\nENTRY %main (p0: f32[4]) -> f32[4] {\n  ROOT %p0 = f32[4]{0} parameter(0)\n}\n";
    let mut m = hlo::parse_module(text).expect("parses");
    let mut cx = PassContext::new(PassOptions::default());
    let mut pass = TilePass::with_model(Box::new(ReferenceModel::new(Task::Tile)));
    assert!(!pass.run(&mut m, &mut cx).expect("runs"));
    assert_eq!(
        hlo::print_module(&m),
        hlo::print_module(&hlo::parse_module(text).expect("parses"))
    );
}
