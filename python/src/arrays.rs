//! The cost-model side as numpy arrays: `featurize` (what `hlo-cost
//! featurize` writes), npz files (`costmodel::npz`), the ranking metrics
//! (`costmodel::metrics`) and `CostModel.score` (what `hlo-cost eval`
//! predicts).
//!
//! Arrays cross as dicts of numpy arrays with the TpuGraphs npz keys,
//! dtypes and shapes (`costmodel::npz`'s table). Arrays coming in are
//! expected C-contiguous with the published dtypes: the Python half
//! (`hlo_opt/__init__.py`) converts them first.

use std::path::PathBuf;

use costmodel::graph::{LAYOUT_CONFIG_DIM, NODE_FEAT_DIM, TILE_CONFIG_DIM};
use costmodel::npz::{NpzGraphFile, WriteOptions};
use costmodel::tuning::Configs;
use costmodel::{ConfigBatch, Graph, GraphView, Task};
use numpy::ndarray::{Array2, ArrayD, IxDyn};
use numpy::{
    Element, IntoPyArray, PyArrayDyn, PyArrayMethods, PyReadonlyArray1, PyReadonlyArrayDyn,
    PyUntypedArrayMethods,
};
use pyo3::exceptions::{PyKeyError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::costmodel_error;
use crate::module::Module;

fn parse_task(task: &str) -> PyResult<Task> {
    match task {
        "layout" => Ok(Task::Layout),
        "tile" => Ok(Task::Tile),
        other => Err(PyValueError::new_err(format!(
            "task `{other}`: give \"layout\" or \"tile\""
        ))),
    }
}

/// `v` as a numpy array of shape `shape`.
fn array<'py, T: Element>(
    py: Python<'py>,
    v: Vec<T>,
    shape: &[usize],
) -> PyResult<Bound<'py, PyArrayDyn<T>>> {
    let a = ArrayD::from_shape_vec(IxDyn(shape), v)
        .map_err(|e| PyValueError::new_err(format!("array of shape {shape:?}: {e}")))?;
    Ok(a.into_pyarray(py))
}

/// The npz arrays of a graph and its configurations, in the published key
/// order (the vectors move into the arrays, uncopied).
fn graph_dict<'py>(
    py: Python<'py>,
    graph: Graph,
    task: Task,
    configs: Option<ConfigBatch>,
    runtimes: Vec<i64>,
    normalizers: Option<Vec<i64>>,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    let n = graph.num_nodes();
    let nc = graph.num_config_nodes();
    let c = runtimes.len();
    let splits = graph.node_splits.len();
    d.set_item(
        "node_feat",
        array(py, graph.node_feat, &[n, NODE_FEAT_DIM])?,
    )?;
    d.set_item("node_opcode", array(py, graph.node_opcode, &[n])?)?;
    // [consumer, producer] pairs are the rows of an (m, 2) array: moved, not copied.
    d.set_item(
        "edge_index",
        Array2::from(graph.edge_index).into_dyn().into_pyarray(py),
    )?;
    match task {
        Task::Layout => {
            if let Some(configs) = configs {
                d.set_item(
                    "node_config_feat",
                    array(py, configs.feat, &[c, nc, LAYOUT_CONFIG_DIM])?,
                )?;
            }
            d.set_item("node_config_ids", array(py, graph.node_config_ids, &[nc])?)?;
            d.set_item("config_runtime", array(py, runtimes, &[c])?)?;
            d.set_item("node_splits", array(py, graph.node_splits, &[1, splits])?)?;
        }
        Task::Tile => {
            if let Some(configs) = configs {
                d.set_item(
                    "config_feat",
                    array(py, configs.feat, &[c, TILE_CONFIG_DIM])?,
                )?;
            }
            d.set_item("config_runtime", array(py, runtimes, &[c])?)?;
            if let Some(norm) = normalizers {
                d.set_item("config_runtime_normalizers", array(py, norm, &[c])?)?;
            }
        }
    }
    Ok(d)
}

