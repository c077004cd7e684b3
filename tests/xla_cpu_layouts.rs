//! Layouts in effect on a real XLA backend (XLA:CPU through its PJRT plugin).
//!
//! Specification:
//! - for the layout pass's output on every testdata layout module (two
//!   models: the reference model and its contrary, which moves many layouts
//!   and inserts copies; the contrary only for the largest,
//!   tpugraphs_unet3d, whose entry takes one tuple parameter) and on the
//!   shared jax corpus when present, the
//!   results with the pass's layouts in effect (legalized, compiled with
//!   layouts kept) equal the original's under XLA's normal pipeline (f32:
//!   rtol = atol = 1e-4); a module with bf16/f16 outputs is compared with
//!   the original compiled on the same layouts-kept path (rtol = atol = 1e-2),
//!   and so is an f32 module whose original itself differs between the two
//!   pipelines beyond 1e-4 (deep models: XLA's simplifier reorders
//!   arithmetic), with the same 1e-4;
//! - the pass's layouts survive into the executable: the optimized program
//!   (`PJRT_Executable_OptimizedProgram`) carries the non-default layouts
//!   the pass chose;
//! - the check can fail: a layout changed without its copy (the operand of a
//!   bitcast, whose meaning depends on it) gives other results and is caught;
//! - an XLA abort (a jax custom call without its handler) is an error of the
//!   run with XLA's message, never a crash of the caller; the `hlo-opt
//!   --measure` command line reports it and exits non-zero.
//!
//! Needs XLA's CPU plugin (`pip install xla-cpu-pjrt`, installed by .ci/run)
//! (the proto is written by hlo-opt itself: no Python runs); says
//! "skipped" when it is absent.

#[path = "support/report.rs"]
mod report;

use std::path::{Path, PathBuf};
use std::process::Command;

use costmodel::reference::ReferenceModel;
use costmodel::{ConfigBatch, CostModel, Graph, Prepared, Task};
use passes::layout::LayoutPass;
use passes::{Pass, PassContext, PassOptions};
use pjrt::{compare, inputs_for, Backend, Pipeline};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn worker() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_hlo-opt-pjrt-worker"))
}

/// A backend on XLA's CPU plugin, or `None` (printed) when it is not installed.
fn backend() -> Option<Backend> {
    let plugin = match pjrt::find_plugin(None) {
        Ok(p) => p,
        Err(e) => {
            report::skipped(&e.to_string());
            return None;
        }
    };
    report::ran();
    Some(Backend::start_with(&plugin, &worker()).expect("the worker starts and loads the plugin"))
}

/// The reference model reversed: prefers layouts far from XLA's default.
struct Contrary(ReferenceModel);

impl CostModel for Contrary {
    fn task(&self) -> Task {
        self.0.task()
    }
    fn prepare(&self, g: &Graph) -> costmodel::Result<Prepared> {
        self.0.prepare(g)
    }
    fn score(&self, p: &Prepared, c: &ConfigBatch) -> costmodel::Result<Vec<f32>> {
        Ok(self.0.score(p, c)?.into_iter().map(|s| -s).collect())
    }
}

fn run_layout(m: &hlo::Module, model: Box<dyn CostModel>) -> hlo::Module {
    let mut out = m.clone();
    // The whole space (no trust region): the contrary model then moves many
    // layouts and inserts copies, which is what this test checks on XLA.
    let mut cx = PassContext::new(PassOptions {
        budget: 300,
        verify_each: true,
        trust_radius: None,
        ..Default::default()
    });
    LayoutPass::with_model(model)
        .run(&mut out, &mut cx)
        .expect("the layout pass runs");
    out
}

fn is_default(m2m: &[i64]) -> bool {
    m2m.iter().rev().enumerate().all(|(i, &d)| d == i as i64)
}

/// What [`check`] found.
struct Checked {
    worst: f64,
    /// Non-default layouts of the legalized module, and how many of them the
    /// optimized program carries (same instruction name, same layout).
    non_default: usize,
    survived: usize,
    legalized: usize,
    /// Compared with the original on the layouts-kept path (bf16, or an
    /// original that drifts between the two pipelines).
    same_path: bool,
}

