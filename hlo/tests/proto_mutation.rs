//! Mutated `HloModuleProto`s (deterministic seed, bounded count), the
//! stand-in for the `proto` cargo-fuzz target in `fuzz/` where cargo-fuzz is
//! unavailable. Specification of [`hlo::proto::from_bytes_lossy`]:
//! - truncated, bit-flipped, spliced and garbage protos are a clear error
//!   (`Error::Module` naming the proto) or a module, never a panic;
//! - memory stays bounded by the input: a field declaring a huge length or a
//!   huge repeated count, or a shape declaring billions of elements, costs no
//!   more than a small multiple of the bytes given (a counting allocator
//!   measures the peak);
//! - every mutant it accepts is a fixed point of write -> read -> write (the
//!   module it read is written again and reads back to the same bytes).

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use common::*;
use hlo::proto;

/// Counts live heap bytes and their peak (per process: the tests of this
/// file run one at a time under a lock, see [`measure`]).
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

// SAFETY: forwards to the system allocator; only adds bookkeeping.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's layout.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let now = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Runs `f` and returns its result with the peak heap growth during it.
fn measure<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let base = LIVE.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let r = f();
    (r, PEAK.load(Ordering::Relaxed).saturating_sub(base))
}

/// Byte strings worth splicing into a proto: huge varints (as lengths,
/// counts and values), field keys of every wire type, an end-group tag.
const SPLICES: &[&[u8]] = &[
    &[0xff, 0xff, 0xff, 0xff, 0x0f],
    &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01],
    &[
        0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01,
    ],
    &[0x0a, 0x00],
    &[0x12, 0x7f],
    &[0x1a, 0xff, 0xff, 0x03],
    &[0x08, 0x96, 0x01],
    &[0x0d, 0x00, 0x00, 0x80, 0x7f],
    &[0x09, 0, 0, 0, 0, 0, 0, 0xf0, 0x7f],
    &[0x0c],
    &[0x0b],
    &[0x00],
];

fn mutate(rng: &mut Rng, bytes: &[u8]) -> Vec<u8> {
    let mut b = bytes.to_vec();
    for _ in 0..1 + rng.below(3) {
        let at = rng.below(b.len() + 1);
        match rng.below(6) {
            0 => b.truncate(at),
            1 if !b.is_empty() => {
                let i = at.min(b.len() - 1);
                b[i] ^= 1 << rng.below(8);
            }
            2 if !b.is_empty() => {
                let i = at.min(b.len() - 1);
                b[i] = rng.next() as u8;
            }
            3 => {
                let s = SPLICES[rng.below(SPLICES.len())];
                b.splice(at..at, s.iter().copied());
            }
            4 => {
                // Duplicate a slice of the proto (repeated fields twice, a
                // message merged with itself).
                let end = (at + rng.below(64)).min(b.len());
                let piece = b[at..end].to_vec();
                let to = rng.below(b.len() + 1);
                b.splice(to..to, piece);
            }
            _ => {
                let end = (at + 1 + rng.below(16)).min(b.len());
                b.drain(at..end);
            }
        }
    }
    b
}

/// The protos of the testdata modules the writer accepts.
fn seeds() -> Vec<(String, Vec<u8>)> {
    hlo_files(&testdata().join("hlo"))
        .into_iter()
        .filter_map(|p| {
            let text = std::fs::read_to_string(&p).ok()?;
            let m = hlo::parse_module(&text).ok()?;
            let bytes = proto::to_bytes(&m).ok()?;
            Some((p.file_name()?.to_string_lossy().into_owned(), bytes))
        })
        .collect()
}