/// The TpuGraphs arrays of a module, as `hlo-cost featurize --task TASK`
/// writes them for a module without runs.
#[pyfunction]
#[pyo3(signature = (module, task = "layout"))]
pub fn featurize<'py>(
    py: Python<'py>,
    module: &Module,
    task: &str,
) -> PyResult<Bound<'py, PyDict>> {
    let task = parse_task(task)?;
    let m = module.module();
    let (graph, configs) = py
        .detach(|| {
            if task == Task::Tile {
                passes::tile::kernel::check_single_kernel(m)
                    .map_err(costmodel::CostModelError::Input)?;
            }
            let f = costmodel::features::featurize(m, task)?;
            let configs = Configs::compiler_default(&f.graph, task);
            Ok::<_, costmodel::CostModelError>((f.graph, configs))
        })
        .map_err(|e| costmodel_error(&e))?;
    let normalizers = (task == Task::Tile).then(|| vec![1i64; configs.batch.num_configs]);
    graph_dict(
        py,
        graph,
        task,
        Some(configs.batch),
        configs.runtimes,
        normalizers,
    )
}

/// Reads an npz file of the published format: its arrays by key; without
/// the configurations' features (the largest array, read last) when
/// `configs` is false.
#[pyfunction]
#[pyo3(signature = (path, *, configs = true))]
pub fn load_npz<'py>(
    py: Python<'py>,
    path: PathBuf,
    configs: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let (file, batch) = py
        .detach(|| {
            let file = NpzGraphFile::open(&path)?;
            let batch = if configs {
                Some(file.all_configs()?)
            } else {
                None
            };
            Ok::<_, costmodel::CostModelError>((file, batch))
        })
        .map_err(|e| costmodel_error(&e))?;
    let task = file.task();
    let runtimes = file.runtimes().to_vec();
    let normalizers = file.runtime_normalizers().map(<[i64]>::to_vec);
    graph_dict(py, file.into_graph(), task, batch, runtimes, normalizers)
}

/// The subgraph of a layout graph within `k` undirected hops of its
/// configurable nodes (`costmodel::prune::prune_khop`, what the layout
/// model scores): `node_feat`, `node_opcode`, `edge_index`, `node_config_ids`.
#[pyfunction]
pub fn prune_khop<'py>(
    py: Python<'py>,
    arrays: &Bound<'py, PyDict>,
    k: usize,
) -> PyResult<Bound<'py, PyDict>> {
    let held = GraphArrays::read(arrays, Task::Layout)?;
    let graph = held.view()?;
    let pruned = py.detach(|| costmodel::prune::prune_khop(graph, k));
    let d = PyDict::new(py);
    let n = pruned.num_nodes();
    let nc = pruned.num_config_nodes();
    d.set_item(
        "node_feat",
        array(py, pruned.node_feat, &[n, NODE_FEAT_DIM])?,
    )?;
    d.set_item("node_opcode", array(py, pruned.node_opcode, &[n])?)?;
    d.set_item(
        "edge_index",
        Array2::from(pruned.edge_index).into_dyn().into_pyarray(py),
    )?;
    d.set_item("node_config_ids", array(py, pruned.node_config_ids, &[nc])?)?;
    Ok(d)
}

/// The configurable nodes' meta-graph of a layout graph
/// (`costmodel::prune::meta_edges`): `[consumer, producer]` rows over
/// positions in `node_config_ids`, an int64 array of shape (EC, 2).
#[pyfunction]
#[pyo3(signature = (arrays, hops = 3))]
pub fn meta_edges<'py>(
    py: Python<'py>,
    arrays: &Bound<'py, PyDict>,
    hops: usize,
) -> PyResult<Bound<'py, PyArrayDyn<i64>>> {
    let held = GraphArrays::read(arrays, Task::Layout)?;
    let graph = held.view()?;
    let pairs = py.detach(|| costmodel::prune::meta_edges(graph, hops));
    let n = pairs.len();
    let flat: Vec<i64> = pairs.into_iter().flatten().collect();
    array(py, flat, &[n, 2])
}