/// Runs `original` under `reference` (XLA's normal pipeline, or legalized
/// with its layouts kept) and `rewritten` legalized with its layouts in
/// effect, on the same inputs, and compares the results.
fn check(
    b: &mut Backend,
    original: &hlo::Module,
    reference: Pipeline,
    rewritten: &hlo::Module,
) -> Result<Checked, String> {
    let inputs = inputs_for(original, 0).map_err(|e| e.to_string())?;
    b.set_inputs(&inputs).map_err(|e| e.to_string())?;
    let original_proto = match reference {
        Pipeline::Xla => pjrt::proto::module_proto(original),
        Pipeline::LayoutsKept => pjrt::prepare(original).map(|(p, _)| p),
    }
    .map_err(|e| e.to_string())?;
    let want = b
        .compile(&original_proto, reference)
        .map_err(|e| e.to_string())?;
    let want_outs = b.outputs(want.id).map_err(|e| e.to_string())?;
    let (proto, report) = pjrt::prepare(rewritten).map_err(|e| e.to_string())?;
    let got = b
        .compile(&proto, Pipeline::LayoutsKept)
        .map_err(|e| format!("compiling with layouts kept: {e}"))?;
    let got_outs = b.outputs(got.id).map_err(|e| e.to_string())?;
    let half = pjrt::has_half_floats(&want_outs);
    let tol = if half { 1e-2 } else { 1e-4 };
    let mut same_path = false;
    let worst = match compare(&got_outs, &want_outs, tol, tol) {
        Ok(w) if !half => w,
        first => {
            // bf16 is compared with the original on the same layouts-kept
            // path; so is f32 when the original itself drifts beyond the
            // tolerance between the two pipelines (XLA's algebraic
            // simplifier reorders arithmetic: a pipeline difference, not a
            // layout effect).
            let (p, _) = pjrt::prepare(original).map_err(|e| e.to_string())?;
            let kept = b
                .compile(&p, Pipeline::LayoutsKept)
                .map_err(|e| e.to_string())?;
            let kept_outs = b.outputs(kept.id).map_err(|e| e.to_string())?;
            let _ = b.free(kept.id);
            if !half && compare(&kept_outs, &want_outs, tol, tol).is_ok() {
                // The original agrees across pipelines, the rewrite does not.
                return Err(first.err().map(|m| m.to_string()).unwrap_or_default());
            }
            same_path = true;
            compare(&got_outs, &kept_outs, tol, tol).map_err(|m| m.to_string())?
        }
    };
    // Which non-default layouts made it into the executable.
    let mut legal = rewritten.clone();
    pjrt::legalize::legalize_xla_cpu(&mut legal).map_err(|e| e.to_string())?;
    let compiled = pjrt::proto::instruction_layouts(&got.optimized).map_err(|e| e.to_string())?;
    let mut non_default = 0;
    let mut survived = 0;
    for i in legal.all_instructions() {
        let inst = legal.inst(i);
        let Some(l) = legal
            .inst_shape(i)
            .as_array()
            .and_then(|a| a.layout.as_ref())
        else {
            continue;
        };
        if l.minor_to_major.len() < 2 || is_default(&l.minor_to_major) {
            continue;
        }
        non_default += 1;
        // XLA names an instruction it cloned into a fusion `name.N`.
        let same_name = |c: &str| {
            c == &*inst.name
                || c.strip_prefix(&*inst.name)
                    .and_then(|r| r.strip_prefix('.'))
                    .is_some_and(|r| r.bytes().all(|b| b.is_ascii_digit()))
        };
        if compiled.iter().any(|c| {
            same_name(&c.name) && c.minor_to_major.as_deref() == Some(&l.minor_to_major[..])
        }) {
            survived += 1;
        }
    }
    for id in [want.id, got.id] {
        let _ = b.free(id);
    }
    Ok(Checked {
        worst,
        non_default,
        survived,
        legalized: report.lines.len(),
        same_path,
    })
}

fn parse(path: &Path) -> hlo::Module {
    let text = std::fs::read_to_string(path).expect("reads");
    hlo::parse_module(&text).expect("parses")
}

