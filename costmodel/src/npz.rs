//! npz files in the published TpuGraphs format: reading (streaming) and writing.
//!
//! The format (tpu_graphs README, "Features"; one `.npy` array per zip entry):
//!
//! | key | dtype | shape | task |
//! |---|---|---|---|
//! | `node_feat` | `<f4` | `(n, 140)` | both |
//! | `node_opcode` | `\|u1` (any integer dtype accepted) | `(n,)` | both |
//! | `edge_index` | `<i8` | `(m, 2)`, rows `[consumer, producer]` | both |
//! | `node_config_ids` | `<i8` | `(nc,)` | layout |
//! | `node_config_feat` | `<f4` | `(c, nc, 18)` | layout |
//! | `node_splits` | `<i8` | `(1, k)` | layout |
//! | `config_feat` | `<f4` | `(c, 24)` | tile |
//! | `config_runtime` | `<i8` | `(c,)` | both |
//! | `config_runtime_normalizers` | `<i8` | `(c,)` | tile |
//!
//! The task is told by the keys: `node_config_feat` means layout, `config_feat`
//! means tile. Integer arrays are accepted in any integer dtype and float arrays
//! in `f4` or `f8`, either byte order, C or Fortran order (the published
//! `edge_index` is Fortran-ordered); other dtypes are refused. Keys not listed
//! are ignored.
//!
//! Streaming: [`NpzGraphFile::open`] reads the graph arrays and the runtimes
//! but only the *header* of the configuration array (the big one: 61 MB for the
//! 21,918-node NLP graph). [`NpzGraphFile::configs`] decodes only the requested
//! rows: in a stored (uncompressed, `np.savez`) entry it seeks to them; in a
//! deflated (`np.savez_compressed`) entry it inflates and discards the bytes
//! before them, never holding more than the requested rows.
//! [`NpzGraphFile::config_batches`] walks all configurations in order while
//! inflating the entry once.
//!
//! Integrity: every whole-array read (the graph, the runtimes,
//! [`NpzGraphFile::all_configs`], a full walk of
//! [`NpzGraphFile::config_batches`]) is checked against the zip directory's
//! CRC-32; a partial slice cannot be (the CRC covers the whole entry).
//!
//! Invariants of what [`NpzGraphFile::open`] accepts (checked, an error
//! otherwise — never a panic): every array's byte size equals its header's
//! shape times item size; the sizes agree across arrays (`n`, `nc`, `c`); every
//! edge endpoint and configurable node id is in `0..n`; `node_config_ids` has
//! no repeats, in any order (the published format does not promise sorted ids:
//! mask_rcnn's are not; the [`Graph`] invariants). Errors are
//! [`CostModelError::Npz`] naming the file and the array.
//!
//! Writing ([`write_npz`]) produces what `np.savez_compressed` produces for the
//! published files: the same keys, dtypes and shapes, deflated entries, in the
//! published key order, with a fixed timestamp (the same input gives the same
//! bytes).

use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::ops::Range;
use std::path::{Path, PathBuf};

use flate2::read::DeflateDecoder;
use npyz::WriterBuilder;

use crate::graph::{ConfigBatch, Graph, Task, LAYOUT_CONFIG_DIM, NODE_FEAT_DIM, TILE_CONFIG_DIM};
use crate::{CostModelError, Result};

/// Deflate cannot compress better than about 1032:1; an entry claiming more is corrupt
/// (and would make us allocate what the file cannot hold).
const MAX_DEFLATE_RATIO: u64 = 1032;
/// Largest uncompressed size of an array that is decoded whole: every graph
/// array and the runtimes, and the configuration array when it is read whole
/// ([`NpzGraphFile::all_configs`], a Fortran-ordered one). Checked against the
/// zip directory's declared size before anything is inflated (a 2 MB file can
/// claim 2 GB); the reads themselves never go past the declared size. 1 GiB
/// is ~40x the node features of the largest published TpuGraphs graph. The
/// configuration array of a streamed read ([`NpzGraphFile::config_batches`],
/// a slice) has no limit: only the requested rows are held.
pub const MAX_WHOLE_ARRAY_BYTES: u64 = 1 << 30;
/// Largest npy header we accept (numpy writes < 1 KiB for every array here).
const MAX_HEADER_LEN: u64 = 1 << 20;
/// Bytes read from an entry per `read` call while skipping or decoding.
const CHUNK: usize = 1 << 16;

// ---------------------------------------------------------------------------
// dtypes and decoding

/// The kind of numbers an array holds.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
enum Kind {
    Float,
    Int,
    Uint,
}

/// A plain numeric npy dtype.
#[derive(Clone, Debug)]
struct Dtype {
    kind: Kind,
    /// Bytes per item: 1, 2, 4 or 8.
    size: usize,
    big_endian: bool,
    /// As written in the header, e.g. `<f4`.
    descr: String,
}

impl Dtype {
    fn from_npyz(dtype: &npyz::DType) -> std::result::Result<Dtype, String> {
        let npyz::DType::Plain(ts) = dtype else {
            return Err(format!(
                "dtype {} is structured; expected a plain number type",
                dtype.descr()
            ));
        };
        let descr = ts.to_string();
        let kind = match ts.type_char() {
            npyz::TypeChar::Float => Kind::Float,
            npyz::TypeChar::Int => Kind::Int,
            npyz::TypeChar::Uint => Kind::Uint,
            _ => return Err(format!("dtype {descr} is not a number type")),
        };
        let size = match ts.size_field() {
            s @ (1 | 2 | 4 | 8) => s as usize,
            s => {
                return Err(format!(
                    "dtype {descr} has an unsupported size of {s} bytes"
                ))
            }
        };
        Ok(Dtype {
            kind,
            size,
            big_endian: ts.endianness() == npyz::Endianness::Big,
            descr,
        })
    }
}

/// Element types we decode into.
trait Elem: Copy + Default {
    /// The dtypes this type is read from, for messages.
    const EXPECTED: &'static str;
    fn check(dtype: &Dtype) -> std::result::Result<(), String>;
    fn decode(bytes: &[u8], dtype: &Dtype, out: &mut Vec<Self>) -> std::result::Result<(), String>;
}

fn word<const N: usize>(chunk: &[u8], big: bool) -> [u8; N] {
    let mut b = [0u8; N];
    b.copy_from_slice(chunk);
    if big {
        b.reverse();
    }
    b
}

