//! The caller's side of the backend: finds the plugin and the worker
//! executable, starts the worker, and turns requests into answers.
//!
//! Invariants: the worker's stderr is drained by a thread (XLA's log never
//! blocks it) keeping only its last lines; every request waits at most
//! `timeout`, after which the worker is killed; once the worker has died the
//! backend answers every request with the same error (start a new one).

use std::collections::VecDeque;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::worker::{read_frame, write_frame, ArrayMeta, Frame, Request};
use crate::{proto, HostArray, PjrtError, Result};

/// Environment variable naming the plugin file.
pub const PLUGIN_ENV: &str = "HLO_OPT_PJRT_PLUGIN";
/// Environment variable naming the worker executable.
pub const WORKER_ENV: &str = "HLO_OPT_PJRT_WORKER";
/// File name of the worker executable (a `bin` of the hlo-opt package).
pub const WORKER_NAME: &str = "hlo-opt-pjrt-worker";

/// Plugin files we know, as (file name, path inside site-packages).
const KNOWN_PLUGINS: [(&str, &str); 2] = [
    (
        "xla_cpu_pjrt.so",
        "xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so",
    ),
    (
        "pjrt_c_api_cpu_plugin.so",
        "lammps_jax_pjrt_cpu/pjrt_c_api_cpu_plugin.so",
    ),
];

fn install_hint() -> &'static str {
    "Install XLA's CPU plugin with `pip install xla-cpu-pjrt==0.0.1` (e.g. into the repository's \
     .venv), or name a PJRT plugin file with HLO_OPT_PJRT_PLUGIN or --measure=pjrt:PATH"
}

fn exe_dirs() -> Vec<PathBuf> {
    let Some(dir) = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(Path::to_path_buf))
    else {
        return vec![];
    };
    let mut v = vec![dir.clone()];
    // Test binaries live in target/*/deps.
    if let Some(p) = dir.parent() {
        v.push(p.to_path_buf());
    }
    v
}

fn site_packages(root: &Path) -> Vec<PathBuf> {
    let lib = root.join(".venv").join("lib");
    let mut pys: Vec<PathBuf> = std::fs::read_dir(&lib)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("python"))
        })
        .map(|p| p.join("site-packages"))
        .filter(|p| p.is_dir())
        .collect();
    pys.sort();
    pys
}

/// Finds XLA's CPU PJRT plugin: `explicit`, `HLO_OPT_PJRT_PLUGIN`, next to
/// the executable (or its parent folder, for `target/*/deps`), a `.venv` in
/// the current folder or an ancestor of it or of the executable, then the
/// `xla_cpu_pjrt` package of `$HLO_OPT_PYTHON` or `python3`.
pub fn find_plugin(explicit: Option<&Path>) -> Result<PathBuf> {
    if let Some(p) = explicit {
        if p.is_file() {
            return Ok(p.to_path_buf());
        }
        return Err(PjrtError::NotFound(format!(
            "PJRT plugin {} is not a file",
            p.display()
        )));
    }
    if let Some(p) = std::env::var_os(PLUGIN_ENV) {
        let p = PathBuf::from(p);
        if p.is_file() {
            return Ok(p);
        }
        return Err(PjrtError::NotFound(format!(
            "{PLUGIN_ENV}={} does not name a file. {}",
            p.display(),
            install_hint()
        )));
    }
    let exe_dirs = exe_dirs();
    for d in &exe_dirs {
        for (name, _) in KNOWN_PLUGINS {
            if d.join(name).is_file() {
                return Ok(d.join(name));
            }
        }
    }
    let mut roots: Vec<PathBuf> = Vec::new();
    if let Ok(cwd) = std::env::current_dir() {
        roots.extend(cwd.ancestors().map(Path::to_path_buf));
    }
    for d in &exe_dirs {
        roots.extend(d.ancestors().map(Path::to_path_buf));
    }
    for root in &roots {
        for sp in site_packages(root) {
            for (_, rel) in KNOWN_PLUGINS {
                if sp.join(rel).is_file() {
                    return Ok(sp.join(rel));
                }
            }
        }
    }
    let pythons: Vec<String> = std::env::var("HLO_OPT_PYTHON")
        .ok()
        .into_iter()
        .chain(["python3".to_string()])
        .collect();
    for py in &pythons {
        let out = Command::new(py)
            .args([
                "-c",
                "import xla_plugins.xla_cpu_pjrt as p,os;print(os.path.join(os.path.dirname(p.__file__),'xla_cpu_pjrt.so'))",
            ])
            .stderr(Stdio::null())
            .output();
        if let Ok(out) = out {
            let p = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
            if out.status.success() && p.is_file() {
                return Ok(p);
            }
        }
    }
    Err(PjrtError::NotFound(format!(
        "no PJRT plugin found (looked: {PLUGIN_ENV} unset, next to the executable, .venv in the \
         current folder and its ancestors, the xla_cpu_pjrt package of {}). {}",
        pythons.join(", "),
        install_hint()
    )))
}