#[test]
fn the_pass_layouts_in_effect_compute_the_original_results() {
    let Some(mut b) = backend() else { return };
    let mut checked = 0;
    let mut survived = 0;
    let mut skipped = Vec::new();
    let mut files: Vec<PathBuf> = [
        "convnet_unet3d.hlo",
        "transformer_bert.hlo",
        "tpugraphs_unet3d.hlo",
    ]
    .iter()
    .map(|n| repo().join("testdata/layout").join(n))
    .collect();
    let corpus = repo().join("../shared/corpus/jax");
    if corpus.is_dir() {
        // The small ones here; scripts/bench_layouts_xla_cpu.sh checks them all.
        for n in ["mlp.pre.hlo", "mlp_train.pre.hlo", "gpt2_bf16.pre.hlo"] {
            files.push(corpus.join(n));
        }
    } else {
        report::skipped("../shared/corpus/jax is absent (the shared jax corpus)");
    }
    for file in &files {
        let name = file.file_name().and_then(|n| n.to_str()).unwrap_or("?");
        let original = parse(file);
        if let Err(e) = inputs_for(&original, 0) {
            skipped.push(format!("{name}: {e}"));
            continue;
        }
        let mut models: Vec<(&str, Box<dyn CostModel>)> = vec![(
            "contrary",
            Box::new(Contrary(ReferenceModel::new(Task::Layout))),
        )];
        // tpugraphs_unet3d (a tuple entry parameter, 3-D convolutions on
        // 2x96^3 volumes: tens of seconds a run on two cores) with one model.
        if file.starts_with(repo().join("testdata")) && !name.starts_with("tpugraphs_unet3d") {
            models.push(("reference", Box::new(ReferenceModel::new(Task::Layout))));
        }
        for (label, model) in models {
            let rewritten = run_layout(&original, model);
            let c = check(&mut b, &original, Pipeline::Xla, &rewritten)
                .unwrap_or_else(|e| panic!("{name} ({label}): {e}"));
            println!(
                "{name} ({label}): same results (worst {:.3} of the tolerance{}); {} of {} non-default layouts in the optimized program; {} legalization rewrites",
                c.worst,
                if c.same_path { ", against the original with layouts kept" } else { "" },
                c.survived,
                c.non_default,
                c.legalized
            );
            if label == "contrary" {
                assert!(
                    c.non_default > 0,
                    "{name}: the contrary model moved no layout"
                );
            }
            survived += c.survived;
            checked += 1;
        }
    }
    println!(
        "checked {checked} rewritten modules; skipped {}: {skipped:?}",
        skipped.len()
    );
    assert!(checked >= 4, "only {checked} modules checked");
    // XLA fuses and renames much, but the pass's layouts must be there.
    assert!(
        survived > 0,
        "no layout of the pass survived into an executable"
    );
}

/// exp(p) viewed flat by a bitcast: the bitcast reads exp's physical order.
/// (XLA's normal pipeline refuses a bitcast before layout assignment, so the
/// reference is the original with its layouts kept.)
const BITCAST: &str = r#"HloModule bitcast_view, entry_computation_layout={(f32[4,6]{1,0})->f32[24]{0}}

ENTRY main {
  p = f32[4,6]{1,0} parameter(0)
  e = f32[4,6]{1,0} exponential(p)
  ROOT flat = f32[24]{0} bitcast(e)
}
"#;

#[test]
fn a_layout_changed_without_its_copy_is_caught() {
    let Some(mut b) = backend() else { return };
    let original = hlo::parse_module(BITCAST).expect("parses");
    // The same layout change with its copy computes the same values...
    let with_copy = hlo::parse_module(&BITCAST.replace(
        "  e = f32[4,6]{1,0} exponential(p)\n  ROOT flat = f32[24]{0} bitcast(e)",
        "  e = f32[4,6]{0,1} exponential(p)\n  c = f32[4,6]{1,0} copy(e)\n  ROOT flat = f32[24]{0} bitcast(c)",
    ))
    .expect("parses");
    check(&mut b, &original, Pipeline::LayoutsKept, &with_copy)
        .expect("with its copy: same results");
    // ...without it, the bitcast reads column-major data.
    let broken = hlo::parse_module(&BITCAST.replace("e = f32[4,6]{1,0}", "e = f32[4,6]{0,1}"))
        .expect("parses");
    let err = match check(&mut b, &original, Pipeline::LayoutsKept, &broken) {
        Ok(_) => panic!("a layout changed without its copy was not caught"),
        Err(e) => e,
    };
    assert!(err.contains("instead of"), "{err}");
}

