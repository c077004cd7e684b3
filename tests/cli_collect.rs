//! `hlo-cost collect` end to end on a tiny module (testdata/hlo/mlp.pre.hlo,
//! 9 configurable dots and reshapes): a few configurations measured on XLA's
//! CPU plugin with a tiny budget; the npz loads through the Rust reader and
//! through train.py's data loader; a run stopped by its budget, killed, or
//! left with a torn state line continues where it stopped without measuring
//! anything twice; a folder collected with other settings is refused; the
//! npz can be rewritten with the other estimator without measuring again;
//! bad input is a clear error with a non-zero status.
//!
//! Needs XLA's CPU plugin (installed by .ci/run) and, for the Python loader,
//! the `.venv` with numpy: says "skipped" (tests/support/report.rs) otherwise.

#[path = "support/report.rs"]
mod report;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use costmodel::npz::NpzGraphFile;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn tiny() -> PathBuf {
    repo().join("testdata/hlo/mlp.pre.hlo")
}

fn hlo_cost() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_hlo-cost"));
    c.current_dir(repo());
    c
}

fn fresh_dir(name: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn collect(dir: &Path, extra: &[&str]) -> Output {
    let mut c = hlo_cost();
    c.arg("collect")
        .arg(tiny())
        .args(["--measure-budget", "0.05", "-o"])
        .arg(dir)
        .args(extra);
    c.output().expect("hlo-cost runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn plugin_or_skip() -> bool {
    match pjrt::find_plugin(None) {
        Ok(_) => {
            report::ran();
            true
        }
        Err(e) => {
            report::skipped(&e.to_string());
            false
        }
    }
}

fn state_lines(dir: &Path) -> Vec<String> {
    std::fs::read_to_string(dir.join("mlp.pre.collect.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// Every configuration index measured, over the state's chunk lines.
fn measured(lines: &[String]) -> Vec<u64> {
    let mut v: Vec<u64> = lines[1..]
        .iter()
        .flat_map(|l| {
            let j: serde_json::Value = serde_json::from_str(l).expect("a chunk line is JSON");
            j["configs"]
                .as_array()
                .expect("configs")
                .iter()
                .map(|x| x.as_u64().expect("an index"))
                .collect::<Vec<_>>()
        })
        .collect();
    v.sort_unstable();
    v
}

fn python() -> Option<PathBuf> {
    let p = std::env::var_os("HLO_OPT_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join(".venv/bin/python"));
    p.is_file().then_some(p)
}

#[test]
fn collect_stop_resume_and_load_in_rust_and_python() {
    if !plugin_or_skip() {
        return;
    }
    let dir = fresh_dir("collect_resume");
    let args = ["--configs", "5", "--chunk", "1", "--seed", "3"];
    // A budget of a millisecond: the first chunk runs, then the run stops.
    let out = collect(&dir, &[&args[..], &["--budget", "0.001"]].concat());
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("budget spent: 3 configurations not measured yet"),
        "{}",
        text(&out.stderr)
    );
    let first = state_lines(&dir);
    assert_eq!(first.len(), 2, "header and one chunk: {first:?}");
    let f = NpzGraphFile::open(dir.join("mlp.pre.npz")).expect("the partial npz loads");
    assert_eq!(
        f.num_configs(),
        2,
        "the default and the first chunk's configuration"
    );

    // An interruption in the middle of a line: dropped, measured again.
    {
        use std::io::Write;
        let mut s = std::fs::OpenOptions::new()
            .append(true)
            .open(dir.join("mlp.pre.collect.jsonl"))
            .expect("state");
        s.write_all(b"{\"configs\":[2],\"ratio\":[1.0")
            .expect("torn line");
    }
    let out = collect(&dir, &args);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let all = state_lines(&dir);
    assert_eq!(all[..2], first[..], "earlier chunks are kept as they were");
    assert_eq!(
        measured(&all),
        vec![1, 2, 3, 4],
        "each configuration measured once"
    );

    let f = NpzGraphFile::open(dir.join("mlp.pre.npz")).expect("npz loads");
    assert_eq!(f.num_configs(), 5);
    assert_eq!(f.graph().num_config_nodes(), 9);
    assert!(f.runtimes().iter().all(|&r| r > 0), "{:?}", f.runtimes());
    let configs = f.all_configs().expect("configs");
    let rows: Vec<&[f32]> = configs.feat.chunks(9 * 18).collect();
    for (i, a) in rows.iter().enumerate() {
        for b in &rows[i + 1..] {
            assert_ne!(a, b, "configurations are distinct");
        }
    }

    // Nothing left to do: the state does not change.
    let out = collect(&dir, &args);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(state_lines(&dir), all);

    // Another seed into the same folder: refused, nothing written.
    let out = collect(&dir, &["--configs", "5", "--chunk", "1", "--seed", "4"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("--seed 3 (this run: 4)"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(state_lines(&dir), all);

    let manifest: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("manifest.json")).expect("manifest"),
    )
    .expect("manifest is JSON");
    assert_eq!(manifest["device"], "xla-cpu");
    assert_eq!(manifest["modules"][0]["in_npz"], 5);
    assert!(manifest["plugin"]["pjrt_api_version"].is_string());
    assert_eq!(manifest["settings"]["estimator"], "median");
    for e in ["median", "min"] {
        let key = format!("control_error_{e}_estimator");
        assert!(manifest["modules"][0][&key].is_number(), "{key}");
    }

    // `--estimator min` rewrites the npz from the same state (both
    // estimators are recorded): nothing measured again, other runtimes.
    let median_runtimes = f.runtimes().to_vec();
    let out = collect(&dir, &[&args[..], &["--estimator", "min"]].concat());
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(state_lines(&dir), all);
    let g = NpzGraphFile::open(dir.join("mlp.pre.npz")).expect("npz loads");
    assert_eq!(g.num_configs(), 5);
    assert_ne!(g.runtimes(), &median_runtimes[..]);

    // train.py's loader reads it (the same arrays it reads from TpuGraphs).
    let Some(py) = python() else {
        report::skipped("no .venv Python for train.py's data loader");
        return;
    };
    if !report::python_has_hlo_opt(py.as_os_str()) {
        return;
    }
    let script = "import sys; sys.path.insert(0, 'costmodel/training'); import data as D\n\
                  g = D.load_graph(sys.argv[1], 'layout', 3)\n\
                  print(g.config_feat.shape[0], g.config_feat.shape[1], int((g.runtime > 0).all()))";
    let out = Command::new(py)
        .current_dir(repo())
        .args(["-c", script])
        .arg(dir.join("mlp.pre.npz"))
        .output()
        .expect("python runs");
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).trim(), "5 9 1");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_killed_collection_continues_where_it_stopped() {
    if !plugin_or_skip() {
        return;
    }
    let dir = fresh_dir("collect_killed");
    let args = ["--configs", "8", "--chunk", "1", "--seed", "1"];
    let mut child = hlo_cost()
        .arg("collect")
        .arg(tiny())
        .args(["--measure-budget", "0.2", "-o"])
        .arg(&dir)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("hlo-cost starts");
    let t0 = Instant::now();
    while state_lines(&dir).len() < 3 && t0.elapsed() < Duration::from_secs(120) {
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().expect("kill");
    let _ = child.wait();
    let before = state_lines(&dir);
    assert!(
        before.len() >= 3,
        "two chunks were measured before the kill"
    );
    assert!(
        before.len() < 9,
        "killed before the end (all 7 chunks would be done)"
    );
    let out = collect(&dir, &args);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let after = state_lines(&dir);
    // The chunk lines written before the kill are kept (a torn one is not a line).
    let whole = before.iter().filter(|l| l.ends_with('}')).count();
    assert_eq!(after[..whole], before[..whole]);
    assert_eq!(measured(&after), (1..8).collect::<Vec<u64>>());
    let f = NpzGraphFile::open(dir.join("mlp.pre.npz")).expect("npz loads");
    assert_eq!(f.num_configs(), 8);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_input_is_a_clear_error() {
    let dir = fresh_dir("collect_bad");
    std::fs::create_dir_all(&dir).expect("dir");
    let no_nodes = dir.join("add.hlo");
    std::fs::write(
        &no_nodes,
        "HloModule add\n\nENTRY e {\n  p = f32[4] parameter(0)\n  ROOT a = f32[4] add(p, p)\n}\n",
    )
    .expect("write");
    // (arguments, what the message says, the status: 1 a bad input or run,
    // 2 a bad command line)
    let cases: Vec<(Vec<String>, &str, i32)> = vec![
        (vec!["missing.hlo".into()], "missing.hlo: No such file", 1),
        (
            vec![no_nodes.display().to_string()],
            "no configurable node",
            1,
        ),
        (
            vec![
                tiny().display().to_string(),
                "--budget".into(),
                "10x".into(),
            ],
            "--budget \"10x\": expected a duration",
            2,
        ),
        (
            vec![
                tiny().display().to_string(),
                "--random-fraction".into(),
                "2".into(),
            ],
            "`2`: expected a number from 0 to 1",
            2,
        ),
        (
            vec![
                tiny().display().to_string(),
                "--device".into(),
                "tpu".into(),
            ],
            "expected `xla-cpu` or `pjrt:PLUGIN_PATH`",
            2,
        ),
        (
            vec![
                tiny().display().to_string(),
                "--device".into(),
                "pjrt:/nonexistent.so".into(),
            ],
            "/nonexistent.so is not a file",
            1,
        ),
    ];
    for (args, expected, code) in cases {
        let out = hlo_cost()
            .arg("collect")
            .args(&args)
            .arg("-o")
            .arg(dir.join("out"))
            .output()
            .expect("runs");
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {err}");
        assert!(err.contains(expected), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    // An output folder that is a file.
    let out = hlo_cost()
        .arg("collect")
        .arg(tiny())
        .arg("-o")
        .arg(&no_nodes)
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("exists and is not a folder"));
    assert!(std::fs::read_to_string(&no_nodes)
        .expect("input")
        .starts_with("HloModule add"));
    let _ = std::fs::remove_dir_all(&dir);
}