impl Elem for f32 {
    const EXPECTED: &'static str = "a float dtype (f4 or f8)";
    fn check(dtype: &Dtype) -> std::result::Result<(), String> {
        match (dtype.kind, dtype.size) {
            (Kind::Float, 4 | 8) => Ok(()),
            _ => Err(format!(
                "dtype {}, expected {}",
                dtype.descr,
                Self::EXPECTED
            )),
        }
    }
    fn decode(bytes: &[u8], dtype: &Dtype, out: &mut Vec<f32>) -> std::result::Result<(), String> {
        Self::check(dtype)?;
        let big = dtype.big_endian;
        if dtype.size == 4 && !big {
            // The published files' case, kept branch-free so it vectorizes.
            out.extend(
                bytes
                    .chunks_exact(4)
                    .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])),
            );
        } else if dtype.size == 4 {
            out.extend(
                bytes
                    .chunks_exact(4)
                    .map(|c| f32::from_le_bytes(word::<4>(c, big))),
            );
        } else {
            out.extend(
                bytes
                    .chunks_exact(8)
                    .map(|c| f64::from_le_bytes(word::<8>(c, big)) as f32),
            );
        }
        Ok(())
    }
}

impl Elem for i64 {
    const EXPECTED: &'static str = "an integer dtype";
    fn check(dtype: &Dtype) -> std::result::Result<(), String> {
        match dtype.kind {
            Kind::Int | Kind::Uint => Ok(()),
            Kind::Float => Err(format!(
                "dtype {}, expected {}",
                dtype.descr,
                Self::EXPECTED
            )),
        }
    }
    fn decode(bytes: &[u8], dtype: &Dtype, out: &mut Vec<i64>) -> std::result::Result<(), String> {
        Self::check(dtype)?;
        let big = dtype.big_endian;
        let signed = dtype.kind == Kind::Int;
        out.reserve(bytes.len() / dtype.size);
        for c in bytes.chunks_exact(dtype.size) {
            let v = match (dtype.size, signed) {
                (1, true) => i64::from(c[0] as i8),
                (1, false) => i64::from(c[0]),
                (2, true) => i64::from(i16::from_le_bytes(word::<2>(c, big))),
                (2, false) => i64::from(u16::from_le_bytes(word::<2>(c, big))),
                (4, true) => i64::from(i32::from_le_bytes(word::<4>(c, big))),
                (4, false) => i64::from(u32::from_le_bytes(word::<4>(c, big))),
                (8, true) => i64::from_le_bytes(word::<8>(c, big)),
                _ => {
                    let u = u64::from_le_bytes(word::<8>(c, big));
                    i64::try_from(u).map_err(|_| format!("value {u} does not fit in int64"))?
                }
            };
            out.push(v);
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// zip entries

#[derive(Copy, Clone, PartialEq, Eq, Debug)]
enum Method {
    Stored,
    Deflated,
}

/// One `.npy` entry of the archive: where its bytes are and what its header says.
#[derive(Clone, Debug)]
struct Entry {
    name: String,
    method: Method,
    /// Offset of the entry's (possibly compressed) data in the file.
    data_start: u64,
    compressed_size: u64,
    /// The zip directory's CRC-32 of the uncompressed entry.
    crc32: u32,
    /// Length of the npy header (magic, version, length, dict text).
    header_len: u64,
    dtype: Dtype,
    shape: Vec<usize>,
    fortran: bool,
}

impl Entry {
    fn len(&self) -> usize {
        self.shape.iter().product()
    }
    /// Elements per row (product of all dimensions but the first).
    fn row_len(&self) -> usize {
        self.shape.iter().skip(1).product()
    }
    fn shape_text(&self) -> String {
        let dims: Vec<String> = self.shape.iter().map(|d| d.to_string()).collect();
        if dims.len() == 1 {
            format!("({},)", dims[0])
        } else {
            format!("({})", dims.join(", "))
        }
    }
}

/// A reader of one entry's uncompressed bytes, owning its own file handle.
enum EntryReader {
    Stored(io::Take<BufReader<File>>),
    Deflated(Box<DeflateDecoder<io::Take<BufReader<File>>>>),
}

impl Read for EntryReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            EntryReader::Stored(r) => r.read(buf),
            EntryReader::Deflated(r) => r.read(buf),
        }
    }
}

impl EntryReader {
    /// Skips `n` uncompressed bytes: a seek for stored entries, inflate-and-discard
    /// for deflated ones. Fails on a premature end.
    fn skip(&mut self, n: u64) -> io::Result<()> {
        match self {
            EntryReader::Stored(take) => {
                let left = take.limit();
                if n > left {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "entry ends early",
                    ));
                }
                let off = i64::try_from(n).map_err(|_| io::Error::other("skip too large"))?;
                take.get_mut().seek_relative(off)?;
                take.set_limit(left - n);
                Ok(())
            }
            EntryReader::Deflated(r) => {
                let copied = io::copy(&mut r.as_mut().take(n), &mut io::sink())?;
                if copied < n {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "entry ends early",
                    ));
                }
                Ok(())
            }
        }
    }
}

/// Where an `.npy` entry's bytes are in the file.
struct Located {
    name: String,
    method: Method,
    data_start: u64,
    compressed_size: u64,
    /// Uncompressed size: npy header plus data.
    size: u64,
    crc32: u32,
}

/// Opens the archive's directory: the `.npy` entries with their locations.
fn list_entries(path: &Path) -> std::result::Result<Vec<Located>, String> {
    let file = File::open(path).map_err(|e| format!("cannot open: {e}"))?;
    let file_len = file
        .metadata()
        .map_err(|e| format!("cannot stat: {e}"))?
        .len();
    let mut zip = zip::ZipArchive::new(BufReader::new(file))
        .map_err(|e| format!("not a readable zip archive (truncated or not an npz file?): {e}"))?;
    let mut out = Vec::new();
    for i in 0..zip.len() {
        let f = zip
            .by_index_raw(i)
            .map_err(|e| format!("zip entry {i}: {e}"))?;
        let Some(name) = f.name().strip_suffix(".npy") else {
            continue;
        };
        let name = name.to_string();
        let method = match f.compression() {
            zip::CompressionMethod::Stored => Method::Stored,
            zip::CompressionMethod::Deflated => Method::Deflated,
            m => {
                return Err(format!(
                    "{name}: unsupported zip compression {m:?} (numpy writes stored or deflated)"
                ))
            }
        };
        if f.encrypted() {
            return Err(format!("{name}: encrypted zip entries are not supported"));
        }
        let (start, csize, size) = (f.data_start(), f.compressed_size(), f.size());
        let end = start.checked_add(csize);
        if end.is_none_or(|e| e > file_len) {
            return Err(format!(
                "{name}: entry data runs past the end of the file (truncated?)"
            ));
        }
        match method {
            Method::Stored if csize != size => {
                return Err(format!(
                    "{name}: stored entry with compressed size {csize} != size {size}"
                ))
            }
            Method::Deflated
                if size > csize.saturating_mul(MAX_DEFLATE_RATIO).saturating_add(1024) =>
            {
                return Err(format!(
                    "{name}: entry claims {size} bytes from {csize} compressed bytes (corrupt)"
                ))
            }
            _ => {}
        }
        out.push(Located {
            name,
            method,
            data_start: start,
            compressed_size: csize,
            size,
            crc32: f.crc32(),
        });
    }
    Ok(out)
}