/// Each legalization rule is needed: without it XLA:CPU computes other
/// values than XLA's normal pipeline; with it, the same.
#[test]
fn each_legalization_rule_is_needed() {
    let Some(mut b) = backend() else { return };
    let cases = [
        (
            "entry parameter not row-major",
            "HloModule m\n\nENTRY main {\n  p = f32[4,6]{0,1} parameter(0)\n  ROOT e = f32[4,6]{1,0} exponential(p)\n}\n",
            "entry parameter %p",
        ),
        (
            "entry result not row-major",
            "HloModule m\n\nENTRY main {\n  p = f32[4,6]{1,0} parameter(0)\n  ROOT e = f32[4,6]{0,1} exponential(p)\n}\n",
            "entry result %e",
        ),
        (
            "tuple entry parameter element not row-major",
            "HloModule m\n\nENTRY main {\n  p = (f32[4,6]{0,1}, f32[4,6]{1,0}) parameter(0)\n  a = f32[4,6]{0,1} get-tuple-element(p), index=0\n  b = f32[4,6]{1,0} get-tuple-element(p), index=1\n  ROOT s = f32[4,6]{1,0} subtract(a, b)\n}\n",
            "entry parameter %p element 0",
        ),
        (
            "dot batch dimensions not most major",
            "HloModule m\n\nENTRY main {\n  p = f32[2,3,4,5]{3,2,1,0} parameter(0)\n  q = f32[2,3,5,6]{3,2,1,0} parameter(1)\n  pt = f32[2,3,4,5]{3,2,0,1} copy(p)\n  ROOT d = f32[2,3,4,6]{3,2,1,0} dot(pt, q), lhs_batch_dims={0,1}, rhs_batch_dims={0,1}, lhs_contracting_dims={3}, rhs_contracting_dims={2}\n}\n",
            "dot %d: lhs operand",
        ),
    ];
    for (what, text, rule) in cases {
        let m = hlo::parse_module(text).expect("parses");
        b.set_inputs(&inputs_for(&m, 0).expect("inputs"))
            .expect("inputs");
        let want = b
            .compile(
                &pjrt::proto::module_proto(&m).expect("proto"),
                Pipeline::Xla,
            )
            .expect("compiles");
        let want = b.outputs(want.id).expect("runs");
        let raw = b
            .compile(
                &pjrt::proto::module_proto(&m).expect("proto"),
                Pipeline::LayoutsKept,
            )
            .expect("compiles");
        let raw = b.outputs(raw.id).expect("runs");
        assert!(
            compare(&raw, &want, 1e-4, 1e-4).is_err(),
            "{what}: XLA:CPU computed the right values without legalization"
        );
        let (proto, report) = pjrt::prepare(&m).expect("legalizes");
        assert!(
            report.lines.iter().any(|l| l.starts_with(rule)),
            "{what}: {:?}",
            report.lines
        );
        let legal = b.compile(&proto, Pipeline::LayoutsKept).expect("compiles");
        let legal = b.outputs(legal.id).expect("runs");
        compare(&legal, &want, 1e-4, 1e-4).unwrap_or_else(|e| panic!("{what}: {e}"));
    }
}