/// Finds the worker executable: `HLO_OPT_PJRT_WORKER`, then next to the
/// running executable or in its parent folder.
pub fn find_worker() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os(WORKER_ENV) {
        return Ok(PathBuf::from(p));
    }
    let name = format!("{WORKER_NAME}{}", std::env::consts::EXE_SUFFIX);
    for d in exe_dirs() {
        if d.join(&name).is_file() {
            return Ok(d.join(&name));
        }
    }
    Err(PjrtError::NotFound(format!(
        "the worker executable {name} was not found next to this program (build it with \
         `cargo build --release`, or name it with {WORKER_ENV})"
    )))
}

/// How XLA compiles a module.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pipeline {
    /// XLA's normal pipeline: its own layout assignment decides.
    Xla,
    /// The module's layouts are kept: `layout-assignment`, `algsimp` and the
    /// pre-layout `cse` are disabled (see [`proto::DISABLED_PASSES_LAYOUTS_KEPT`]).
    LayoutsKept,
}

impl Pipeline {
    /// The serialized compile options of this pipeline; `tupled_parameter`:
    /// the entry takes one tuple parameter, fed as its leaves
    /// ([`proto::entry_takes_a_tuple`]).
    pub fn compile_options(self, tupled_parameter: bool) -> Vec<u8> {
        use prost::Message as _;
        let overrides: &[(&str, &str)] = match self {
            Pipeline::Xla => &[],
            Pipeline::LayoutsKept => &[(
                proto::DISABLE_PASSES_OPTION,
                proto::DISABLED_PASSES_LAYOUTS_KEPT,
            )],
        };
        proto::compile_options(overrides, tupled_parameter).encode_to_vec()
    }
}

/// A compiled executable in the worker.
#[derive(Clone, Debug)]
pub struct Compiled {
    pub id: usize,
    pub num_outputs: usize,
    pub compile_seconds: f64,
    /// The optimized program, a serialized `HloModuleProto`.
    pub optimized: Vec<u8>,
}

/// A running worker process with a plugin loaded.
pub struct Backend {
    child: Child,
    stdin: Option<ChildStdin>,
    answers: Receiver<std::io::Result<Option<Frame>>>,
    log: Arc<Mutex<Log>>,
    dead: Option<String>,
    pub timeout: Duration,
    pub plugin: PathBuf,
    pub platform: String,
    pub api_version: String,
}

const LOG_LINES: usize = 6;

/// The worker's stderr, bounded: the first fatal message (glog's `F...`
/// line or a `Check failed`) and the last lines that are not stack frames.
#[derive(Default)]
struct Log {
    fatal: Option<String>,
    tail: VecDeque<String>,
}

impl Log {
    fn push(&mut self, line: String) {
        let line: String = line.chars().take(2000).collect();
        let t = line.trim_start();
        let glog_fatal = t.starts_with('F') && t[1..].starts_with(|c: char| c.is_ascii_digit());
        if self.fatal.is_none() && (glog_fatal || t.contains("Check failed")) {
            self.fatal = Some(line);
            return;
        }
        if t.starts_with("@ ") || t.starts_with("*** ") || t.is_empty() {
            return;
        }
        if self.tail.len() == LOG_LINES {
            self.tail.pop_front();
        }
        self.tail.push_back(line);
    }