fn open_reader(
    path: &Path,
    method: Method,
    data_start: u64,
    compressed_size: u64,
) -> io::Result<EntryReader> {
    let mut file = BufReader::with_capacity(CHUNK, File::open(path)?);
    file.seek(SeekFrom::Start(data_start))?;
    let take = file.take(compressed_size);
    Ok(match method {
        Method::Stored => EntryReader::Stored(take),
        Method::Deflated => EntryReader::Deflated(Box::new(DeflateDecoder::new(take))),
    })
}

/// Reads and checks an npy header from the start of an entry. Returns the header
/// length, dtype, shape and order.
fn read_header(
    r: &mut impl Read,
    entry_size: u64,
) -> std::result::Result<(u64, Dtype, Vec<usize>, bool), String> {
    let mut pre = [0u8; 8];
    r.read_exact(&mut pre)
        .map_err(|e| format!("cannot read the npy header: {e}"))?;
    if &pre[..6] != b"\x93NUMPY" {
        return Err("not an npy array (bad magic)".into());
    }
    let (len_bytes, prefix) = match pre[6] {
        1 => (2usize, 10u64),
        2 | 3 => (4, 12),
        v => return Err(format!("unsupported npy format version {v}")),
    };
    let mut lb = [0u8; 4];
    r.read_exact(&mut lb[..len_bytes])
        .map_err(|e| format!("cannot read the npy header: {e}"))?;
    let text_len = u64::from(u32::from_le_bytes(lb));
    if text_len > MAX_HEADER_LEN || prefix + text_len > entry_size {
        return Err(format!(
            "npy header length {text_len} does not fit the entry of {entry_size} bytes"
        ));
    }
    let mut text = vec![0u8; text_len as usize];
    r.read_exact(&mut text)
        .map_err(|e| format!("cannot read the npy header: {e}"))?;
    // Check the shape ourselves first: sizes that overflow must be an error, not
    // an arithmetic overflow inside the npy parser.
    let text_str = std::str::from_utf8(&text).map_err(|_| "npy header is not text".to_string())?;
    precheck_shape(text_str)?;
    let mut whole = Vec::with_capacity(prefix as usize + text.len());
    whole.extend_from_slice(&pre);
    whole.extend_from_slice(&lb[..len_bytes]);
    whole.extend_from_slice(&text);
    let header = npyz::NpyHeader::from_reader(io::Cursor::new(whole))
        .map_err(|e| format!("bad npy header: {e}"))?;
    let dtype = Dtype::from_npyz(&header.dtype())?;
    let shape = header
        .shape()
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| format!("dimension {d} too large")))
        .collect::<std::result::Result<Vec<_>, _>>()?;
    Ok((
        prefix + text_len,
        dtype,
        shape,
        header.order() == npyz::Order::Fortran,
    ))
}