/// Reads `bytes`: `Ok(())` for a module that is a write/read fixed point, the
/// error message for a rejected proto; panics on a broken fixed point.
fn check(bytes: &[u8], what: &str) -> Result<(), String> {
    let (m, _) = proto::from_bytes_lossy(bytes).map_err(|e| e.to_string())?;
    // A module the reader accepted is one the writer can write, but for the
    // writer's declared gaps (tuple-shaped literals: "... yet").
    let once = match proto::to_bytes(&m) {
        Ok(b) => b,
        Err(e) if e.to_string().contains("cannot be written to a proto yet") => return Ok(()),
        Err(e) => panic!("{what}: read, but not written: {e}"),
    };
    let (again, report) = proto::from_bytes_lossy(&once)
        .unwrap_or_else(|e| panic!("{what}: our own proto does not read back: {e}"));
    assert!(report.ignored.is_empty(), "{what}: {:?}", report.ignored);
    let twice = proto::to_bytes(&again).unwrap_or_else(|e| panic!("{what}: {e}"));
    if once != twice {
        let (a, b) = (hlo::print_module(&m), hlo::print_module(&again));
        let diff = a
            .lines()
            .zip(b.lines())
            .find(|(x, y)| x != y)
            .map_or_else(|| "(same text)".to_string(), |(x, y)| format!("{x}\n{y}"));
        panic!("{what}: write(read(write(read(x)))) differs from write(read(x)); first differing line:\n{diff}");
    }
    Ok(())
}

#[test]
fn mutated_protos_never_panic_and_accepted_ones_are_fixed_points() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let seeds = seeds();
    assert!(
        seeds.len() >= 40,
        "only {} testdata modules write",
        seeds.len()
    );
    let mut rng = Rng(0x005e_ed0f_f00d);
    let (mut accepted, mut rejected) = (0, 0);
    for (name, bytes) in &seeds {
        for k in 0..300 {
            let mutant = mutate(&mut rng, bytes);
            let what = format!("{name} mutant {k}");
            let (r, peak) = measure(|| check(&mutant, &what));
            match r {
                Ok(()) => accepted += 1,
                Err(e) => {
                    assert!(
                        e.contains("HloModuleProto") || e.contains("module"),
                        "{what}: unclear error: {e}"
                    );
                    rejected += 1;
                }
            }
            // Reading, writing and reading again: a bounded multiple of the input.
            let bound = 256 * mutant.len() + (4 << 20);
            assert!(
                peak <= bound,
                "{what}: {peak} bytes of heap for {} bytes of proto",
                mutant.len()
            );
        }
    }
    // Both outcomes occur: the mutations reach past the wire format into the module checks.
    assert!(
        accepted > 0 && rejected > 0,
        "accepted {accepted}, rejected {rejected}"
    );
}

#[test]
fn protos_found_by_fuzzing_are_refused() {
    // testdata/regress/README.md: each broke the write -> read -> write
    // fixed point (or could not be written) before it was refused.
    for (file, expected) in [
        (
            // A callee listed after its caller: XLA refuses it too.
            "callee_listed_after_caller.pb",
            "instruction `reduce_prod.0` calls computation `fused_computation.2`",
        ),
        (
            // The entry computation is an async op's wrapped computation.
            "entry_called_by_an_async_op.pb",
            "the entry computation (id 2) is called by instruction `call-start.1` of computation `main`",
        ),
    ] {
        let path = testdata().join("regress").join(file);
        let bytes = std::fs::read(&path).expect("the regression proto is committed");
        let e = check(&bytes, file).expect_err("refused");
        assert!(e.contains(expected), "{file}: {e}");
    }
}

/// A field key (`field`, wire type) as bytes.
fn key(field: u32, wire: u32) -> Vec<u8> {
    let mut v = Vec::new();
    prost::encoding::encode_varint(u64::from(field << 3 | wire), &mut v);
    v
}

/// `field` as a length-delimited field holding `body`.
fn nested(field: u32, body: &[u8]) -> Vec<u8> {
    let mut v = key(field, 2);
    prost::encoding::encode_varint(body.len() as u64, &mut v);
    v.extend_from_slice(body);
    v
}

