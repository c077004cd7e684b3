//! Specification of the C ABI from C: compiles `tests/c/test_hlo_opt.c`
//! against `include/hlo_opt.h` with the system C compiler, links it with the
//! library cargo built for this test run (`libhlo_opt.a`, and `libhlo_opt.so`
//! with `-lhlo_opt`), and runs it on real modules from `testdata/ffi/`, once
//! natively and once under valgrind's leak checker.
//!
//! The C program runs the layout pass (default model) only when ONNX Runtime
//! is available (`ORT_DYLIB_PATH` set, as `scripts/test` does); otherwise it
//! says "skipped: ..." for those parts and checks everything else.

#[path = "../../tests/support/report.rs"]
mod report;
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("ffi/ has a parent")
        .to_path_buf()
}

/// Where cargo put `libhlo_opt.a` / `libhlo_opt.so` for this test run. The
/// test executable is `target/<profile>/deps/c_api-<hash>`; a `cargo test`
/// leaves the libraries beside it in `deps/` (fresh), a `cargo build` also
/// copies them up to `target/<profile>/`.
fn lib_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    let deps = exe.parent().expect("the test executable is in deps/");
    let profile = deps.parent().expect("deps/ is in target/<profile>/");
    let found = [deps, profile]
        .into_iter()
        .find(|d| d.join("libhlo_opt.a").exists())
        .unwrap_or_else(|| {
            panic!(
                "libhlo_opt.a is neither in {} nor in {}",
                deps.display(),
                profile.display()
            )
        })
        .to_path_buf();
    found
}

/// Scratch directory of the C builds: `target/<profile>/c_api_test/`.
fn build_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    let profile = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps/<exe>");
    let d = profile.join("c_api_test");
    std::fs::create_dir_all(&d).expect("create the C test's build directory");
    d
}

fn have(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Compiles the C test; `link` are the linker arguments naming the library.
fn compile(out: &Path, link: &[String]) {
    compile_source(&repo_root().join("ffi/tests/c/test_hlo_opt.c"), out, link);
}

/// Compiles one C file against `include/hlo_opt.h` (warnings are errors).
fn compile_source(source: &Path, out: &Path, link: &[String]) {
    let root = repo_root();
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let status = Command::new(&cc)
        .args([
            "-std=gnu11",
            "-g",
            "-O1",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-pedantic",
        ])
        .arg("-I")
        .arg(root.join("ffi/include"))
        .arg(source)
        .arg("-o")
        .arg(out)
        .args(link)
        .args(["-lpthread", "-ldl", "-lm"])
        .status()
        .unwrap_or_else(|e| panic!("cannot run the C compiler `{cc}`: {e}"));
    assert!(status.success(), "compiling {} failed", source.display());
}

/// Whether the C program should run passes (needs ONNX Runtime).
fn passes_enabled() -> bool {
    let on = std::env::var_os("ORT_DYLIB_PATH").is_some_and(|p| Path::new(&p).exists());
    if on {
        report::ran();
    } else {
        report::skipped("the C test's pass runs (layout pass, missing model, measure callback) need ONNX Runtime; set ORT_DYLIB_PATH");
    }
    on
}

/// Runs `program` (possibly under a wrapper such as valgrind) on the test
/// modules with the extra environment `env`; panics with its output when it
/// fails.
fn run_c_test(wrapper: &[&str], program: &Path, env: &[(&str, &str)]) {
    let root = repo_root();
    let (first, rest) = match wrapper.split_first() {
        Some((w, rest)) => (
            PathBuf::from(w),
            [
                rest.iter().map(PathBuf::from).collect(),
                vec![program.to_path_buf()],
            ]
            .concat(),
        ),
        None => (program.to_path_buf(), vec![]),
    };
    let out = Command::new(first)
        .args(rest)
        .arg(root.join("testdata/ffi/mlp.pre.hlo"))
        .arg(root.join("testdata/ffi/mlp_train.pre.hlo"))
        .arg(env!("CARGO_PKG_VERSION"))
        .env(
            "HLO_OPT_TEST_PASSES",
            if passes_enabled() { "1" } else { "0" },
        )
        .envs(env.iter().copied())
        .output()
        .expect("run the C test program");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{} {} failed ({}):\n--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}",
        wrapper.join(" "),
        program.display(),
        out.status
    );
    assert!(
        stdout.contains("all checks passed"),
        "unexpected output:\n{stdout}"
    );
    for line in stdout
        .lines()
        .chain(stderr.lines())
        .filter(|l| l.starts_with("skipped:"))
    {
        report::skipped(&format!("C program: {line}"));
    }
}

