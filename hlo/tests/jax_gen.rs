//! The generated corpus `testdata/jax_gen` (real modules jax 0.10.2 and XLA
//! write for the programs of `hlo/conformance/jax_programs.py`, made by
//! `hlo/conformance/gen_jax_modules.py`: SPMD programs over 8 host devices,
//! shard_map collectives, loops, remat, custom derivatives, sort, top-k,
//! FFT, RNG, linear algebra custom calls, mixed precision; each module
//! before and after optimization, with and without debug info, as XLA's
//! text and XLA's serialized proto) against XLA (jaxlib):
//!
//! - text: XLA reads hlo-opt's printed text of each text module as the
//!   module it reads from the original (`check_xla.py`);
//! - proto writer: XLA reads the proto hlo-opt writes for each module (read
//!   from its text, or from XLA's proto) as the original (`check_proto.py`);
//! - proto reader: hlo-opt reads XLA's proto of each module into a module
//!   that XLA reads, from our printed text, as the module XLA reads from
//!   that proto (`check_proto.py --read-dir`), stack frame tables included.
//!
//! Needs `HLO_OPT_PYTHON` (a Python with the pinned jaxlib; `scripts/test`
//! sets it); skipped with a record otherwise. No `../shared` needed.

mod common;
#[path = "../../tests/support/report.rs"]
mod report;

use std::io::Read as _;
use std::path::{Path, PathBuf};

use common::*;

/// Programs of the corpus and their modules: each program has these eight
/// files (with `.gz` where the generator compressed one).
const KINDS: [&str; 8] = [
    "pre.dbg.hlo",
    "pre.dbg.pb",
    "pre.hlo",
    "pre.pb",
    "post.dbg.hlo",
    "post.dbg.pb",
    "post.hlo",
    "post.pb",
];

fn corpus_dir() -> PathBuf {
    testdata().join("jax_gen")
}

/// Every file of the corpus, decompressed: (name without `.gz`, bytes).
fn corpus() -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut paths: Vec<PathBuf> = std::fs::read_dir(corpus_dir())
        .expect("testdata/jax_gen")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.file_name().is_some_and(|n| n != "MANIFEST.tsv"))
        .collect();
    paths.sort();
    for p in paths {
        let name = p
            .file_name()
            .expect("file name")
            .to_string_lossy()
            .into_owned();
        let raw = std::fs::read(&p).expect("read corpus file");
        match name.strip_suffix(".gz") {
            Some(plain) => {
                let mut data = Vec::new();
                flate2::read::GzDecoder::new(&raw[..])
                    .read_to_end(&mut data)
                    .unwrap_or_else(|e| panic!("{name}: not gzip: {e}"));
                out.push((plain.to_string(), data));
            }
            None => out.push((name, raw)),
        }
    }
    out
}

/// The manifest's file names, in order.
fn manifest() -> Vec<String> {
    let text = std::fs::read_to_string(corpus_dir().join("MANIFEST.tsv")).expect("MANIFEST.tsv");
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| l.split('\t').next().unwrap_or("").to_string())
        .collect()
}