/// A required array of `d`, its shape checked against `shape` (`None`: any
/// size), borrowed read-only; C-contiguous (as the Python half passes them;
/// any other layout is copied into one).
fn readonly<'py, T: Element + Copy>(
    d: &Bound<'py, PyDict>,
    key: &str,
    shape: &[Option<usize>],
) -> PyResult<PyReadonlyArrayDyn<'py, T>> {
    let item = d
        .get_item(key)?
        .ok_or_else(|| PyKeyError::new_err(format!("no `{key}` array")))?;
    let a: PyReadonlyArrayDyn<'py, T> = item.extract().map_err(|_| {
        PyValueError::new_err(format!(
            "`{key}`: expected a numpy array of dtype {}",
            std::any::type_name::<T>()
        ))
    })?;
    let dims = a.shape();
    let fits = dims.len() == shape.len()
        && dims
            .iter()
            .zip(shape)
            .all(|(&d, want)| want.is_none_or(|w| w == d));
    if !fits {
        let want: Vec<String> = shape
            .iter()
            .map(|s| s.map_or("*".to_string(), |v| v.to_string()))
            .collect();
        return Err(PyValueError::new_err(format!(
            "`{key}` has shape {dims:?}, expected ({})",
            want.join(", ")
        )));
    }
    if a.is_c_contiguous() {
        return Ok(a);
    }
    let copy = a.as_array().as_standard_layout().into_owned();
    Ok(copy.into_pyarray(d.py()).readonly())
}

/// The values of a [`readonly`] array.
fn values<'a, T: Element>(a: &'a PyReadonlyArrayDyn<'_, T>, key: &str) -> PyResult<&'a [T]> {
    a.as_slice()
        .map_err(|e| PyValueError::new_err(format!("`{key}`: {e}")))
}

/// Calls `f` with the values of a required array of `d` and its dims,
/// the shape checked against `shape` ([`readonly`]).
fn with_array<T: Element + Copy, R>(
    d: &Bound<'_, PyDict>,
    key: &str,
    shape: &[Option<usize>],
    f: impl FnOnce(&[T], &[usize]) -> R,
) -> PyResult<R> {
    let a = readonly::<T>(d, key, shape)?;
    Ok(f(values(&a, key)?, a.shape()))
}

/// [`with_array`]'s values, copied.
fn get<T: Element + Copy>(
    d: &Bound<'_, PyDict>,
    key: &str,
    shape: &[Option<usize>],
) -> PyResult<(Vec<T>, Vec<usize>)> {
    with_array(d, key, shape, |v: &[T], dims| (v.to_vec(), dims.to_vec()))
}

/// The task of a features dict, told by its keys (as in npz files).
fn task_of(d: &Bound<'_, PyDict>) -> PyResult<Task> {
    if d.contains("node_config_feat")? || d.contains("node_config_ids")? {
        Ok(Task::Layout)
    } else if d.contains("config_feat")? {
        Ok(Task::Tile)
    } else {
        Err(PyKeyError::new_err(
            "neither `node_config_feat`/`node_config_ids` (layout) nor `config_feat` (tile)",
        ))
    }
}

/// The graph of a features dict, and its task, copied.
fn graph_of(d: &Bound<'_, PyDict>) -> PyResult<(Graph, Task)> {
    let task = task_of(d)?;
    let graph = GraphArrays::read(d, task)?.view()?.to_graph();
    Ok((graph, task))
}

/// The graph arrays of a features dict for a task, held read-only while a
/// [`GraphView`] of them is in use: models read numpy's memory, uncopied.
struct GraphArrays<'py> {
    node_feat: PyReadonlyArrayDyn<'py, f32>,
    node_opcode: PyReadonlyArrayDyn<'py, u8>,
    edge_index: PyReadonlyArrayDyn<'py, i64>,
    /// Layout only (tile graphs have none).
    node_config_ids: Option<PyReadonlyArrayDyn<'py, i64>>,
    /// Optional.
    node_splits: Option<PyReadonlyArrayDyn<'py, i64>>,
}

impl<'py> GraphArrays<'py> {
    /// The arrays of `d` for `task`, their shapes checked.
    fn read(d: &Bound<'py, PyDict>, task: Task) -> PyResult<Self> {
        let node_feat = readonly(d, "node_feat", &[None, Some(NODE_FEAT_DIM)])?;
        let n = node_feat.shape()[0];
        let layout = task == Task::Layout;
        Ok(GraphArrays {
            node_feat,
            node_opcode: readonly(d, "node_opcode", &[Some(n)])?,
            edge_index: readonly(d, "edge_index", &[None, Some(2)])?,
            node_config_ids: layout
                .then(|| readonly(d, "node_config_ids", &[None]))
                .transpose()?,
            node_splits: if layout && d.contains("node_splits")? {
                Some(readonly(d, "node_splits", &[Some(1), None])?)
            } else {
                None
            },
        })
    }