#[test]
fn c_program_passes_against_the_static_library() {
    let lib = lib_dir().join("libhlo_opt.a");
    assert!(
        lib.exists(),
        "{} not built (cargo builds it with the test)",
        lib.display()
    );
    let exe = build_dir().join("test_hlo_opt_static");
    compile(&exe, &[lib.display().to_string()]);
    run_c_test(&[], &exe, &[]);
}

#[test]
fn c_program_passes_against_the_shared_library_with_lhlo_opt() {
    let dir = lib_dir();
    assert!(
        dir.join("libhlo_opt.so").exists(),
        "libhlo_opt.so not built in {}",
        dir.display()
    );
    let exe = build_dir().join("test_hlo_opt_shared");
    compile(
        &exe,
        &[
            format!("-L{}", dir.display()),
            "-lhlo_opt".into(),
            format!("-Wl,-rpath,{}", dir.display()),
            // DT_RPATH, not DT_RUNPATH: searched before LD_LIBRARY_PATH, in
            // which cargo may list a stale `target/<profile>/libhlo_opt.so`
            // ahead of the fresh one in `deps/`.
            "-Wl,--disable-new-dtags".into(),
        ],
    );
    run_c_test(&[], &exe, &[]);
}

#[test]
fn c_program_runs_clean_under_valgrind() {
    if !have("valgrind") {
        report::skipped("valgrind is not installed (scripts/test installs it)");
        return;
    }
    let lib = lib_dir().join("libhlo_opt.a");
    let exe = build_dir().join("test_hlo_opt_valgrind");
    compile(&exe, &[lib.display().to_string()]);
    let supp = repo_root().join("ffi/tests/c/valgrind.supp");
    let supp_arg = format!("--suppressions={}", supp.display());
    run_c_test(
        &[
            "valgrind",
            "--leak-check=full",
            "--show-leak-kinds=definite,indirect,possible",
            "--errors-for-leak-kinds=definite,indirect,possible",
            "--error-exitcode=1",
            "--quiet",
            &supp_arg,
        ],
        &exe,
        // Valgrind runs the code ~50x slower: a smaller search, same code paths.
        &[("HLO_OPT_TEST_BUDGET", "300")],
    );
}

/// The C example the docs point to: `ffi/examples/app.c`.
fn example_path() -> PathBuf {
    repo_root().join("ffi/examples/app.c")
}

/// The C example: the shipped file, which docs/c-abi.md shows whole.
fn readme_example() -> String {
    std::fs::read_to_string(example_path()).expect("read ffi/examples/app.c")
}

/// The first ```c block of docs/c-abi.md.
fn doc_example() -> String {
    let doc =
        std::fs::read_to_string(repo_root().join("docs/c-abi.md")).expect("read docs/c-abi.md");
    let code = doc
        .split("```c\n")
        .nth(1)
        .expect("docs/c-abi.md has a ```c block");
    code.split("\n```")
        .next()
        .expect("the block is closed")
        .to_string()
}

#[test]
fn docs_show_the_shipped_example_as_it_is() {
    assert_eq!(
        doc_example().trim_end(),
        readme_example().trim_end(),
        "docs/c-abi.md's ```c block differs from ffi/examples/app.c: copy the file into the doc"
    );
}

/// The `cc ffi/examples/app.c ... -lhlo_opt` line of a document (relative
/// to the repository root).
fn shared_library_line(doc: &str) -> String {
    let text = std::fs::read_to_string(repo_root().join(doc)).expect("read the document");
    text.lines()
        .find(|l| l.starts_with("cc ffi/examples/app.c") && l.contains("-lhlo_opt"))
        .unwrap_or_else(|| panic!("{doc} has a `cc ffi/examples/app.c ... -lhlo_opt` line"))
        .to_string()
}