/// Finds the `'shape': (...)` tuple in an npy header dict and checks that the
/// number of elements times 8 bytes fits in a `u64`.
fn precheck_shape(text: &str) -> std::result::Result<(), String> {
    let at = text.find("'shape'").ok_or("npy header has no 'shape'")?;
    let rest = &text[at + 7..];
    let open = rest.find('(').ok_or("npy header 'shape' is not a tuple")?;
    let close = rest[open..]
        .find(')')
        .ok_or("npy header 'shape' is not a tuple")?;
    let mut total: u64 = 8;
    for part in rest[open + 1..open + close].split(',') {
        let part = part.trim().trim_end_matches('L');
        if part.is_empty() {
            continue;
        }
        let d: u64 = part
            .parse()
            .map_err(|_| format!("npy header shape has a bad dimension {part:?}"))?;
        total = total
            .checked_mul(d)
            .ok_or("npy header shape is too large")?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// the reader

/// An open npz graph file. The graph and the runtimes are decoded when it is
/// opened; configurations are decoded on request (see the module doc).
#[derive(Clone, Debug)]
pub struct NpzGraphFile {
    path: PathBuf,
    task: Task,
    graph: Graph,
    runtimes: Vec<i64>,
    normalizers: Option<Vec<i64>>,
    /// `node_config_feat` (layout) or `config_feat` (tile).
    configs: Entry,
    num_configs: usize,
    nodes_per_config: usize,
}

/// The configurations of a file in order, in batches, inflating the entry once.
pub struct ConfigBatches {
    file: NpzGraphFile,
    source: BatchSource,
    next: usize,
    batch: usize,
}

enum BatchSource {
    /// C order: read rows as they come; the CRC is checked after the last row.
    Stream(Crc<EntryReader>),
    /// Fortran order: decoded whole on the first batch, then sliced.
    Whole(Option<Vec<f32>>),
}

impl NpzGraphFile {
    /// Opens `path`, decodes and checks the graph and runtimes, reads the header
    /// of the configuration array.
    pub fn open(path: impl AsRef<Path>) -> Result<NpzGraphFile> {
        let path = path.as_ref().to_path_buf();
        Self::read(&path).map_err(|message| CostModelError::Npz {
            path: path.display().to_string(),
            message,
        })
    }

    /// [`NpzGraphFile::open`], its errors as messages without the path.
    fn read(path: &Path) -> std::result::Result<NpzGraphFile, String> {
        let entries = read_entries(path)?;
        let task = task_of(&entries)?;
        let arrays = Arrays {
            path,
            entries: &entries,
            task: task.name(),
        };
        let (node_feat, node_opcode) = arrays.nodes()?;
        let n = node_opcode.len();
        let edge_index = arrays.edges(n)?;
        let (node_config_ids, node_splits) = match task {
            Task::Tile => (Vec::new(), Vec::new()),
            Task::Layout => arrays.configurable_nodes(n)?,
        };
        let (configs, nodes_per_config) = arrays.config_header(task, node_config_ids.len())?;
        let c = configs.shape[0];
        let runtimes: Vec<i64> = arrays.per_config("config_runtime", &configs)?;
        let normalizers = match task {
            Task::Tile => Some(arrays.per_config("config_runtime_normalizers", &configs)?),
            Task::Layout => None,
        };

        let graph = Graph {
            node_feat,
            node_opcode,
            edge_index,
            node_config_ids,
            node_splits,
        };
        Ok(NpzGraphFile {
            path: path.to_path_buf(),
            task,
            graph,
            runtimes,
            normalizers,
            configs,
            num_configs: c,
            nodes_per_config,
        })
    }

    /// The file this was read from.
    pub fn path(&self) -> &Path {
        &self.path
    }
    /// Layout or tile, as told by the file's keys.
    pub fn task(&self) -> Task {
        self.task
    }
    pub fn graph(&self) -> &Graph {
        &self.graph
    }
    pub fn into_graph(self) -> Graph {
        self.graph
    }
    pub fn num_configs(&self) -> usize {
        self.num_configs
    }
    /// `config_runtime`, one per configuration, in the file's order (all 0 in the
    /// published test split).
    pub fn runtimes(&self) -> &[i64] {
        &self.runtimes
    }
    /// Whether the file carries measured runtimes (any non-zero `config_runtime`).
    pub fn has_runtimes(&self) -> bool {
        self.runtimes.iter().any(|&r| r != 0)
    }
    /// Tile files: `config_runtime_normalizers` (`None` for layout files).
    pub fn runtime_normalizers(&self) -> Option<&[i64]> {
        self.normalizers.as_deref()
    }
    /// The runtimes to rank by: `config_runtime`, divided by
    /// `config_runtime_normalizers` where the file has them (tile), as the
    /// tpu_graphs tile loader does.
    pub fn normalized_runtimes(&self) -> Vec<f64> {
        match &self.normalizers {
            Some(norm) => self
                .runtimes
                .iter()
                .zip(norm)
                .map(|(&r, &n)| {
                    if n != 0 {
                        r as f64 / n as f64
                    } else {
                        r as f64
                    }
                })
                .collect(),
            None => self.runtimes.iter().map(|&r| r as f64).collect(),
        }
    }

    fn err(&self, message: String) -> CostModelError {
        CostModelError::Npz {
            path: self.path.display().to_string(),
            message,
        }
    }

    fn batch(&self, num_configs: usize, feat: Vec<f32>) -> ConfigBatch {
        ConfigBatch {
            task: self.task,
            num_configs,
            nodes_per_config: self.nodes_per_config,
            feat,
        }
    }

    /// The configurations `range` (of `0..num_configs()`), decoding only those rows.
    pub fn configs(&self, range: Range<usize>) -> Result<ConfigBatch> {
        if range.start > range.end || range.end > self.num_configs {
            return Err(self.err(format!(
                "configs {}..{} requested, the file has {} configs",
                range.start, range.end, self.num_configs
            )));
        }
        let e = &self.configs;
        let count = range.end - range.start;
        if (e.fortran && e.shape.len() > 1) || count == self.num_configs {
            // The whole array (CRC-checked), sliced when Fortran-ordered.
            let all: Vec<f32> = read_all(&self.path, e).map_err(|m| self.err(m))?;
            let row = e.row_len();
            return Ok(self.batch(count, all[range.start * row..range.end * row].to_vec()));
        }
        let mut r = open_reader(&self.path, e.method, e.data_start, e.compressed_size)
            .map_err(|x| self.err(format!("{}: cannot read: {x}", e.name)))?;
        let row_bytes = (e.row_len() * e.dtype.size) as u64;
        r.skip(e.header_len + range.start as u64 * row_bytes)
            .map_err(|x| self.err(format!("{}: {x}", e.name)))?;
        let feat = read_rows::<f32>(&mut r, e, count).map_err(|m| self.err(m))?;
        Ok(self.batch(count, feat))
    }

    /// All configurations (decodes the whole configuration array).
    pub fn all_configs(&self) -> Result<ConfigBatch> {
        self.configs(0..self.num_configs)
    }

    /// Iterates over all configurations in order, `batch` at a time (the last
    /// batch may be shorter), reading the entry once from start to end.
    pub fn config_batches(&self, batch: usize) -> Result<ConfigBatches> {
        if batch == 0 {
            return Err(self.err("config batch size must be at least 1".into()));
        }
        let e = &self.configs;
        let source = if e.fortran && e.shape.len() > 1 {
            BatchSource::Whole(None)
        } else {
            let r = open_reader(&self.path, e.method, e.data_start, e.compressed_size)
                .map_err(|x| self.err(format!("{}: cannot read: {x}", e.name)))?;
            let mut r = Crc::new(r);
            r.consume(e.header_len)
                .map_err(|x| self.err(format!("{}: {x}", e.name)))?;
            BatchSource::Stream(r)
        };
        Ok(ConfigBatches {
            file: self.clone_header(),
            source,
            next: 0,
            batch,
        })
    }

    /// A copy without the (possibly large) graph, for iterators.
    fn clone_header(&self) -> NpzGraphFile {
        NpzGraphFile {
            path: self.path.clone(),
            task: self.task,
            graph: Graph::default(),
            runtimes: Vec::new(),
            normalizers: None,
            configs: self.configs.clone(),
            num_configs: self.num_configs,
            nodes_per_config: self.nodes_per_config,
        }
    }
}

impl Iterator for ConfigBatches {
    type Item = Result<ConfigBatch>;
    fn next(&mut self) -> Option<Result<ConfigBatch>> {
        let total = self.file.num_configs;
        if self.next >= total {
            return None;
        }
        let count = self.batch.min(total - self.next);
        let e = &self.file.configs;
        let result = match &mut self.source {
            BatchSource::Stream(r) => read_rows::<f32>(r, e, count).and_then(|rows| {
                if self.next + count == total {
                    r.check(e)?;
                }
                Ok(rows)
            }),
            BatchSource::Whole(all) => {
                if all.is_none() {
                    match read_all::<f32>(&self.file.path, e) {
                        Ok(v) => *all = Some(v),
                        Err(m) => {
                            self.next = total;
                            return Some(Err(self.file.err(m)));
                        }
                    }
                }
                let row = e.row_len();
                let v = all.as_deref().unwrap_or_default();
                Ok(v[self.next * row..(self.next + count) * row].to_vec())
            }
        };
        self.next += count;
        match result {
            Ok(feat) => Some(Ok(self.file.batch(count, feat))),
            Err(m) => {
                self.next = total;
                Some(Err(self.file.err(m)))
            }
        }
    }
}
/// The arrays of an npz file with their headers, each checked for size: an
/// array's byte size must equal its header's shape times item size.
fn read_entries(path: &Path) -> std::result::Result<Vec<Entry>, String> {
    let listed = list_entries(path)?;
    for e in &listed {
        let streamed = e.name == "node_config_feat" || e.name == "config_feat";
        if !streamed && e.size > MAX_WHOLE_ARRAY_BYTES {
            return Err(too_big(&e.name, e.size));
        }
    }
    let mut entries = Vec::with_capacity(listed.len());
    for Located {
        name,
        method,
        data_start,
        compressed_size,
        size,
        crc32,
    } in listed
    {
        let mut r = open_reader(path, method, data_start, compressed_size)
            .map_err(|e| format!("{name}: cannot read: {e}"))?;
        let (header_len, dtype, shape, fortran) =
            read_header(&mut r, size).map_err(|m| format!("{name}: {m}"))?;
        let entry = Entry {
            name,
            method,
            data_start,
            compressed_size,
            crc32,
            header_len,
            dtype,
            shape,
            fortran,
        };
        let data_bytes = (entry.len() as u64).saturating_mul(entry.dtype.size as u64);
        if header_len + data_bytes != size {
            return Err(format!(
                "{}: the header says {} {} ({} bytes of data) but the entry holds {} bytes of data{}",
                entry.name,
                entry.dtype.descr,
                entry.shape_text(),
                data_bytes,
                size - header_len,
                if header_len + data_bytes > size { " (truncated)" } else { "" }
            ));
        }
        entries.push(entry);
    }
    Ok(entries)
}

/// The task, told by the keys: `node_config_feat` means layout,
/// `config_feat` tile.
fn task_of(entries: &[Entry]) -> std::result::Result<Task, String> {
    let find = |key: &str| entries.iter().find(|e| e.name == key);
    match (find("node_config_feat"), find("config_feat")) {
        (Some(_), None) => Ok(Task::Layout),
        (None, Some(_)) => Ok(Task::Tile),
        (Some(_), Some(_)) => {
            Err("has both `node_config_feat` (layout) and `config_feat` (tile)".into())
        }
        (None, None) => {
            let have: Vec<&str> = entries.iter().map(|e| e.name.as_str()).collect();
            Err(format!(
                "neither `node_config_feat` (layout) nor `config_feat` (tile) present; the file has: {}",
                if have.is_empty() { "no arrays".to_string() } else { have.join(", ") }
            ))
        }
    }
}

/// The arrays of a file of `task`, read and checked one key at a time.
struct Arrays<'a> {
    path: &'a Path,
    entries: &'a [Entry],
    task: &'static str,
}

impl Arrays<'_> {
    fn require(&self, key: &str) -> std::result::Result<&Entry, String> {
        self.entries.iter().find(|e| e.name == key).ok_or_else(|| {
            let have: Vec<&str> = self.entries.iter().map(|e| e.name.as_str()).collect();
            format!(
                "missing array `{key}` (required for a {} file); the file has: {}",
                self.task,
                have.join(", ")
            )
        })
    }

    /// `node_feat` and `node_opcode` (ids in 0..=255).
    fn nodes(&self) -> std::result::Result<(Vec<f32>, Vec<u8>), String> {
        let e = self.require("node_feat")?;
        check_rank(e, &[None, Some(NODE_FEAT_DIM)])?;
        let n = e.shape[0];
        let node_feat: Vec<f32> = read_all(self.path, e)?;
        let e = self.require("node_opcode")?;
        check_rank(e, &[Some(n)]).map_err(|m| format!("{m} (node_feat has {n} nodes)"))?;
        let node_opcode = read_all::<i64>(self.path, e)?
            .into_iter()
            .enumerate()
            .map(|(i, v)| {
                u8::try_from(v)
                    .map_err(|_| format!("node_opcode[{i}] = {v} is not an opcode id (0..=255)"))
            })
            .collect::<std::result::Result<Vec<u8>, String>>()?;
        Ok((node_feat, node_opcode))
    }

    /// `edge_index`, every endpoint in `0..n`.
    fn edges(&self, n: usize) -> std::result::Result<Vec<[i64; 2]>, String> {
        let e = self.require("edge_index")?;
        let edges = if e.len() == 0 && e.shape.len() == 1 {
            // `np.array([])`-style empty edge list.
            Vec::new()
        } else {
            check_rank(e, &[None, Some(2)])?;
            read_all::<i64>(self.path, e)?
        };
        let mut edge_index = Vec::with_capacity(edges.len() / 2);
        for (i, pair) in edges.chunks_exact(2).enumerate() {
            for &v in pair {
                if v < 0 || v as u64 >= n as u64 {
                    return Err(format!(
                        "edge_index[{i}] = {pair:?} refers to a node outside 0..{n}"
                    ));
                }
            }
            edge_index.push([pair[0], pair[1]]);
        }
        Ok(edge_index)
    }

    /// A layout file's `node_config_ids` (nodes in `0..n`, no repeats) and
    /// `node_splits`.
    fn configurable_nodes(&self, n: usize) -> std::result::Result<(Vec<i64>, Vec<i64>), String> {
        let e = self.require("node_config_ids")?;
        check_rank(e, &[None])?;
        let ids: Vec<i64> = read_all(self.path, e)?;
        // Any order (the published mask_rcnn graph is not sorted), no repeats.
        let mut first_at = vec![usize::MAX; n];
        for (i, &v) in ids.iter().enumerate() {
            if v < 0 || v as u64 >= n as u64 {
                return Err(format!("node_config_ids[{i}] = {v} is not a node (0..{n})"));
            }
            let seen = &mut first_at[v as usize];
            if *seen != usize::MAX {
                return Err(format!(
                    "node_config_ids[{i}] = {v} repeats node_config_ids[{}]",
                    *seen
                ));
            }
            *seen = i;
        }
        let e = self.require("node_splits")?;
        if e.shape.len() > 2 || (e.shape.len() == 2 && e.shape[0] != 1) {
            return Err(format!(
                "node_splits: shape {}, expected (1, k)",
                e.shape_text()
            ));
        }
        let splits: Vec<i64> = read_all(self.path, e)?;
        Ok((ids, splits))
    }

    /// The configuration array's header (`nc` configurable nodes for a
    /// layout file) and the nodes per configuration.
    fn config_header(&self, task: Task, nc: usize) -> std::result::Result<(Entry, usize), String> {
        let (configs, nodes_per_config) = match task {
            Task::Layout => {
                let e = self.require("node_config_feat")?;
                check_rank(e, &[None, Some(nc), Some(LAYOUT_CONFIG_DIM)])
                    .map_err(|m| format!("{m} (node_config_ids has {nc} nodes)"))?;
                (e.clone(), nc)
            }
            Task::Tile => {
                let e = self.require("config_feat")?;
                check_rank(e, &[None, Some(TILE_CONFIG_DIM)])?;
                (e.clone(), 1)
            }
        };
        f32::check(&configs.dtype).map_err(|m| format!("{}: {m}", configs.name))?;
        Ok((configs, nodes_per_config))
    }

    /// An integer array with one value per configuration of `configs`.
    fn per_config(&self, key: &str, configs: &Entry) -> std::result::Result<Vec<i64>, String> {
        let c = configs.shape[0];
        let e = self.require(key)?;
        check_rank(e, &[Some(c)]).map_err(|m| format!("{m} ({} has {c} configs)", configs.name))?;
        read_all(self.path, e)
    }
}