    /// The graph, checked (`Graph::check`).
    fn view(&self) -> PyResult<GraphView<'_>> {
        let (edge_index, _) = values(&self.edge_index, "edge_index")?.as_chunks::<2>();
        fn optional<'a>(
            a: &'a Option<PyReadonlyArrayDyn<'_, i64>>,
            key: &str,
        ) -> PyResult<&'a [i64]> {
            a.as_ref().map_or(Ok(&[]), |a| values(a, key))
        }
        let graph = GraphView {
            node_feat: values(&self.node_feat, "node_feat")?,
            node_opcode: values(&self.node_opcode, "node_opcode")?,
            edge_index,
            node_config_ids: optional(&self.node_config_ids, "node_config_ids")?,
            node_splits: optional(&self.node_splits, "node_splits")?,
        };
        graph.check().map_err(PyValueError::new_err)?;
        Ok(graph)
    }
}

/// The configurations of a features dict (or `configs`, when given).
fn configs_of(
    d: &Bound<'_, PyDict>,
    graph: GraphView<'_>,
    task: Task,
    configs: Option<&Bound<'_, PyDict>>,
) -> PyResult<ConfigBatch> {
    let mut batches = config_batches(d, graph, task, configs, usize::MAX)?;
    Ok(batches.pop().unwrap_or(ConfigBatch {
        task,
        num_configs: 0,
        nodes_per_config: nodes_per_config(graph, task),
        feat: Vec::new(),
    }))
}

fn nodes_per_config(graph: GraphView<'_>, task: Task) -> usize {
    match task {
        Task::Layout => graph.num_config_nodes(),
        Task::Tile => 1,
    }
}

/// The configurations of a features dict (or of `configs`, when given) in
/// batches of at most `batch`, each copied once from the array.
fn config_batches(
    d: &Bound<'_, PyDict>,
    graph: GraphView<'_>,
    task: Task,
    configs: Option<&Bound<'_, PyDict>>,
    batch: usize,
) -> PyResult<Vec<ConfigBatch>> {
    let src = configs.unwrap_or(d);
    let nc = graph.num_config_nodes();
    let (key, shape) = match task {
        Task::Layout => (
            "node_config_feat",
            vec![None, Some(nc), Some(LAYOUT_CONFIG_DIM)],
        ),
        Task::Tile => ("config_feat", vec![None, Some(TILE_CONFIG_DIM)]),
    };
    let per = nodes_per_config(graph, task);
    with_array(src, key, &shape, |v: &[f32], dims| {
        let row = per * task.config_dim();
        (0..dims[0])
            .step_by(batch.max(1))
            .map(|start| {
                let end = start.saturating_add(batch).min(dims[0]);
                ConfigBatch {
                    task,
                    num_configs: end - start,
                    nodes_per_config: per,
                    feat: v[start * row..end * row].to_vec(),
                }
            })
            .collect()
    })
}

/// Writes arrays (the `featurize` / `load_npz` keys) as an npz file of the
/// published format, deflated unless `compressed` is false.
#[pyfunction]
#[pyo3(signature = (path, arrays, *, compressed = true))]
pub fn save_npz(
    py: Python<'_>,
    path: PathBuf,
    arrays: &Bound<'_, PyDict>,
    compressed: bool,
) -> PyResult<()> {
    let (graph, task) = graph_of(arrays)?;
    let configs = configs_of(arrays, graph.view(), task, None)?;
    let c = configs.num_configs;
    let runtimes = if arrays.contains("config_runtime")? {
        get::<i64>(arrays, "config_runtime", &[Some(c)])?.0
    } else {
        vec![0; c]
    };
    let normalizers = if arrays.contains("config_runtime_normalizers")? {
        Some(get::<i64>(arrays, "config_runtime_normalizers", &[Some(c)])?.0)
    } else {
        None
    };
    py.detach(|| {
        costmodel::npz::write_npz_with(
            &path,
            &graph,
            Some(&configs),
            Some(&runtimes),
            task,
            &WriteOptions {
                stored: !compressed,
                runtime_normalizers: normalizers.as_deref(),
            },
        )
    })
    .map_err(|e| costmodel_error(&e))
}