#[test]
fn readme_c_example_compiles_links_and_optimizes_a_module() {
    let dir = build_dir();
    let exe = dir.join("readme_example");
    compile_source(
        &example_path(),
        &exe,
        &[lib_dir().join("libhlo_opt.a").display().to_string()],
    );
    let input = repo_root().join("testdata/ffi/mlp.pre.hlo");
    let out = Command::new(&exe)
        .arg(&input)
        .output()
        .expect("run the README example");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !passes_enabled() {
        // Without ONNX Runtime the run may fail, cleanly, with the reason.
        assert!(
            out.status.success() || stderr.starts_with("hlo-opt "),
            "{stderr}"
        );
        return;
    }
    assert!(out.status.success(), "README example failed:\n{stderr}");
    assert!(stdout.starts_with("HloModule jit_mlp_apply"), "{stdout}");
    assert!(
        stderr.starts_with("layout"),
        "the report goes to stderr: {stderr}"
    );
}

/// Builds the README's C example against the static library as `name`.
fn build_readme_example(name: &str) -> PathBuf {
    let exe = build_dir().join(name);
    compile_source(
        &example_path(),
        &exe,
        &[lib_dir().join("libhlo_opt.a").display().to_string()],
    );
    exe
}

#[test]
fn readme_c_example_reads_a_module_larger_than_1_mb_whole() {
    let exe = build_readme_example("readme_example_large");
    // 1.5 MB of comment before a real module: a reader that stops at 1 MB
    // hands the library an unterminated comment.
    let module =
        std::fs::read_to_string(repo_root().join("testdata/ffi/mlp.pre.hlo")).expect("read");
    let big = build_dir().join("large_module.hlo");
    let padding = format!("/* {} */\n", "x".repeat(3 << 19));
    std::fs::write(&big, format!("{padding}{module}")).expect("write the large module");
    let out = Command::new(&exe).arg(&big).output().expect("run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() && !passes_enabled() {
        // The parse succeeded: the run stops at loading ONNX Runtime (the
        // library may still find one by itself, e.g. in the checkout's
        // `.venv`: then the run succeeds and is checked below).
        assert!(stderr.contains("ONNX Runtime"), "{stderr}");
        return;
    }
    assert!(out.status.success(), "{stderr}");
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with("HloModule jit_mlp_apply"),
        "{stderr}"
    );
}

#[test]
fn readme_c_example_reports_a_read_failure() {
    let exe = build_readme_example("readme_example_read_error");
    // A folder opens but cannot be read.
    let out = Command::new(&exe).arg(build_dir()).output().expect("run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("Is a directory"), "{stderr}");
    let missing = Command::new(&exe)
        .arg(build_dir().join("no such file.hlo"))
        .output()
        .expect("run");
    assert_eq!(missing.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&missing.stderr).contains("No such file or directory"),
        "{}",
        String::from_utf8_lossy(&missing.stderr)
    );
}

/// The command line for the shared library that README.md and docs/c-abi.md
/// quote (the same line in both), on the shipped `ffi/examples/app.c`, from
/// the repository root: the program it builds must run without
/// `LD_LIBRARY_PATH`.
#[test]
fn readme_shared_library_command_line_builds_a_program_that_runs() {
    let line = shared_library_line("docs/c-abi.md");
    assert_eq!(
        shared_library_line("README.md"),
        line,
        "README.md and docs/c-abi.md quote different command lines"
    );
    let exe = build_dir().join("readme_shared");
    let lib = lib_dir().display().to_string();
    // The library this test run built, and the program in the scratch folder.
    let command = line
        .replace("\"$PWD/target/release\"", &lib)
        .replace("-Ltarget/release", &format!("-L{lib}"))
        .replace(" -o app", &format!(" -o {}", exe.display()));
    assert!(
        command.contains(&exe.display().to_string()),
        "{line}: no `-o app`"
    );
    let mut words = command.split_whitespace();
    let cc = words.next().expect("cc");
    let status = Command::new(cc)
        .args(words)
        .current_dir(repo_root())
        .status()
        .expect("run the C compiler");
    assert!(status.success(), "{command}");
    let out = Command::new(&exe)
        .arg(repo_root().join("testdata/ffi/mlp.pre.hlo"))
        .env_remove("LD_LIBRARY_PATH")
        .output()
        .expect("run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("error while loading shared libraries"),
        "{stderr}"
    );
    assert!(
        out.status.success() || (!passes_enabled() && stderr.starts_with("hlo-opt ")),
        "{stderr}"
    );
}