/// Checks an array's rank and the dimensions given as `Some`.
fn check_rank(e: &Entry, expected: &[Option<usize>]) -> std::result::Result<(), String> {
    let ok = e.shape.len() == expected.len()
        && e.shape
            .iter()
            .zip(expected)
            .all(|(&d, x)| x.is_none_or(|x| x == d));
    if ok {
        return Ok(());
    }
    let want: Vec<String> = expected
        .iter()
        .enumerate()
        .map(|(i, x)| x.map_or_else(|| ["n", "m", "k"][i.min(2)].to_string(), |d| d.to_string()))
        .collect();
    let want = if want.len() == 1 {
        format!("({},)", want[0])
    } else {
        format!("({})", want.join(", "))
    };
    Err(format!(
        "{}: shape {}, expected {want}",
        e.name,
        e.shape_text()
    ))
}

/// Reads `count` rows from a reader positioned at a row boundary of a C-order entry.
fn read_rows<T: Elem>(
    r: &mut impl Read,
    e: &Entry,
    count: usize,
) -> std::result::Result<Vec<T>, String> {
    T::check(&e.dtype).map_err(|m| format!("{}: {m}", e.name))?;
    let total_bytes = count * e.row_len() * e.dtype.size;
    let mut out = Vec::with_capacity(count * e.row_len());
    let mut buf = vec![0u8; CHUNK.min(total_bytes).max(e.dtype.size)];
    // Keep chunk boundaries on item boundaries.
    let usable = buf.len() - buf.len() % e.dtype.size;
    let mut left = total_bytes;
    while left > 0 {
        let n = usable.min(left);
        r.read_exact(&mut buf[..n]).map_err(|x| {
            if x.kind() == io::ErrorKind::UnexpectedEof {
                format!("{}: data ends early (truncated)", e.name)
            } else {
                format!("{}: {x}", e.name)
            }
        })?;
        T::decode(&buf[..n], &e.dtype, &mut out).map_err(|m| format!("{}: {m}", e.name))?;
        left -= n;
    }
    Ok(out)
}

