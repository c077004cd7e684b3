//! The worker process: the only place XLA runs. The parent ([`crate::Backend`])
//! starts `hlo-opt-pjrt-worker`, which calls [`main`]; requests come on
//! stdin, answers go out on the original stdout.
//!
//! Protocol: a frame is the magic `HOPJ`, a little-endian `u32` length and
//! that many bytes of JSON (a [`Request`] or an answer object), a `u32`
//! count of binary attachments and each as a `u64` length and its bytes.
//! Attachments carry HLO protos and array data.
//!
//! Invariants: before anything else, the worker moves its stdout aside and
//! points file descriptor 1 at stderr, so nothing XLA prints can corrupt a
//! frame. Each request gets exactly one answer; a failing request answers
//! `{"ok": false, "error": ...}` and the worker goes on. Handles are dropped
//! before the client (field order of `State`).

use std::io::{Read, Write};
use std::sync::Arc;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::plugin::{Api, Client, DeviceBuffer, LoadedExecutable};
use crate::{ElementType, HostArray, PjrtError, Result};

pub(crate) const MAGIC: &[u8; 4] = b"HOPJ";
/// Largest JSON header and attachment accepted (bounded memory on garbage).
pub(crate) const MAX_JSON: u32 = 64 << 20;
pub(crate) const MAX_BLOB: u64 = 16 << 30;
pub(crate) const MAX_BLOBS: u32 = 1 << 16;

/// A request to the worker.
#[derive(Serialize, Deserialize, Debug)]
#[serde(tag = "op", rename_all = "snake_case")]
pub(crate) enum Request {
    /// Load the plugin and create a client.
    Init { plugin: String },
    /// Compile attachment 0 (a serialized `HloModuleProto`) with attachment
    /// 1 (a serialized `CompileOptionsProto`); answers `id`, `num_outputs`,
    /// `compile_seconds` and the optimized program as attachment 0.
    Compile,
    /// Replace the inputs: `arrays[i]` describes attachment `i`.
    Inputs { arrays: Vec<ArrayMeta> },
    /// Run executable `id` `reps` times on the inputs; answers `seconds`.
    Run { id: usize, reps: usize },
    /// Run executable `id` once and answer its outputs (`arrays` + attachments).
    Outputs { id: usize },
    /// Free executable `id`.
    Free { id: usize },
}

#[derive(Serialize, Deserialize, Debug, Clone)]
pub(crate) struct ArrayMeta {
    pub ty: String,
    pub dims: Vec<i64>,
}

pub(crate) fn element_type(name: &str) -> Option<ElementType> {
    ElementType::from_name(name)
}

pub(crate) struct Frame {
    pub json: serde_json::Value,
    pub blobs: Vec<Vec<u8>>,
}

pub(crate) fn write_frame(
    w: &mut impl Write,
    json: &serde_json::Value,
    blobs: &[&[u8]],
) -> std::io::Result<()> {
    let j = serde_json::to_vec(json).map_err(std::io::Error::other)?;
    let mut head = Vec::with_capacity(16 + j.len());
    head.extend_from_slice(MAGIC);
    head.extend_from_slice(&(j.len() as u32).to_le_bytes());
    head.extend_from_slice(&j);
    head.extend_from_slice(&(blobs.len() as u32).to_le_bytes());
    w.write_all(&head)?;
    for b in blobs {
        w.write_all(&(b.len() as u64).to_le_bytes())?;
        w.write_all(b)?;
    }
    w.flush()
}

/// Reads one frame; `Ok(None)` at a clean end of stream. Bytes before the
/// magic are skipped and handed to `stray` (output that is not ours).
pub(crate) fn read_frame(
    r: &mut impl Read,
    stray: &mut dyn FnMut(u8),
) -> std::io::Result<Option<Frame>> {
    let bad = |m: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, m.to_string());
    let mut matched = 0;
    let mut byte = [0u8; 1];
    while matched < 4 {
        if r.read(&mut byte)? == 0 {
            return Ok(None);
        }
        if byte[0] == MAGIC[matched] {
            matched += 1;
        } else {
            for &b in &MAGIC[..matched] {
                stray(b);
            }
            matched = usize::from(byte[0] == MAGIC[0]);
            if matched == 0 {
                stray(byte[0]);
            }
        }
    }
    let mut n4 = [0u8; 4];
    r.read_exact(&mut n4)?;
    let n = u32::from_le_bytes(n4);
    if n > MAX_JSON {
        return Err(bad("oversized frame header"));
    }
    let mut j = vec![0u8; n as usize];
    r.read_exact(&mut j)?;
    let json: serde_json::Value = serde_json::from_slice(&j).map_err(|e| bad(&e.to_string()))?;
    r.read_exact(&mut n4)?;
    let count = u32::from_le_bytes(n4);
    if count > MAX_BLOBS {
        return Err(bad("too many attachments"));
    }
    let mut blobs = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let mut n8 = [0u8; 8];
        r.read_exact(&mut n8)?;
        let len = u64::from_le_bytes(n8);
        if len > MAX_BLOB {
            return Err(bad("oversized attachment"));
        }
        let mut b = Vec::new();
        r.by_ref().take(len).read_to_end(&mut b)?;
        if b.len() as u64 != len {
            return Err(bad("truncated attachment"));
        }
        blobs.push(b);
    }
    Ok(Some(Frame { json, blobs }))
}