#[test]
fn huge_declared_lengths_and_counts_cost_no_memory() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // computations (3) declaring 4 GiB; a packed repeated int64
    // (ShapeProto.dimensions, 3) declaring 2^62 bytes inside an instruction's
    // shape; a string (name, 1) declaring 2^40 bytes.
    let mut packed = key(3, 2);
    prost::encoding::encode_varint(1 << 62, &mut packed);
    packed.extend_from_slice(&[1, 2, 3]);
    let mut name = key(1, 2);
    prost::encoding::encode_varint(1 << 40, &mut name);
    let cases: Vec<(&str, Vec<u8>)> = vec![
        (
            "computations of 4 GiB",
            [key(3, 2), vec![0xff, 0xff, 0xff, 0xff, 0x0f]].concat(),
        ),
        (
            "dimensions of 2^62 bytes",
            nested(3, &nested(2, &nested(3, &packed))),
        ),
        ("name of 1 TiB", name),
    ];
    for (what, bytes) in cases {
        let (r, peak) = measure(|| proto::from_bytes(&bytes).map(|_| ()));
        let e = r.expect_err(what);
        assert!(e.to_string().contains("HloModuleProto"), "{what}: {e}");
        assert!(peak < 1 << 20, "{what}: {peak} bytes of heap");
    }
}

#[test]
fn a_constant_declaring_billions_of_elements_is_an_error_not_an_allocation() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // A module whose constant's shape says f32[4000000000] while its literal
    // holds 4 values: the reader must not materialize the declared size.
    let text = "HloModule m\n\nENTRY e {\n  ROOT c = f32[4] constant({1, 2, 3, 4})\n}\n";
    let m = hlo::parse_module(text).expect("parses");
    let mut p = proto::module_to_proto(&m).expect("writes");
    let c = &mut p.computations[0].instructions[0];
    if let Some(s) = c.shape.as_mut() {
        s.dimensions = vec![4_000_000_000];
    }
    if let Some(s) = p.computations[0]
        .program_shape
        .as_mut()
        .and_then(|ps| ps.result.as_mut())
    {
        s.dimensions = vec![4_000_000_000];
    }
    use prost::Message;
    let bytes = p.encode_to_vec();
    let (r, peak) = measure(|| proto::from_bytes(&bytes).map(|_| ()));
    let e = r.expect_err("a literal shorter than its shape");
    assert!(!e.to_string().is_empty());
    assert!(
        peak < 1 << 20,
        "{peak} bytes of heap for a {}-byte proto",
        bytes.len()
    );
}

/// A module with a value of each typed attribute family the reader decodes
/// from proto fields: literals of several element types, op metadata with a
/// stack frame, the stack frame index, shardings, replica groups (iota),
/// comparison, precision and dot algorithm, result accuracy, frontend
/// attributes, custom-call API version and schedule, a named sharding over
/// a mesh, the enumerations of fft, rng, rng-bit-generator and
/// triangular-solve, convolution dimension numbers, domain shardings,
/// fusion kind, source-target pairs,
/// input/output aliasing and buffer donors in the header.
const FAMILIES: &str = r#"HloModule fam, input_output_alias={ {}: (0, {}, may-alias) }, buffer_donor={ (1, {}) }, frontend_attributes={k="v"}

FileNames
1 "a.py"

FunctionNames
1 "f"

FileLocations
1 {file_name_id=1 function_name_id=1 line=3 end_line=3 column=1 end_column=9}

StackFrames
1 {file_location_id=1 parent_frame_id=1}

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

%fused (fx: f32[2,2], fy: f32[2,2]) -> f32[2,2] {
  %fx = f32[2,2]{1,0} parameter(0)
  %fy = f32[2,2]{1,0} parameter(1)
  ROOT %m = f32[2,2]{1,0} multiply(%fx, %fy)
}