/// The error for an array beyond [`MAX_WHOLE_ARRAY_BYTES`].
fn too_big(name: &str, bytes: u64) -> String {
    format!(
        "{name}: the zip directory says {bytes} bytes uncompressed, more than the {} MiB an array read whole may have (MAX_WHOLE_ARRAY_BYTES); refused before inflating (a zip bomb, or not a TpuGraphs file)",
        MAX_WHOLE_ARRAY_BYTES >> 20
    )
}

/// Reads a whole array, in C order.
fn read_all<T: Elem>(path: &Path, e: &Entry) -> std::result::Result<Vec<T>, String> {
    T::check(&e.dtype).map_err(|m| format!("{}: {m}", e.name))?;
    let bytes = e.header_len + (e.len() as u64).saturating_mul(e.dtype.size as u64);
    if bytes > MAX_WHOLE_ARRAY_BYTES {
        return Err(too_big(&e.name, bytes));
    }
    let r = open_reader(path, e.method, e.data_start, e.compressed_size)
        .map_err(|x| format!("{}: cannot read: {x}", e.name))?;
    let mut r = Crc::new(r);
    r.consume(e.header_len)
        .map_err(|x| format!("{}: {x}", e.name))?;
    let rows = if e.shape.is_empty() { 1 } else { e.shape[0] };
    let flat = Entry {
        shape: if e.shape.is_empty() {
            vec![1]
        } else {
            e.shape.clone()
        },
        ..e.clone()
    };
    let data = read_rows::<T>(&mut r, &flat, rows)?;
    r.check(e)?;
    if e.fortran && e.shape.len() > 1 {
        Ok(fortran_to_c(&data, &e.shape))
    } else {
        Ok(data)
    }
}

/// A reader that computes the zip CRC-32 of everything read through it, so
/// that whole-entry reads are checked against the zip directory (deflate
/// itself has no checksum: a corrupt stream can inflate to wrong numbers).
struct Crc<R> {
    inner: R,
    hasher: crc32fast::Hasher,
}

impl<R: Read> Crc<R> {
    fn new(inner: R) -> Self {
        Crc {
            inner,
            hasher: crc32fast::Hasher::new(),
        }
    }

    /// Reads and hashes `n` bytes (the npy header), keeping none.
    fn consume(&mut self, n: u64) -> io::Result<()> {
        let copied = io::copy(&mut self.by_ref().take(n), &mut io::sink())?;
        if copied < n {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "entry ends early",
            ));
        }
        Ok(())
    }

    /// After the whole entry was read: compares with the directory's CRC-32.
    fn check(&self, e: &Entry) -> std::result::Result<(), String> {
        let got = self.hasher.clone().finalize();
        if got == e.crc32 {
            Ok(())
        } else {
            Err(format!(
                "{}: CRC-32 mismatch (the zip directory says {:08x}, the data hashes to {got:08x}): corrupt data",
                e.name, e.crc32
            ))
        }
    }
}