/// Predictions and runtimes of the same configurations: 1-d float64
/// arrays (the Python half converts), borrowed, not copied.
type Values<'py> = PyReadonlyArray1<'py, f64>;

fn pair<'a>(pred: &'a Values<'_>, runtime: &'a Values<'_>) -> PyResult<(&'a [f64], &'a [f64])> {
    let (p, r) = (pred.as_slice()?, runtime.as_slice()?);
    if p.len() != r.len() {
        return Err(PyValueError::new_err(format!(
            "{} predictions for {} runtimes",
            p.len(),
            r.len()
        )));
    }
    Ok((p, r))
}

/// Every metric of `hlo-cost eval` (`costmodel::metrics::RankingMetrics`).
#[pyfunction]
pub fn ranking_metrics<'py>(
    py: Python<'py>,
    pred: Values<'py>,
    runtime: Values<'py>,
) -> PyResult<Bound<'py, PyDict>> {
    let (p, r) = pair(&pred, &runtime)?;
    let m = costmodel::metrics::RankingMetrics::compute(p, r);
    let d = PyDict::new(py);
    d.set_item("num_configs", m.num_configs)?;
    d.set_item("kendall_tau", m.kendall_tau)?;
    d.set_item("ordered_pair_accuracy", m.ordered_pair_accuracy)?;
    d.set_item("top1_slowdown", m.top1_slowdown)?;
    d.set_item("top5_slowdown", m.top5_slowdown)?;
    d.set_item("top10_slowdown", m.top10_slowdown)?;
    d.set_item("kaggle_tile_score", m.kaggle_tile_score)?;
    Ok(d)
}

/// Kendall's tau-b (scipy's `kendalltau`); `None` where scipy gives NaN.
#[pyfunction]
pub fn kendall_tau(pred: Values<'_>, runtime: Values<'_>) -> PyResult<Option<f64>> {
    let (p, r) = pair(&pred, &runtime)?;
    Ok(costmodel::metrics::kendall_tau(p, r))
}

/// The ordered pair accuracy of the TpuGraphs paper.
#[pyfunction]
pub fn ordered_pair_accuracy(pred: Values<'_>, runtime: Values<'_>) -> PyResult<Option<f64>> {
    let (p, r) = pair(&pred, &runtime)?;
    Ok(costmodel::metrics::ordered_pair_accuracy(p, r))
}

/// `min runtime of the k best-predicted / min runtime - 1`.
#[pyfunction]
pub fn top_k_slowdown(pred: Values<'_>, runtime: Values<'_>, k: usize) -> PyResult<Option<f64>> {
    let (p, r) = pair(&pred, &runtime)?;
    Ok(costmodel::metrics::top_k_slowdown(p, r, k))
}

/// The Kaggle competition's per-kernel tile score.
#[pyfunction]
pub fn kaggle_tile_score(pred: Values<'_>, runtime: Values<'_>) -> PyResult<Option<f64>> {
    let (p, r) = pair(&pred, &runtime)?;
    Ok(costmodel::metrics::kaggle_tile_score(p, r))
}

/// A cost model: the embedded layout or tile model, the built-in
/// `xla-cpu` layout model, the `reference` heuristic, or a model file.
#[pyclass(frozen, module = "hlo_opt")]
pub struct CostModel {
    model: Box<dyn costmodel::CostModel>,
    spec: String,
}