ENTRY %e (p: f32[2,2], q: f32[2,2]) -> f32[2,2] {
  %p = f32[2,2]{1,0} parameter(0)
  %q = f32[2,2]{1,0} parameter(1)
  %s8 = s8[2]{0} constant({1, -2})
  %f8 = f8e4m3fn[2]{0} constant({1, 448})
  %bf = bf16[2]{0} constant({1, 2})
  %d = f32[2,2]{1,0} dot(%p, %q), lhs_contracting_dims={1}, rhs_contracting_dims={0}, operand_precision={high,default}, algorithm=dot_f32_f32_f32
  %cmp = pred[2,2]{1,0} compare(%p, %q), direction=LT, type=TOTALORDER
  %x = f32[2,2]{1,0} exponential(%d), result_accuracy={mode=highest}, frontend_attributes={a="1"}, statistics={visualizing_index=1,s=2}
  %ar = f32[2,2]{1,0} all-reduce(%x), replica_groups=[2,2]<=[4], to_apply=%add, sharding={devices=[2,1]0,1}
  %cc = f32[2,2]{1,0} custom-call(%ar), custom_call_target="t", api_version=API_VERSION_STATUS_RETURNING, schedule=SCHEDULE_LATEST
  %ns = f32[2,2]{1,0} custom-call(%cc), custom_call_target="Sharding", sharding={mesh['x'=2,'y'=2], [{'x'}, {}]}
  %z = f32[] constant(0)
  %rf = c64[2,2]{1,0} fft(%p), fft_type=RFFT, fft_length={2}
  %rn = f32[2,2]{1,0} rng(%z, %z), distribution=rng_uniform
  %st = u64[2]{0} constant({1, 2})
  %rb = (u64[2]{0}, u32[2,2]{1,0}) rng-bit-generator(%st), algorithm=rng_three_fry
  %ts = f32[2,2]{1,0} triangular-solve(%p, %q), left_side=true, lower=true, transpose_a=NO_TRANSPOSE
  %cv = f32[2,2]{1,0} convolution(%p, %q), dim_labels=bf_io->bf
  %dm = f32[2,2]{1,0} domain(%p), domain={kind="sharding", entry={maximal device=0}, exit={replicated}}
  %fu = f32[2,2]{1,0} fusion(%p, %q), kind=kLoop, calls=%fused
  %cp = f32[2,2]{1,0} collective-permute(%p), source_target_pairs={{0,1},{1,0}}
  ROOT %o = f32[2,2]{1,0} add(%cc, %q), metadata={op_name="o" stack_frame_id=1}
}
"#;

/// One edit of a typed field: what it does, the edit, the words the error
/// must hold (where in the proto, and the field or value it names).
type Edit = (
    &'static str,
    fn(&mut hlo::proto::xla::HloModuleProto),
    &'static [&'static str],
);

fn inst<'p>(
    p: &'p mut hlo::proto::xla::HloModuleProto,
    name: &str,
) -> &'p mut hlo::proto::xla::HloInstructionProto {
    p.computations
        .iter_mut()
        .flat_map(|c| c.instructions.iter_mut())
        .find(|i| i.name == name)
        .unwrap_or_else(|| panic!("no instruction {name}"))
}