impl<R: Read> Read for Crc<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }
}

/// Reorders a Fortran-order (first index fastest) array into C order.
fn fortran_to_c<T: Copy + Default>(data: &[T], shape: &[usize]) -> Vec<T> {
    let mut out = vec![T::default(); data.len()];
    let mut idx = vec![0usize; shape.len()];
    // Fortran strides.
    let mut fstride = vec![1usize; shape.len()];
    for k in 1..shape.len() {
        fstride[k] = fstride[k - 1] * shape[k - 1];
    }
    for slot in out.iter_mut() {
        let off: usize = idx.iter().zip(&fstride).map(|(i, s)| i * s).sum();
        *slot = data[off];
        // Advance the C-order multi-index (last index fastest).
        for k in (0..shape.len()).rev() {
            idx[k] += 1;
            if idx[k] < shape[k] {
                break;
            }
            idx[k] = 0;
        }
    }
    out
}

// ---------------------------------------------------------------------------
// writing

/// How [`write_npz_with`] writes.
#[derive(Clone, Debug, Default)]
pub struct WriteOptions<'a> {
    /// Store entries uncompressed (like `np.savez`) instead of deflating them
    /// (like `np.savez_compressed`, which the published files use).
    pub stored: bool,
    /// Tile files: `config_runtime_normalizers`. Default: all 1, so that
    /// `config_runtime / config_runtime_normalizers` is the runtime itself.
    pub runtime_normalizers: Option<&'a [i64]>,
}

/// Writes `graph` and its configurations as a published-format npz file for
/// `task`, deflated. `runtimes` default to 0 (like the published test split).
/// Tile files get `config_runtime_normalizers` of 1; see [`write_npz_with`].
pub fn write_npz(
    path: impl AsRef<Path>,
    graph: &Graph,
    configs: Option<&ConfigBatch>,
    runtimes: Option<&[i64]>,
    task: Task,
) -> Result<()> {
    write_npz_with(
        path,
        graph,
        configs,
        runtimes,
        task,
        &WriteOptions::default(),
    )
}

/// [`write_npz`] with options.
pub fn write_npz_with(
    path: impl AsRef<Path>,
    graph: &Graph,
    configs: Option<&ConfigBatch>,
    runtimes: Option<&[i64]>,
    task: Task,
    options: &WriteOptions<'_>,
) -> Result<()> {
    let path = path.as_ref();
    let err = |message: String| CostModelError::Npz {
        path: path.display().to_string(),
        message,
    };
    let n = graph.num_nodes();
    let nc = graph.num_config_nodes();
    let per_config = match task {
        Task::Layout => nc,
        Task::Tile => 1,
    };
    graph.check().map_err(err)?;
    let empty;
    let configs = match configs {
        Some(c) => c,
        None => {
            empty = ConfigBatch {
                task,
                num_configs: 0,
                nodes_per_config: per_config,
                feat: Vec::new(),
            };
            &empty
        }
    };
    if configs.task != task {
        return Err(err(format!(
            "configs are for the {} task, the file for {}",
            configs.task.name(),
            task.name()
        )));
    }
    let c = configs.num_configs;
    if configs.nodes_per_config != per_config
        || configs.feat.len() != c * per_config * task.config_dim()
    {
        return Err(err(format!(
            "config batch holds {} values for {c} configs x {} nodes; expected {c} x {per_config} x {}",
            configs.feat.len(),
            configs.nodes_per_config,
            task.config_dim()
        )));
    }
    let zeros;
    let runtimes = match runtimes {
        Some(r) => r,
        None => {
            zeros = vec![0i64; c];
            &zeros
        }
    };
    if runtimes.len() != c {
        return Err(err(format!("{} runtimes for {c} configs", runtimes.len())));
    }
    let ones;
    let normalizers = match options.runtime_normalizers {
        Some(v) => v,
        None => {
            ones = vec![1i64; c];
            &ones
        }
    };
    if normalizers.len() != c {
        return Err(err(format!(
            "{} runtime normalizers for {c} configs",
            normalizers.len()
        )));
    }

    let file = File::create(path).map_err(|e| err(format!("cannot create: {e}")))?;
    let mut w = NpzOut {
        zip: zip::ZipWriter::new(BufWriter::new(file)),
        stored: options.stored,
    };
    let io = |e: io::Error| err(format!("write failed: {e}"));
    w.array("node_feat", "<f4", &[n, NODE_FEAT_DIM], &graph.node_feat)
        .map_err(io)?;
    w.array("node_opcode", "|u1", &[n], &graph.node_opcode)
        .map_err(io)?;
    let edges: Vec<i64> = graph.edge_index.iter().flatten().copied().collect();
    w.array("edge_index", "<i8", &[graph.edge_index.len(), 2], &edges)
        .map_err(io)?;
    match task {
        Task::Layout => {
            w.array(
                "node_config_feat",
                "<f4",
                &[c, nc, LAYOUT_CONFIG_DIM],
                &configs.feat,
            )
            .map_err(io)?;
            w.array("node_config_ids", "<i8", &[nc], &graph.node_config_ids)
                .map_err(io)?;
            w.array("config_runtime", "<i8", &[c], runtimes)
                .map_err(io)?;
            w.array(
                "node_splits",
                "<i8",
                &[1, graph.node_splits.len()],
                &graph.node_splits,
            )
            .map_err(io)?;
        }
        Task::Tile => {
            w.array("config_feat", "<f4", &[c, TILE_CONFIG_DIM], &configs.feat)
                .map_err(io)?;
            w.array("config_runtime", "<i8", &[c], runtimes)
                .map_err(io)?;
            w.array("config_runtime_normalizers", "<i8", &[c], normalizers)
                .map_err(io)?;
        }
    }
    let inner = w
        .zip
        .finish()
        .map_err(|e| err(format!("write failed: {e}")))?;
    inner
        .into_inner()
        .map_err(|e| err(format!("write failed: {}", e.error())))?
        .sync_all()
        .map_err(io)?;
    Ok(())
}