    fn words(&self) -> Vec<String> {
        self.fatal.iter().chain(self.tail.iter()).cloned().collect()
    }
}

impl Backend {
    /// Starts a worker ([`find_worker`]) with `plugin` (see [`find_plugin`]).
    pub fn start(plugin: &Path) -> Result<Backend> {
        Self::start_with(plugin, &find_worker()?)
    }

    /// Starts the worker executable `worker` with `plugin`.
    pub fn start_with(plugin: &Path, worker: &Path) -> Result<Backend> {
        let mut child = Command::new(worker)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| PjrtError::Io {
                context: format!("starting {}", worker.display()),
                source: e,
            })?;
        let log = Arc::new(Mutex::new(Log::default()));
        let push = {
            let log = log.clone();
            move |line: String| {
                if let Ok(mut l) = log.lock() {
                    l.push(line);
                }
            }
        };
        if let Some(err) = child.stderr.take() {
            let push = push.clone();
            std::thread::spawn(move || {
                for line in std::io::BufReader::new(err).lines() {
                    match line {
                        Ok(l) => push(l),
                        Err(_) => break,
                    }
                }
            });
        }
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| PjrtError::Protocol("no stdout".into()))?;
        let (tx, answers) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut r = std::io::BufReader::new(stdout);
            loop {
                let mut stray = Vec::new();
                let f = read_frame(&mut r, &mut |b| stray.push(b));
                let end = !matches!(f, Ok(Some(_)));
                if tx.send(f).is_err() || end {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        let mut b = Backend {
            child,
            stdin,
            answers,
            log,
            dead: None,
            timeout: Duration::from_secs(600),
            plugin: plugin.to_path_buf(),
            platform: String::new(),
            api_version: String::new(),
        };
        let a = b.request(
            &Request::Init {
                plugin: plugin.display().to_string(),
            },
            &[],
            "loading the plugin",
        )?;
        b.platform = a.json["platform"].as_str().unwrap_or("").to_string();
        b.api_version = a.json["api"].as_str().unwrap_or("").to_string();
        Ok(b)
    }

    fn request(&mut self, req: &Request, blobs: &[&[u8]], doing: &str) -> Result<Frame> {
        if let Some(d) = &self.dead {
            return Err(PjrtError::Protocol(format!("the worker is gone: {d}")));
        }
        let json = serde_json::to_value(req).map_err(|e| PjrtError::Protocol(e.to_string()))?;
        let sent = match self.stdin.as_mut() {
            Some(w) => write_frame(w, &json, blobs),
            None => Err(std::io::Error::other("closed")),
        };
        let answer = match sent {
            Ok(()) => self.answers.recv_timeout(self.timeout),
            Err(_) => Ok(Ok(None)),
        };
        match answer {
            Ok(Ok(Some(f))) => {
                if f.json["ok"].as_bool() == Some(true) {
                    Ok(f)
                } else {
                    let message = f.json["error"]
                        .as_str()
                        .unwrap_or("unknown error")
                        .to_string();
                    Err(PjrtError::Failed {
                        doing: doing.to_string(),
                        message,
                    })
                }
            }
            Ok(Ok(None)) | Ok(Err(_)) | Err(RecvTimeoutError::Disconnected) => {
                let status = self
                    .child
                    .wait()
                    .map(|s| describe_status(&s))
                    .unwrap_or_else(|e| e.to_string());
                // Let the stderr thread catch the last lines.
                std::thread::sleep(Duration::from_millis(50));
                let log = self.log_tail();
                self.dead = Some(format!("it died while {doing}"));
                Err(PjrtError::WorkerDied {
                    status,
                    doing: doing.to_string(),
                    log,
                })
            }
            Err(RecvTimeoutError::Timeout) => {
                let _ = self.child.kill();
                let _ = self.child.wait();
                self.dead = Some(format!("timed out while {doing}"));
                Err(PjrtError::Timeout {
                    seconds: self.timeout.as_secs(),
                    doing: doing.to_string(),
                })
            }
        }
    }

    fn log_tail(&self) -> String {
        let lines: Vec<String> = self.log.lock().map(|l| l.words()).unwrap_or_default();
        if lines.is_empty() {
            String::new()
        } else {
            format!("; XLA's last words:\n  {}", lines.join("\n  "))
        }
    }

    /// Compiles a serialized `HloModuleProto` with `pipeline`. An entry
    /// that takes one tuple parameter is compiled to take its leaves (the
    /// inputs [`crate::inputs_for`] makes for it).
    pub fn compile(&mut self, hlo_proto: &[u8], pipeline: Pipeline) -> Result<Compiled> {
        let options = pipeline.compile_options(proto::entry_takes_a_tuple(hlo_proto)?);
        let mut f = self.request(&Request::Compile, &[hlo_proto, &options], "compiling")?;
        Ok(Compiled {
            id: f.json["id"].as_u64().unwrap_or(0) as usize,
            num_outputs: f.json["num_outputs"].as_u64().unwrap_or(0) as usize,
            compile_seconds: f.json["compile_seconds"].as_f64().unwrap_or(0.0),
            optimized: f.blobs.pop().unwrap_or_default(),
        })
    }

    /// Sets the inputs every later run uses.
    pub fn set_inputs(&mut self, inputs: &[HostArray]) -> Result<()> {
        let arrays = inputs
            .iter()
            .map(|a| ArrayMeta {
                ty: a.ty.name().to_string(),
                dims: a.dims.clone(),
            })
            .collect();
        let blobs: Vec<&[u8]> = inputs.iter().map(|a| a.data.as_slice()).collect();
        self.request(&Request::Inputs { arrays }, &blobs, "copying the inputs")?;
        Ok(())
    }

    /// Runs executable `id` `reps` times; the wall time of each run, seconds.
    pub fn run(&mut self, id: usize, reps: usize) -> Result<Vec<f64>> {
        let f = self.request(&Request::Run { id, reps }, &[], "running")?;
        Ok(f.json["seconds"]
            .as_array()
            .map(|v| v.iter().filter_map(|x| x.as_f64()).collect())
            .unwrap_or_default())
    }

    /// Runs executable `id` once and reads its outputs back.
    pub fn outputs(&mut self, id: usize) -> Result<Vec<HostArray>> {
        let f = self.request(&Request::Outputs { id }, &[], "running")?;
        let metas: Vec<ArrayMeta> = serde_json::from_value(f.json["arrays"].clone())
            .map_err(|e| PjrtError::Protocol(e.to_string()))?;
        if metas.len() != f.blobs.len() {
            return Err(PjrtError::Protocol("one attachment per output".into()));
        }
        metas
            .into_iter()
            .zip(f.blobs)
            .map(|(m, data)| {
                let ty = crate::worker::element_type(&m.ty)
                    .ok_or_else(|| PjrtError::Protocol(format!("element type {}", m.ty)))?;
                Ok(HostArray {
                    ty,
                    dims: m.dims,
                    data,
                })
            })
            .collect()
    }

    /// Frees executable `id` in the worker.
    pub fn free(&mut self, id: usize) -> Result<()> {
        self.request(&Request::Free { id }, &[], "freeing an executable")?;
        Ok(())
    }
}

fn describe_status(s: &std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (s.code(), s.signal()) {
        (_, Some(6)) => "SIGABRT".into(),
        (_, Some(11)) => "SIGSEGV".into(),
        (_, Some(sig)) => format!("signal {sig}"),
        (Some(c), _) => format!("exit status {c}"),
        _ => s.to_string(),
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        // Closing stdin ends the worker's loop; kill it if it does not go.
        self.stdin.take();
        for _ in 0..50 {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