impl CostModel {
    fn load(spec: &str, task: Option<Task>, threads: usize) -> costmodel::Result<Self> {
        use std::path::Path;
        let model: Box<dyn costmodel::CostModel> = match (spec, task) {
            ("layout", None | Some(Task::Layout)) => {
                costmodel::load_model(None, Task::Layout, threads)?
            }
            ("tile", None | Some(Task::Tile)) => costmodel::load_model(None, Task::Tile, threads)?,
            ("reference", t) => Box::new(costmodel::reference::ReferenceModel::new(
                t.unwrap_or(Task::Layout),
            )),
            (path, Some(t)) => costmodel::load_model(Some(Path::new(path)), t, threads)?,
            // A file names its task: try layout, then tile.
            (path, None) => {
                match costmodel::load_model(Some(Path::new(path)), Task::Layout, threads) {
                    Ok(m) => m,
                    Err(first) => costmodel::load_model(Some(Path::new(path)), Task::Tile, threads)
                        .map_err(|_| first)?,
                }
            }
        };
        Ok(CostModel {
            model,
            spec: spec.to_string(),
        })
    }
}

#[pymethods]
impl CostModel {
    #[new]
    #[pyo3(signature = (spec = "layout", *, task = None, threads = 0))]
    fn new(py: Python<'_>, spec: &str, task: Option<&str>, threads: usize) -> PyResult<Self> {
        let task = task.map(parse_task).transpose()?;
        if matches!(
            (spec, task),
            ("layout", Some(Task::Tile)) | ("tile", Some(Task::Layout))
        ) {
            return Err(PyValueError::new_err(format!(
                "CostModel(\"{spec}\") is the embedded {spec} model; task= names another task"
            )));
        }
        py.detach(|| CostModel::load(spec, task, threads))
            .map_err(|e| costmodel_error(&e))
    }

    /// `"layout"` or `"tile"`.
    #[getter]
    fn task(&self) -> &'static str {
        self.model.task().name()
    }

    /// The hardware whose runtimes the model learned (`tpu`, `xla-cpu`), if known.
    #[getter]
    fn device(&self) -> Option<String> {
        self.model.device()
    }

    fn __repr__(&self) -> String {
        format!(
            "<hlo_opt.CostModel '{}': {} task>",
            self.spec,
            self.model.task().name()
        )
    }

    /// One score per configuration (lower = predicted faster), as `hlo-cost
    /// eval --predictions` gives them: the configurations of `features`, or
    /// of `configs` (a dict with `node_config_feat` or `config_feat`).
    #[pyo3(signature = (features, configs = None, *, batch = 512))]
    fn score<'py>(
        &self,
        py: Python<'py>,
        features: &Bound<'py, PyDict>,
        configs: Option<&Bound<'py, PyDict>>,
        batch: usize,
    ) -> PyResult<Bound<'py, PyArrayDyn<f32>>> {
        if batch == 0 {
            return Err(PyValueError::new_err("batch 0: give 1 or more"));
        }
        let task = task_of(features)?;
        if task != self.model.task() {
            return Err(PyValueError::new_err(format!(
                "the features are for the {} task, the model for {}",
                task.name(),
                self.model.task().name()
            )));
        }
        // The model reads the graph in numpy's memory, uncopied (read-only
        // borrows, held until the scores are back).
        let held = GraphArrays::read(features, task)?;
        let graph = held.view()?;
        let batches = config_batches(features, graph, task, configs, batch)?;
        let model = self.model.as_ref();
        let scores = py
            .detach(|| score_all(model, graph, &batches))
            .map_err(|e| costmodel_error(&e))?;
        let n = scores.len();
        array(py, scores, &[n])
    }
}

/// Scores the configurations of `batches` (as `hlo-cost eval`, which
/// scores in batches too), in order.
fn score_all(
    model: &dyn costmodel::CostModel,
    graph: GraphView<'_>,
    batches: &[ConfigBatch],
) -> costmodel::Result<Vec<f32>> {
    let prepared = model.prepare_view(graph)?;
    let mut out = Vec::with_capacity(batches.iter().map(|b| b.num_configs).sum());
    for part in batches {
        let start = out.len();
        let scores = costmodel::incremental::score_batch(model, &prepared, part)?;
        if scores.len() != part.num_configs {
            return Err(costmodel::CostModelError::Input(format!(
                "the model returned {} scores for {} configurations",
                scores.len(),
                part.num_configs
            )));
        }
        if let Some(i) = scores.iter().position(|s| !s.is_finite()) {
            return Err(costmodel::CostModelError::Input(format!(
                "the model returned a non-finite score for configuration {}",
                start + i
            )));
        }
        out.extend(scores);
    }
    Ok(out)
}