/// Little-endian bytes of the numbers we write.
trait ToLe: Copy {
    const SIZE: usize;
    fn put(self, out: &mut Vec<u8>);
}
impl ToLe for f32 {
    const SIZE: usize = 4;
    fn put(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
}
impl ToLe for i64 {
    const SIZE: usize = 8;
    fn put(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
}
impl ToLe for u8 {
    const SIZE: usize = 1;
    fn put(self, out: &mut Vec<u8>) {
        out.push(self);
    }
}

struct NpzOut {
    zip: zip::ZipWriter<BufWriter<File>>,
    stored: bool,
}

impl NpzOut {
    fn array<T: ToLe>(
        &mut self,
        name: &str,
        descr: &str,
        shape: &[usize],
        data: &[T],
    ) -> io::Result<()> {
        let bytes = data.len() as u64 * T::SIZE as u64;
        let method = if self.stored {
            zip::CompressionMethod::Stored
        } else {
            zip::CompressionMethod::Deflated
        };
        let options = zip::write::SimpleFileOptions::default()
            .compression_method(method)
            .large_file(bytes >= u64::from(u32::MAX) - 4096);
        self.zip
            .start_file(format!("{name}.npy"), options)
            .map_err(io::Error::other)?;
        let ts: npyz::TypeStr = descr.parse().map_err(io::Error::other)?;
        let shape: Vec<u64> = shape.iter().map(|&d| d as u64).collect();
        npyz::WriteOptions::<f32>::new()
            .dtype(npyz::DType::Plain(ts))
            .shape(&shape)
            .writer(&mut self.zip)
            .write_header_only()?;
        let mut buf = Vec::with_capacity(CHUNK);
        for chunk in data.chunks(CHUNK / T::SIZE) {
            buf.clear();
            for &v in chunk {
                v.put(&mut buf);
            }
            self.zip.write_all(&buf)?;
        }
        Ok(())
    }
}

/// A writer of an npz file of named arrays in any layout (for formats other
/// than TpuGraphs', e.g. the XLA:GPU tile files of docs/xla-gpu.md);
/// entries deflated as `np.savez_compressed` writes them.
pub struct NpzWriter {
    out: NpzOut,
    path: PathBuf,
}

impl NpzWriter {
    pub fn create(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        let file = File::create(&path).map_err(|e| CostModelError::Npz {
            path: path.display().to_string(),
            message: format!("cannot create: {e}"),
        })?;
        Ok(NpzWriter {
            out: NpzOut {
                zip: zip::ZipWriter::new(BufWriter::new(file)),
                stored: false,
            },
            path,
        })
    }
    fn err(&self, e: impl std::fmt::Display) -> CostModelError {
        CostModelError::Npz {
            path: self.path.display().to_string(),
            message: format!("write failed: {e}"),
        }
    }
    fn check(&self, name: &str, shape: &[usize], len: usize) -> Result<()> {
        if shape.iter().product::<usize>() != len {
            return Err(self.err(format!("{name}: {len} values for shape {shape:?}")));
        }
        Ok(())
    }
    /// A float32 array.
    pub fn f32(&mut self, name: &str, shape: &[usize], data: &[f32]) -> Result<()> {
        self.check(name, shape, data.len())?;
        self.out
            .array(name, "<f4", shape, data)
            .map_err(|e| self.err(e))
    }
    /// An int64 array.
    pub fn i64(&mut self, name: &str, shape: &[usize], data: &[i64]) -> Result<()> {
        self.check(name, shape, data.len())?;
        self.out
            .array(name, "<i8", shape, data)
            .map_err(|e| self.err(e))
    }
    /// A uint8 array (also UTF-8 text: a 1-D array of its bytes).
    pub fn u8(&mut self, name: &str, shape: &[usize], data: &[u8]) -> Result<()> {
        self.check(name, shape, data.len())?;
        self.out
            .array(name, "|u1", shape, data)
            .map_err(|e| self.err(e))
    }
    /// Finishes the zip.
    pub fn finish(self) -> Result<()> {
        let path = self.path.display().to_string();
        let w = self.out.zip.finish().map_err(|e| CostModelError::Npz {
            path: path.clone(),
            message: format!("write failed: {e}"),
        })?;
        w.into_inner()
            .map_err(|e| CostModelError::Npz {
                path,
                message: format!("write failed: {e}"),
            })
            .map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fortran_order_is_transposed_to_c_order() {
        // A (3, 2) array [[0, 1], [2, 3], [4, 5]] stored column by column.
        let fortran = [0, 2, 4, 1, 3, 5];
        assert_eq!(fortran_to_c(&fortran, &[3, 2]), vec![0, 1, 2, 3, 4, 5]);
        // (2, 2, 2): element (i, j, k) = 4i + 2j + k, Fortran offset i + 2j + 4k.
        let mut f = [0; 8];
        for i in 0..2 {
            for j in 0..2 {
                for k in 0..2 {
                    f[i + 2 * j + 4 * k] = 4 * i + 2 * j + k;
                }
            }
        }
        assert_eq!(fortran_to_c(&f, &[2, 2, 2]), (0..8).collect::<Vec<_>>());
    }

    #[test]
    fn shape_precheck_refuses_overflowing_shapes() {
        assert!(
            precheck_shape("{'descr': '<f4', 'fortran_order': False, 'shape': (3163, 140), }")
                .is_ok()
        );
        assert!(precheck_shape("{'descr': '<f4', 'fortran_order': False, 'shape': (), }").is_ok());
        let huge = "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }";
        assert!(precheck_shape(huge).is_err());
        assert!(
            precheck_shape("{'descr': '<f4', 'fortran_order': False, 'shape': (x,), }").is_err()
        );
    }

    #[test]
    fn integers_of_every_width_and_byte_order_decode_to_i64() {
        let dt = |descr: &str| {
            Dtype::from_npyz(&npyz::DType::Plain(descr.parse().expect("descr"))).expect("dtype")
        };
        let mut out = Vec::new();
        i64::decode(&[0xff, 0x01], &dt("|i1"), &mut out).expect("i1");
        i64::decode(&[0xff, 0x01], &dt("|u1"), &mut out).expect("u1");
        i64::decode(&[0x01, 0x02], &dt(">i2"), &mut out).expect(">i2");
        i64::decode(&[0xfe, 0xff, 0xff, 0xff], &dt("<i4"), &mut out).expect("<i4");
        assert_eq!(out, vec![-1, 1, 255, 1, 0x0102, -2]);
        let too_big = u64::MAX.to_le_bytes();
        assert!(i64::decode(&too_big, &dt("<u8"), &mut out).is_err());
        assert!(i64::check(&dt("<f4")).is_err());
        assert!(f32::check(&dt("<i8")).is_err());
        let mut f = Vec::new();
        f32::decode(&1.5f64.to_be_bytes(), &dt(">f8"), &mut f).expect(">f8");
        assert_eq!(f, vec![1.5]);
    }
}