/// An entry whose single parameter is a tuple (as TpuGraphs' and jax's
/// training steps have) is fed its leaves: it computes what the same
/// program with one parameter per element computes on the same inputs,
/// under both pipelines (an order mix-up of the leaves changes the
/// difference's sign).
#[test]
fn a_tuple_entry_parameter_is_fed_as_its_leaves() {
    let Some(mut b) = backend() else { return };
    let tupled = hlo::parse_module(
        "HloModule t\n\nENTRY main {\n  p = (f32[3,5]{1,0}, s32[], f32[3,5]{1,0}) parameter(0)\n  x = f32[3,5]{1,0} get-tuple-element(p), index=0\n  k = s32[] get-tuple-element(p), index=1\n  y = f32[3,5]{1,0} get-tuple-element(p), index=2\n  kf = f32[] convert(k)\n  kb = f32[3,5]{1,0} broadcast(kf), dimensions={}\n  d = f32[3,5]{1,0} subtract(x, y)\n  ROOT r = f32[3,5]{1,0} multiply(d, kb)\n}\n",
    )
    .expect("parses");
    let flat = hlo::parse_module(
        "HloModule f\n\nENTRY main {\n  x = f32[3,5]{1,0} parameter(0)\n  k = s32[] parameter(1)\n  y = f32[3,5]{1,0} parameter(2)\n  kf = f32[] convert(k)\n  kb = f32[3,5]{1,0} broadcast(kf), dimensions={}\n  d = f32[3,5]{1,0} subtract(x, y)\n  ROOT r = f32[3,5]{1,0} multiply(d, kb)\n}\n",
    )
    .expect("parses");
    let inputs = inputs_for(&tupled, 7).expect("a tuple of arrays is fed");
    assert_eq!(inputs, inputs_for(&flat, 7).expect("inputs"));
    b.set_inputs(&inputs).expect("inputs");
    let flat_proto = pjrt::proto::module_proto(&flat).expect("proto");
    let want = b.compile(&flat_proto, Pipeline::Xla).expect("compiles");
    let want = b.outputs(want.id).expect("runs");
    for pipeline in [Pipeline::Xla, Pipeline::LayoutsKept] {
        let proto = match pipeline {
            Pipeline::Xla => pjrt::proto::module_proto(&tupled),
            Pipeline::LayoutsKept => pjrt::prepare(&tupled).map(|(p, _)| p),
        }
        .expect("proto");
        let got = b.compile(&proto, pipeline).expect("compiles");
        let got = b.outputs(got.id).expect("runs");
        compare(&got, &want, 0.0, 0.0).unwrap_or_else(|e| panic!("{pipeline:?}: {e}"));
    }
    // Tuples PJRT cannot feed are refused with a reason, not run.
    for (text, why) in [
        ("HloModule n\n\nENTRY main {\n  p = ((f32[2], f32[2]), f32[2]) parameter(0)\n  ROOT g = f32[2] get-tuple-element(p), index=1\n}\n", "nested tuples"),
        ("HloModule n\n\nENTRY main {\n  p = (f32[2]) parameter(0)\n  q = f32[2] parameter(1)\n  ROOT g = f32[2] get-tuple-element(p), index=0\n}\n", "beside other parameters"),
    ] {
        let m = hlo::parse_module(text).expect("parses");
        let e = inputs_for(&m, 0).expect_err("not fed").to_string();
        assert!(e.contains(why), "{e}");
    }
}

/// A post-optimization module (a constant fused into a wrapped broadcast,
/// as in jax's `*.post.hlo`): XLA:CPU dies on a fatal check compiling it
/// ("Instruction c must have a parent in order to have a unique ID").
const ABORTS: &str = r#"HloModule aborts, is_scheduled=true

wrapped_broadcast {
  p = f32[] parameter(0)
  ROOT b = f32[4,4]{1,0} broadcast(p), dimensions={}
}