/// The corpus is what its manifest lists, every program has its eight
/// files, and there are over 100 modules, sharded programs among them.
#[test]
fn generated_corpus_is_complete() {
    let mut on_disk: Vec<String> = std::fs::read_dir(corpus_dir())
        .expect("testdata/jax_gen")
        .map(|e| {
            e.expect("dir entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .filter(|n| n != "MANIFEST.tsv")
        .collect();
    on_disk.sort();
    let mut listed = manifest();
    listed.sort();
    assert_eq!(
        on_disk, listed,
        "testdata/jax_gen and its MANIFEST.tsv differ"
    );
    let files = corpus();
    let mut programs: Vec<&str> = files
        .iter()
        .filter_map(|(n, _)| n.strip_suffix(".pre.hlo"))
        .collect();
    programs.sort();
    for p in &programs {
        for k in KINDS {
            let name = format!("{p}.{k}");
            assert!(files.iter().any(|(n, _)| *n == name), "{name} is missing");
        }
    }
    assert_eq!(files.len(), programs.len() * KINDS.len(), "stray files");
    let modules = files.len() / 2;
    assert!(modules >= 100, "only {modules} modules");
    let sharded = manifest_rows().filter(|r| r[5] == "yes").count();
    assert!(sharded > 0, "no sharded programs");
    println!(
        "{} programs, {modules} modules ({} files, {sharded} of them sharded)",
        programs.len(),
        files.len()
    );
}

fn manifest_rows() -> impl Iterator<Item = Vec<String>> {
    let text = std::fs::read_to_string(corpus_dir().join("MANIFEST.tsv")).expect("MANIFEST.tsv");
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| l.split('\t').map(str::to_string).collect::<Vec<_>>())
        .collect::<Vec<_>>()
        .into_iter()
}

/// Writes the corpus, decompressed, into `dir/src`; returns the paths.
fn extract(dir: &Path) -> Vec<PathBuf> {
    let src = dir.join("src");
    std::fs::create_dir_all(&src).expect("create folder");
    corpus()
        .into_iter()
        .map(|(name, data)| {
            let p = src.join(name);
            std::fs::write(&p, data).expect("write corpus file");
            p
        })
        .collect()
}

fn fresh(label: &str) -> PathBuf {
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join(label);
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(&out).expect("create output folder");
    out
}

fn is_pb(p: &Path) -> bool {
    p.extension().is_some_and(|x| x == "pb")
}

/// The XLA a check asks: jaxlib 0.10.2 (`HLO_OPT_PYTHON`, the pinned
/// `.venv`), or the newest jaxlib as a second judge
/// (`HLO_OPT_PYTHON_NEXT`, `.venv-next` with
/// `hlo/conformance/requirements-next.txt`, see `docs/jax_gen.md`), each
/// with its own known differences.
#[derive(Clone, Copy)]
enum Judge {
    Pinned,
    Next,
}

impl Judge {
    /// The judge's Python, or `None` (the check is skipped with a record).
    fn python(self) -> Option<String> {
        let var = match self {
            Judge::Pinned => "HLO_OPT_PYTHON",
            Judge::Next => "HLO_OPT_PYTHON_NEXT",
        };
        match std::env::var(var) {
            Ok(p) => {
                report::ran();
                Some(p)
            }
            Err(_) => {
                report::skipped(&format!("{var} is not set (XLA conformance needs jaxlib)"));
                None
            }
        }
    }

    fn known_file(self) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join(match self {
            Judge::Pinned => KNOWN,
            Judge::Next => KNOWN_NEXT,
        })
    }
}

/// The summary line must count every module as matching but the known
/// differences listed for the direction (none skipped: XLA wrote them all,
/// so it reads them all), and no listed difference may match now.
fn assert_all_match(stdout: &str, n: usize, direction: &str, judge: Judge) {
    let known = known_differences(direction, judge);
    let last = stdout.lines().last().unwrap_or("");
    let ok = n - known;
    assert!(
        last.contains(&format!(": {ok} of {n} modules match"))
            && last.contains(&format!("{known} known differences"))
            && last.contains(" 0 skipped"),
        "expected {ok} of {n} modules to match ({known} known), none skipped: {last}"
    );
    assert!(
        !stdout.contains("but matches now"),
        "a listed known difference matches now: remove its line from {}",
        judge.known_file().display()
    );
}

/// `hlo/conformance/jax_gen_known_differences.tsv`: the remaining work,
/// `direction<TAB>module<TAB>reason`.
const KNOWN: &str = "conformance/jax_gen_known_differences.tsv";
/// The same for the newest jaxlib: where it reads a module otherwise than
/// jaxlib 0.10.2 wrote it.
const KNOWN_NEXT: &str = "conformance/jax_gen_known_differences_next.tsv";

fn known_differences(direction: &str, judge: Judge) -> usize {
    known_names(direction, judge).len()
}

fn known_names(direction: &str, judge: Judge) -> Vec<String> {
    std::fs::read_to_string(judge.known_file())
        .expect("known differences file")
        .lines()
        .filter(|l| !l.starts_with('#') && l.split('\t').next() == Some(direction))
        .filter_map(|l| l.split('\t').nth(1).map(str::to_string))
        .collect()
}

#[test]
fn generated_text_conforms_to_xla() {
    text_conforms(Judge::Pinned);
}

/// [`generated_text_conforms_to_xla`] with the newest jaxlib as the judge.
#[test]
fn generated_text_conforms_to_newest_xla() {
    text_conforms(Judge::Next);
}

fn text_conforms(judge: Judge) {
    let Some(python) = judge.python() else {
        return;
    };
    let label = match judge {
        Judge::Pinned => "jax-gen-text",
        Judge::Next => "jax-gen-text-next",
    };
    let out = fresh(label);
    let files: Vec<PathBuf> = extract(&out).into_iter().filter(|p| !is_pb(p)).collect();
    let printed = out.join("printed");
    std::fs::create_dir_all(&printed).expect("create folder");
    for f in &files {
        let text = std::fs::read_to_string(f).expect("text module");
        match hlo::parse_module_named(&text, &f.display().to_string()) {
            Ok(m) => std::fs::write(
                printed.join(f.file_name().expect("name")),
                hlo::print_module(&m),
            )
            .expect("write printed module"),
            Err(e) => println!("not parsed by hlo-opt: {e}"),
        }
    }
    let mut args: Vec<std::ffi::OsString> = vec!["--printed-dir".into(), printed.into()];
    for k in known_names("text", judge) {
        args.push("--known".into());
        args.push(k.into());
    }
    args.extend(files.iter().map(|f| f.clone().into_os_string()));
    let stdout = run_conformance(&python, "check_xla.py", &args);
    assert_all_match(&stdout, files.len(), "text", judge);
}

/// hlo-opt's reading of one of XLA's protos; an error if the proto holds a
/// field the IR drops (the module config's device assignment and SPMD
/// shardings, which come with every optimized sharded module here, are
/// held: [`protos_keep_the_device_assignment_and_spmd_shardings`]).
fn read_xla_proto(f: &Path) -> Result<hlo::Module, String> {
    let bytes = std::fs::read(f).expect("read proto");
    let (m, report) = hlo::proto::from_bytes_lossy(&bytes).map_err(|e| e.to_string())?;
    if report.ignored.is_empty() {
        Ok(m)
    } else {
        Err(format!("fields hlo-opt drops: {:?}", report.ignored))
    }
}

#[test]
fn generated_protos_conform_to_xla() {
    protos_conform(Judge::Pinned);
}

/// [`generated_protos_conform_to_xla`] with the newest jaxlib as the judge.
#[test]
fn generated_protos_conform_to_newest_xla() {
    protos_conform(Judge::Next);
}

fn protos_conform(judge: Judge) {
    let Some(python) = judge.python() else {
        return;
    };
    let out = fresh(match judge {
        Judge::Pinned => "jax-gen-proto",
        Judge::Next => "jax-gen-proto-next",
    });
    let files = extract(&out);
    let (ours, read) = (out.join("ours"), out.join("read"));
    for d in [&ours, &read] {
        std::fs::create_dir_all(d).expect("create folder");
    }
    // Writer: every module, from its text or from XLA's proto.
    for f in &files {
        let name = f.file_name().expect("name").to_string_lossy().into_owned();
        let module = if is_pb(f) {
            read_xla_proto(f)
        } else {
            let text = std::fs::read_to_string(f).expect("text module");
            hlo::parse_module_named(&text, &name).map_err(|e| e.to_string())
        };
        let written = module.and_then(|m| hlo::proto::to_bytes(&m).map_err(|e| e.to_string()));
        match written {
            Ok(b) => std::fs::write(ours.join(format!("{name}.pb")), b).expect("write proto"),
            Err(e) => std::fs::write(ours.join(format!("{name}.err")), e).expect("write error"),
        }
        // Reader: XLA's protos, read and printed.
        if is_pb(f) {
            match read_xla_proto(f) {
                Ok(m) => std::fs::write(read.join(&name), hlo::print_module(&m)).expect("write"),
                Err(e) => println!("FAIL reading XLA's proto {name}: {e}"),
            }
        }
    }
    let known: Vec<std::ffi::OsString> = vec!["--known-file".into(), judge.known_file().into()];
    let mut w: Vec<std::ffi::OsString> = vec!["--ours-dir".into(), ours.into()];
    w.extend(known.iter().cloned());
    w.extend(files.iter().map(|f| f.clone().into_os_string()));
    let stdout = run_conformance(&python, "check_proto.py", &w);
    assert_all_match(&stdout, files.len(), "writer", judge);

    let pbs: Vec<&PathBuf> = files.iter().filter(|f| is_pb(f)).collect();
    let mut r: Vec<std::ffi::OsString> = vec!["--read-dir".into(), read.into()];
    r.extend(known);
    r.extend(pbs.iter().map(|f| f.as_os_str().to_owned()));
    let stdout = run_conformance(&python, "check_proto.py", &r);
    assert_all_match(&stdout, pbs.len(), "reader", judge);
}

/// XLA's order of the computations of a module it read from a proto (its
/// call-graph post-order over the proto ids, `hlo::print::computation_print_order`)
/// is the order hlo-opt prints such a module in: the computation names of
/// hlo-opt's text, per module, as XLA's `to_string()` of the same proto
/// lists them (jaxlib 0.10.2). Optimized modules whose proto ids put
/// callers before callees: a while loop (XLA walks its body before its
/// condition), conditionals, collectives' reductions, custom derivatives.
/// Without XLA; the reader direction of `generated_protos_conform_to_xla`
/// checks every module against XLA itself.
#[test]
fn protos_print_computations_in_xla_order() {
    let files = corpus();
    let mut listing = String::new();
    for program in ["control_flow", "custom_vjp", "shard_map_psum", "while_loop"] {
        let name = format!("{program}.post.dbg.pb");
        let (_, bytes) = files
            .iter()
            .find(|(n, _)| *n == name)
            .unwrap_or_else(|| panic!("{name} is missing"));
        let (m, _) = hlo::proto::from_bytes_lossy(bytes).expect("XLA's proto reads");
        listing.push_str(&name);
        listing.push('\n');
        for line in hlo::print_module(&m).lines() {
            if line.ends_with(" {") && !line.starts_with(' ') {
                let head = line.split(" (").next().unwrap_or(line);
                listing.push_str("  ");
                listing.push_str(head);
                listing.push('\n');
            }
        }
    }
    insta::assert_snapshot!(listing);
}

/// The fields of XLA's module config a proto carries and text does not
/// (`device_assignment`, `spmd_output_sharding`,
/// `spmd_parameters_shardings`: XLA's dump of every optimized module, the
/// `.post.dbg.pb` files, has a device assignment, and those of the 13
/// programs partitioned over 8 devices have the shardings) are read into the module and written back as XLA
/// wrote them, field for field; a module read from text has none, so its
/// proto has none. Without XLA; the writer direction of
/// `generated_protos_conform_to_xla` checks that XLA keeps the same config
/// from our proto as from its own.
#[test]
fn protos_keep_the_device_assignment_and_spmd_shardings() {
    use prost::Message as _;
    let config = |p: &hlo::ir::xla::HloModuleProto| {
        (
            p.device_assignment.clone(),
            p.spmd_output_sharding.clone(),
            p.spmd_parameters_shardings.clone(),
        )
    };
    let (mut with_devices, mut with_shardings, mut n) = (0, 0, 0);
    for (name, bytes) in corpus() {
        let from_text = !name.contains(".pb");
        let ours = if from_text {
            let text = String::from_utf8(bytes).expect("UTF-8 text");
            let m = hlo::parse_module_named(&text, &name).expect("parses");
            assert!(m.config.is_none(), "{name}: a config from text");
            hlo::proto::to_bytes(&m).expect("writes")
        } else {
            let m = hlo::proto::from_bytes(&bytes).expect("reads");
            let original = hlo::ir::xla::HloModuleProto::decode(&bytes[..]).expect("decodes");
            let ours = hlo::proto::to_bytes(&m).expect("writes");
            let back = hlo::ir::xla::HloModuleProto::decode(&ours[..]).expect("decodes");
            assert_eq!(config(&back), config(&original), "{name}");
            if original.device_assignment.is_some() {
                with_devices += 1;
                assert!(m.config.is_some(), "{name}");
            }
            if original.spmd_output_sharding.is_some() {
                with_shardings += 1;
            }
            ours
        };
        let back = hlo::ir::xla::HloModuleProto::decode(&ours[..]).expect("decodes");
        if from_text {
            assert_eq!(config(&back), (None, None, Vec::new()), "{name}");
        }
        n += 1;
    }
    assert_eq!(n, 320, "texts and protos");
    assert_eq!(with_devices, 40, "protos with a device assignment");
    assert_eq!(with_shardings, 13, "protos with SPMD shardings");
}