#[derive(Default)]
struct State {
    inputs: Vec<DeviceBuffer>,
    exes: Vec<Option<(LoadedExecutable, usize)>>,
    client: Option<Client>,
    api: Option<Arc<Api>>,
}

impl State {
    fn client(&self) -> Result<&Client> {
        self.client
            .as_ref()
            .ok_or_else(|| PjrtError::Protocol("no plugin loaded (init first)".into()))
    }

    fn exe(&self, id: usize) -> Result<&(LoadedExecutable, usize)> {
        self.exes
            .get(id)
            .and_then(Option::as_ref)
            .ok_or_else(|| PjrtError::Protocol(format!("no executable {id}")))
    }

    fn handle(
        &mut self,
        req: Request,
        blobs: Vec<Vec<u8>>,
    ) -> Result<(serde_json::Value, Vec<Vec<u8>>)> {
        use serde_json::json;
        match req {
            Request::Init { plugin } => {
                let api = Api::load(std::path::Path::new(&plugin))?;
                let client = Client::new(api.clone())?;
                let platform = client.platform()?;
                let (major, minor) = api.version();
                self.api = Some(api);
                self.client = Some(client);
                Ok((
                    json!({"ok": true, "platform": platform, "api": format!("{major}.{minor}")}),
                    vec![],
                ))
            }
            Request::Compile => {
                let [proto, options] = <[Vec<u8>; 2]>::try_from(blobs)
                    .map_err(|_| PjrtError::Protocol("compile takes 2 attachments".into()))?;
                let t = Instant::now();
                let exe = self.client()?.compile(&proto, &options)?;
                let secs = t.elapsed().as_secs_f64();
                let n = exe.num_outputs()?;
                let optimized = exe.optimized_program()?;
                self.exes.push(Some((exe, n)));
                Ok((
                    json!({"ok": true, "id": self.exes.len() - 1, "num_outputs": n, "compile_seconds": secs}),
                    vec![optimized],
                ))
            }
            Request::Inputs { arrays } => {
                if arrays.len() != blobs.len() {
                    return Err(PjrtError::Protocol("one attachment per input".into()));
                }
                self.inputs.clear();
                for (meta, data) in arrays.into_iter().zip(blobs) {
                    let ty = element_type(&meta.ty)
                        .ok_or_else(|| PjrtError::Protocol(format!("element type {}", meta.ty)))?;
                    let a = HostArray {
                        ty,
                        dims: meta.dims,
                        data,
                    };
                    let b = self.client()?.to_device(&a)?;
                    self.inputs.push(b);
                }
                Ok((json!({"ok": true}), vec![]))
            }
            Request::Run { id, reps } => {
                let (exe, n) = self.exe(id)?;
                let mut secs = Vec::with_capacity(reps);
                for _ in 0..reps {
                    let t = Instant::now();
                    let outs = exe.execute(&self.inputs, *n)?;
                    secs.push(t.elapsed().as_secs_f64());
                    drop(outs);
                }
                Ok((json!({"ok": true, "seconds": secs}), vec![]))
            }
            Request::Outputs { id } => {
                let (exe, n) = self.exe(id)?;
                let outs = exe.execute(&self.inputs, *n)?;
                let mut metas = Vec::new();
                let mut data = Vec::new();
                for o in outs {
                    let h = o.to_host()?;
                    metas.push(json!({"ty": h.ty.name(), "dims": h.dims}));
                    data.push(h.data);
                }
                Ok((json!({"ok": true, "arrays": metas}), data))
            }
            Request::Free { id } => {
                if let Some(slot) = self.exes.get_mut(id) {
                    *slot = None;
                }
                Ok((json!({"ok": true}), vec![]))
            }
        }
    }
}

/// The worker's `main`: serves requests until stdin closes. Returns the
/// process exit status.
pub fn main() -> i32 {
    // Answers go to a duplicate of the original stdout; fd 1 becomes stderr.
    // SAFETY: plain descriptor calls on descriptors this process owns.
    let answer_fd = unsafe { libc::dup(1) };
    if answer_fd < 0 || unsafe { libc::dup2(2, 1) } < 0 {
        eprintln!("hlo-opt-pjrt-worker: cannot set up its output");
        return 2;
    }
    // SAFETY: `answer_fd` is a fresh descriptor owned by nothing else.
    let mut out = std::io::BufWriter::new(unsafe {
        <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(answer_fd)
    });
    let stdin = std::io::stdin();
    let mut input = std::io::BufReader::new(stdin.lock());
    let mut state = State::default();
    loop {
        let frame = match read_frame(&mut input, &mut |_| {}) {
            Ok(Some(f)) => f,
            Ok(None) => return 0,
            Err(e) => {
                eprintln!("hlo-opt-pjrt-worker: bad request: {e}");
                return 2;
            }
        };
        let answer = serde_json::from_value::<Request>(frame.json)
            .map_err(|e| PjrtError::Protocol(format!("bad request: {e}")))
            .and_then(|req| state.handle(req, frame.blobs));
        let written = match answer {
            Ok((json, blobs)) => {
                let refs: Vec<&[u8]> = blobs.iter().map(Vec::as_slice).collect();
                write_frame(&mut out, &json, &refs)
            }
            Err(e) => write_frame(
                &mut out,
                &serde_json::json!({"ok": false, "error": e.to_string()}),
                &[],
            ),
        };
        if written.is_err() {
            return 2;
        }
    }
}