const EDITS: &[Edit] = &[
    (
        "an s8 literal with three values for two elements",
        |p| inst(p, "s8").literal.as_mut().expect("literal").s8s = vec![1, 2, 3],
        &["computations[2].instructions[2]: a s8 literal of 2 elements holds 3 values"],
    ),
    (
        "an f8e4m3fn literal with one byte for two elements",
        |p| inst(p, "f8").literal.as_mut().expect("literal").f8e4m3fns = vec![0x38],
        &["computations[2].instructions[3]: a f8e4m3fn literal"],
    ),
    (
        "a bf16 literal with an odd number of bytes",
        |p| inst(p, "bf").literal.as_mut().expect("literal").bf16s = vec![0x80, 0x3f, 0],
        &["computations[2].instructions[4]: a bf16 literal"],
    ),
    (
        "a constant whose literal has an unknown element type",
        |p| {
            let l = inst(p, "s8").literal.as_mut().expect("literal");
            l.shape.as_mut().expect("shape").element_type = 99;
        },
        &["computations[2].instructions[2]", "unknown element type 99"],
    ),
    (
        "a layout that is not a permutation",
        |p| {
            let s = inst(p, "d").shape.as_mut().expect("shape");
            s.layout.as_mut().expect("layout").minor_to_major = vec![0, 0];
        },
        &["computations[2].instructions[5]", "not a permutation"],
    ),
    (
        "a sharding of an unknown type",
        |p| inst(p, "ar").sharding.as_mut().expect("sharding").r#type = 77,
        &["computations[2].instructions[8]: sharding: unknown sharding type 77"],
    ),
    (
        "a comparison direction that is not one",
        |p| inst(p, "cmp").comparison_direction = "SIDEWAYS".into(),
        &["computations[2].instructions[6]: `direction`", "SIDEWAYS"],
    ),
    (
        "a comparison type that is not one",
        |p| inst(p, "cmp").comparison_type = "REAL".into(),
        &["computations[2].instructions[6]: `type`", "REAL"],
    ),
    (
        "an unknown dot algorithm",
        |p| {
            inst(p, "d")
                .precision_config
                .as_mut()
                .expect("precision")
                .algorithm = 999;
        },
        &["computations[2].instructions[5]: unknown dot algorithm 999"],
    ),
    (
        "an unknown result accuracy mode",
        |p| {
            inst(p, "x")
                .result_accuracy
                .as_mut()
                .expect("accuracy")
                .mode = Some(77);
        },
        &["computations[2].instructions[7]: unknown result accuracy mode 77"],
    ),
    (
        "a negative result accuracy tolerance",
        |p| {
            let r = inst(p, "x").result_accuracy.as_mut().expect("accuracy");
            r.mode = None;
            r.tolerance = Some(hlo::proto::xla::Tolerance {
                atol: 0.0,
                rtol: -1.0,
                ulps: 0,
            });
        },
        &["computations[2].instructions[7]: a result accuracy tolerance must not be negative"],
    ),
    (
        "an unknown custom-call API version",
        |p| inst(p, "cc").custom_call_api_version = 42,
        &["computations[2].instructions[9]: unknown api version 42"],
    ),
    (
        // The reader types `slice_sizes` straight from the proto; the
        // opcode's kind table still applies (on an add the key would be a
        // collective-permute's list of lists).
        "a gather's slice sizes on an add",
        |p| {
            let o = inst(p, "o");
            o.gather_dimension_numbers = Some(Default::default());
            o.gather_slice_sizes = vec![2, 2];
        },
        &[
            "computations[2].instructions[21]: `slice_sizes`",
            "an integer list is not a value of `slice_sizes=` on add",
        ],
    ),
    (
        "an operand precision that is not one",
        |p| {
            let pc = inst(p, "d").precision_config.as_mut().expect("precision");
            pc.operand_precision = vec![1, 7];
        },
        &["computations[2].instructions[5]: unknown operand precision 7"],
    ),
    (
        "an input-output alias at an output index the entry's result does not have",
        |p| {
            let a = p.input_output_alias.as_mut().expect("aliasing");
            a.entries[0].output_shape_index = vec![3];
        },
        &["input_output_alias: alias 0: output index {3}"],
    ),
    (
        "an input-output alias of a negative parameter number",
        |p| {
            let a = p.input_output_alias.as_mut().expect("aliasing");
            a.entries[0].parameter_number = -2;
        },
        &["input_output_alias: alias 0: parameter number -2"],
    ),
    (
        "a mesh axis of size 0",
        |p| {
            let s = inst(p, "ns").sharding.as_mut().expect("sharding");
            let n = s.named_sharding.as_mut().expect("named");
            n.mesh.as_mut().expect("mesh").axes[1].size = 0;
        },
        &["computations[2].instructions[10]: sharding: mesh axis 'y' has size 0"],
    ),
    (
        "a named sharding using a mesh axis twice",
        |p| {
            let s = inst(p, "ns").sharding.as_mut().expect("sharding");
            let n = s.named_sharding.as_mut().expect("named");
            let x = n.dim_shardings[0].axes[0].clone();
            n.replicated_axes.push(x);
        },
        &["computations[2].instructions[10]: sharding: axis 'x' is used twice"],
    ),
    (
        "a named sharding's mesh with device ids that are not a permutation",
        |p| {
            let s = inst(p, "ns").sharding.as_mut().expect("sharding");
            let n = s.named_sharding.as_mut().expect("named");
            n.mesh.as_mut().expect("mesh").device_ids = vec![0, 1, 2, 2];
        },
        &["computations[2].instructions[10]: sharding: device ids must be a permutation"],
    ),
    (
        "a stack frame id past the module's frames",
        |p| {
            inst(p, "o")
                .metadata
                .as_mut()
                .expect("metadata")
                .stack_frame_id = 9
        },
        &["instruction o: stack_frame_id 9"],
    ),
    (
        "a file location naming a file that is not in the index",
        |p| {
            let sf = p.stack_frame_index.as_mut().expect("index");
            sf.file_locations[0].file_name_id = 5;
        },
        &["file location 1", "file_name_id 5"],
    ),
    (
        "a stack frame that is its own parent",
        |p| {
            let sf = p.stack_frame_index.as_mut().expect("index");
            sf.stack_frames[0].parent_frame_id = 1;
        },
        &["stack frame 1", "cycle"],
    ),
    (
        "a stack frame naming a location that is not in the index",
        |p| {
            let sf = p.stack_frame_index.as_mut().expect("index");
            sf.stack_frames[0].file_location_id = -3;
        },
        &["stack frame 1", "file_location_id -3"],
    ),
    (
        "an operand precision that is not one",
        |p| {
            inst(p, "d")
                .precision_config
                .as_mut()
                .expect("precision")
                .operand_precision = vec![1, 9];
        },
        &["instructions[5]: unknown operand precision 9"],
    ),
    (
        "an unknown custom-call schedule",
        |p| inst(p, "cc").custom_call_schedule = 7,
        &["instructions[9]: unknown custom call schedule 7"],
    ),
    (
        "an unknown fft type",
        |p| inst(p, "rf").fft_type = 9,
        &["instructions[12]: unknown fft type 9"],
    ),
    (
        "an rng without a distribution",
        |p| inst(p, "rn").distribution = 0,
        &["instructions[13]: unknown distribution 0"],
    ),
    (
        "an unknown rng algorithm",
        |p| inst(p, "rb").rng_algorithm = 5,
        &["instructions[15]: unknown rng algorithm 5"],
    ),
    (
        "a triangular solve without a transpose kind",
        |p| {
            inst(p, "ts")
                .triangular_solve_options
                .as_mut()
                .expect("options")
                .transpose_a = 0;
        },
        &["instructions[16]: unknown transpose_a 0"],
    ),
    (
        "a convolution dimension with two roles",
        |p| {
            let d = inst(p, "cv")
                .convolution_dimension_numbers
                .as_mut()
                .expect("dimension numbers");
            d.input_feature_dimension = d.input_batch_dimension;
        },
        &["instructions[17]: convolution dimension 0 has two roles"],
    ),
    (
        "a convolution dimension number out of range",
        |p| {
            let d = inst(p, "cv")
                .convolution_dimension_numbers
                .as_mut()
                .expect("dimension numbers");
            d.kernel_output_feature_dimension = -1;
        },
        &["instructions[17]: a convolution dimension number is out of range"],
    ),
    (
        "a convolution kernel with fewer spatial dimensions than the input",
        |p| {
            let d = inst(p, "cv")
                .convolution_dimension_numbers
                .as_mut()
                .expect("dimension numbers");
            d.input_spatial_dimensions = vec![1];
            d.input_feature_dimension = 2;
        },
        &["instructions[17]: 0 spatial dimensions where the input has 1"],
    ),
    (
        "an unknown padding type",
        |p| inst(p, "cv").padding_type = 5,
        &["instructions[17]: unknown padding type 5"],
    ),
    (
        "a domain exit sharding of an unknown type",
        |p| {
            inst(p, "dm")
                .domain_entry_sharding
                .as_mut()
                .expect("sharding")
                .r#type = 77;
        },
        &["instructions[18]: domain: unknown sharding type 77"],
    ),
    (
        "a fusion kind that is not one",
        |p| inst(p, "fu").fusion_kind = "kSideways".into(),
        &["instructions[19]: `kind`", "kSideways"],
    ),
    (
        "a statistic whose name text cannot carry",
        |p| {
            inst(p, "x")
                .statistics_viz
                .as_mut()
                .expect("statistics")
                .statistics[0]
                .stat_name = "a b".into();
        },
        &["instructions[7]: statistic name `a b`"],
    ),
    (
        "a frontend attribute with an empty key",
        |p| {
            let f = inst(p, "x")
                .frontend_attributes
                .as_mut()
                .expect("attributes");
            f.map.insert(String::new(), "v".into());
        },
        &["instructions[7]", "empty key"],
    ),
    (
        "an operand id that is no instruction",
        |p| inst(p, "o").operand_ids[1] = 999,
        &["instruction id 999 does not exist"],
    ),
    (
        "a fusion calling a computation id that is none",
        |p| inst(p, "fu").called_computation_ids = vec![99],
        &["called computation id 99 does not exist"],
    ),
    (
        "an opcode that is none",
        |p| inst(p, "o").opcode = "frobnicate".into(),
        &["unknown opcode `frobnicate`"],
    ),
    (
        "a buffer donor of a negative parameter number",
        |p| {
            p.buffer_donor.as_mut().expect("donors").entries[0].parameter_number = -2;
        },
        &["buffer_donor: donor 0: parameter number -2 is negative"],
    ),
    (
        "a layout tile without dimensions",
        |p| {
            let l = inst(p, "d")
                .shape
                .as_mut()
                .expect("shape")
                .layout
                .as_mut()
                .expect("layout");
            l.tiles = vec![hlo::proto::xla::TileProto::default()];
        },
        &["instructions[5]", "a layout tile has no dimensions"],
    ),
];

/// Every typed family read from a proto: a malformed field is an error
/// naming where in the proto (instruction path, header section) and the
/// field or value, never a panic or a silently different module.
#[test]
fn malformed_typed_fields_are_errors_naming_the_field() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let m = hlo::parse_module(FAMILIES).unwrap_or_else(|e| panic!("{e}"));
    let base = proto::module_to_proto(&m).unwrap_or_else(|e| panic!("{e}"));
    use prost::Message;
    proto::from_bytes(&base.encode_to_vec()).unwrap_or_else(|e| panic!("the base reads: {e}"));
    let mut failures = Vec::new();
    for (what, edit, words) in EDITS {
        let mut p = base.clone();
        edit(&mut p);
        let bytes = p.encode_to_vec();
        let r = std::panic::catch_unwind(|| proto::from_bytes(&bytes).map(|_| ()));
        match r {
            Err(_) => failures.push(format!("{what}: the reader panicked")),
            Ok(Ok(())) => failures.push(format!("{what}: accepted")),
            Ok(Err(e)) => {
                let e = e.to_string();
                if !words.iter().all(|w| e.contains(w))
                    || e.matches("invalid HloModuleProto").count() != 1
                {
                    failures.push(format!("{what}: expected {words:?} in: {e}"));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