ENTRY main {
  x = f32[4,4]{1,0} parameter(0)
  y = f32[4,4]{1,0} parameter(1)
  c = f32[] constant(-0.5)
  w = f32[4,4]{1,0} fusion(c), kind=kLoop, calls=wrapped_broadcast
  a = f32[4,4]{1,0} add(x, w)
  ROOT d = f32[4,4]{1,0} dot(a, y), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
"#;

/// A jax custom call whose handler the plugin does not have.
const NO_HANDLER: &str = r#"HloModule no_handler

ENTRY main {
  a = f32[4,4]{1,0} parameter(0)
  c = (f32[4,4]{0,1}, s32[]) custom-call(a), custom_call_target="lapack_spotrf_ffi", operand_layout_constraints={f32[4,4]{0,1}}, output_to_operand_aliasing={{0}: (0, {})}, api_version=API_VERSION_TYPED_FFI, backend_config={uplo = 76 : ui8}
  ROOT g = f32[4,4]{0,1} get-tuple-element(c), index=0
}
"#;

#[test]
fn an_xla_abort_is_an_error_not_a_crash() {
    let Some(mut b) = backend() else { return };
    let m = hlo::parse_module(ABORTS).expect("parses");
    let proto = pjrt::proto::module_proto(&m).expect("serializes");
    let err = b
        .compile(&proto, Pipeline::Xla)
        .expect_err("XLA dies on this module");
    let msg = err.to_string();
    println!("{msg}");
    assert!(matches!(err, pjrt::PjrtError::WorkerDied { .. }), "{msg}");
    assert!(
        msg.contains("SIGABRT") && msg.contains("Check failed"),
        "{msg}"
    );
    // The backend says so from then on; a new worker works.
    let again = b
        .compile(&proto, Pipeline::Xla)
        .expect_err("the worker is gone");
    assert!(again.to_string().contains("worker is gone"), "{again}");
    drop(b);
    let mut b = backend().expect("the plugin is still there");
    // A missing custom-call handler is an XLA error (no abort with this plugin).
    let m = hlo::parse_module(NO_HANDLER).expect("parses");
    let err = b
        .compile(
            &pjrt::proto::module_proto(&m).expect("proto"),
            Pipeline::Xla,
        )
        .expect_err("no handler for lapack_spotrf_ffi");
    assert!(err.to_string().contains("lapack_spotrf_ffi"), "{err}");
    let ok = hlo::parse_module(&BITCAST.replace("bitcast(e)", "reshape(e)")).expect("parses");
    b.set_inputs(&inputs_for(&ok, 0).expect("inputs"))
        .expect("inputs");
    let c = b
        .compile(
            &pjrt::proto::module_proto(&ok).expect("proto"),
            Pipeline::Xla,
        )
        .expect("compiles");
    assert_eq!(b.outputs(c.id).expect("runs").len(), 1);
}

#[test]
fn hlo_opt_measure_reports_an_xla_abort_and_exits_non_zero() {
    if let Err(e) = pjrt::find_plugin(None) {
        report::skipped(&e.to_string());
        return;
    }
    // The pass scores with the embedded ONNX model.
    if let Err(e) = costmodel::onnx::find_onnxruntime() {
        report::skipped(&e);
        return;
    }
    report::ran();
    let dir = std::env::temp_dir().join(format!("hlo-opt-pjrt-abort-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let input = dir.join("aborts.hlo");
    std::fs::write(&input, ABORTS).expect("writes");
    let out = Command::new(env!("CARGO_BIN_EXE_hlo-opt"))
        .arg(&input)
        .args(["--pass=layout", "--measure=xla-cpu", "--measure-budget=0.2"])
        .env("HLO_OPT_PJRT_WORKER", worker())
        .output()
        .expect("runs hlo-opt");
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("XLA aborted"), "{stderr}");
    assert!(stderr.contains("Check failed"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// The built-in measurer keeps the compiler default unless a candidate beats
/// it beyond the control's spread: a much slower candidate is not kept, one
/// that computes other results is rejected before timing.
#[test]
fn the_measurer_keeps_the_default_over_slower_and_wrong_candidates() {
    let plugin = match pjrt::find_plugin(None) {
        Ok(p) => p,
        Err(e) => {
            report::skipped(&e.to_string());
            return;
        }
    };
    report::ran();
    let default = "HloModule m\n\nENTRY main {\n  p = f32[192,192]{1,0} parameter(0)\n  q = f32[192,192]{1,0} parameter(1)\n  ROOT d = f32[192,192]{1,0} dot(p, q), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n";
    // The same product after sixteen physical transposes of p.
    let mut slow = String::from("HloModule m\n\nENTRY main {\n  p = f32[192,192]{1,0} parameter(0)\n  q = f32[192,192]{1,0} parameter(1)\n  c0 = f32[192,192]{0,1} copy(p)\n");
    for k in 1..16 {
        let l = if k % 2 == 0 { "0,1" } else { "1,0" };
        slow.push_str(&format!("  c{k} = f32[192,192]{{{l}}} copy(c{})\n", k - 1));
    }
    slow.push_str("  ROOT d = f32[192,192]{1,0} dot(c15, q), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n");
    let wrong = default.replace("dot(p, q)", "dot(q, p)");
    let modules: Vec<hlo::Module> = [default, slow.as_str(), wrong.as_str()]
        .iter()
        .map(|t| hlo::parse_module(t).expect("parses"))
        .collect();
    let mut measurer = pjrt::PjrtMeasurer::new(
        plugin,
        pjrt::MeasureConfig {
            budget: std::time::Duration::from_secs(2),
            ..Default::default()
        },
    );
    measurer.worker = Some(worker());
    let m = measurer.measure(&modules, 0).expect("measures");
    println!("{}", m.report);
    assert_eq!(m.keep, 0, "{}", m.report);
    // The slow candidate is measured (it computes the default's results) and
    // not kept; its ratio itself is a timing, which this loaded test machine
    // cannot promise (a run measured it at 0.993x with a +-81% control spread),
    // so it is printed in the report, not asserted.
    assert!(m.ratio[1].is_some(), "{}", m.report);
    assert!(m.ratio[2].is_none(), "{}", m.report);
    assert!(
        m.report.contains("rejected: computes other results"),
        "{}",
        m.report
    );
    assert!(m.report.contains("control/default"), "{}", m.report);
}
