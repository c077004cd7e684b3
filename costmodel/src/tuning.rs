//! Autotuner records: the configurations an autotuner tried on a module and
//! their measured runtimes, as TpuGraphs publishes them raw (`ModuleTuningData`
//! protobufs for the layout collection, `TuningData` for the tile collection)
//! or decoded as `.runs.json`, turned into the configuration rows and runtimes
//! of a published npz ([`Record::configs`]).
//!
//! The prost messages below follow the field numbers of TpuGraphs'
//! `tuning.proto` (package `tpu_graphs`) and of XLA's `ExecutionProfile`;
//! fields hlo-opt does not need are skipped by prost. The module of a
//! `ModuleTuningData` is kept as bytes and read by [`hlo::proto`], which
//! reports the fields it does not carry over.
//!
//! Invariants: decoding never panics and allocates no more than the input
//! justifies (prost bounds every length by the remaining input); rows go in
//! the order of the graph's `node_config_ids`, runs in record order, failed
//! runs (`error`) are left out.

use std::collections::HashMap;

use prost::Message;
use serde_json::Value;

use crate::error::{CostModelError, Result};
use crate::features::{layout_config_row, tile_config_row};
use crate::graph::{ConfigBatch, Task, LAYOUT_CONFIG_DIM};

/// `tpu_graphs.TuningData`: the records of several modules (the tile
/// collection: one module per kernel).
#[derive(Clone, PartialEq, Message)]
pub struct TuningData {
    #[prost(message, repeated, tag = "1")]
    pub modules: Vec<ModuleTuningData>,
}

/// `tpu_graphs.ModuleTuningData`: one module and the runs measured on it.
#[derive(Clone, PartialEq, Message)]
pub struct ModuleTuningData {
    /// A serialized `xla.HloModuleProto` (read with [`hlo::proto`]).
    #[prost(bytes = "vec", tag = "1")]
    pub module: Vec<u8>,
    #[prost(uint64, tag = "2")]
    pub fingerprint: u64,
    #[prost(message, repeated, tag = "3")]
    pub runs: Vec<ConfigProfile>,
    /// Layout: the graph node of each configuration slot of a run.
    #[prost(uint64, repeated, tag = "4")]
    pub config_index_to_node: Vec<u64>,
}

/// `tpu_graphs.ConfigProfile`: one run. `op_config` and `module_config` are
/// a oneof in the schema (a tile run sets the first, a layout run the second).
#[derive(Clone, PartialEq, Message)]
pub struct ConfigProfile {
    #[prost(message, optional, tag = "1")]
    pub op_config: Option<HloOpConfig>,
    #[prost(message, optional, tag = "2")]
    pub module_config: Option<HloModuleConfig>,
    #[prost(bool, tag = "3")]
    pub error: bool,
    #[prost(message, optional, tag = "4")]
    pub profile: Option<ExecutionProfile>,
    #[prost(bool, tag = "5")]
    pub is_default: bool,
}

/// `tpu_graphs.HloOpConfig`.
#[derive(Clone, PartialEq, Message)]
pub struct HloOpConfig {
    #[prost(message, optional, tag = "1")]
    pub tile_size_config: Option<TileSizeConfig>,
}

/// `tpu_graphs.TileSizeConfig`.
#[derive(Clone, PartialEq, Message)]
pub struct TileSizeConfig {
    #[prost(int64, repeated, tag = "1")]
    pub kernel_bounds: Vec<i64>,
    #[prost(int64, repeated, tag = "2")]
    pub output_bounds: Vec<i64>,
    #[prost(int64, repeated, tag = "3")]
    pub input_bounds: Vec<i64>,
    #[prost(int64, repeated, tag = "4")]
    pub iteration_bounds: Vec<i64>,
}

/// `tpu_graphs.HloModuleConfig`.
#[derive(Clone, PartialEq, Message)]
pub struct HloModuleConfig {
    #[prost(message, optional, tag = "1")]
    pub layout_config: Option<LayoutConfig>,
}

/// `tpu_graphs.LayoutConfig`: per configurable node, the minor-to-major
/// prefixes of its tensors (output, input, kernel).
#[derive(Clone, PartialEq, Message)]
pub struct LayoutConfig {
    #[prost(message, repeated, tag = "1")]
    pub nodes: Vec<NodeLayoutConfig>,
}

/// `tpu_graphs.LayoutConfig.NodeLayoutConfig`.
#[derive(Clone, PartialEq, Message)]
pub struct NodeLayoutConfig {
    #[prost(message, repeated, tag = "1")]
    pub tensors: Vec<TensorLayoutConfig>,
}

/// `tpu_graphs.LayoutConfig.NodeLayoutConfig.TensorLayoutConfig`.
#[derive(Clone, PartialEq, Message)]
pub struct TensorLayoutConfig {
    #[prost(int32, repeated, tag = "1")]
    pub dims: Vec<i32>,
}

/// The fields of `xla.ExecutionProfile` a record's runs use.
#[derive(Clone, PartialEq, Message)]
pub struct ExecutionProfile {
    #[prost(int64, tag = "3")]
    pub compute_cycle_count: i64,
    #[prost(int64, tag = "4")]
    pub compute_time_ns: i64,
    #[prost(int64, tag = "5")]
    pub compute_and_transfer_time_ns: i64,
}

/// One run of a record, whatever its source.
#[derive(Clone, Debug, PartialEq)]
pub struct Run {
    pub error: bool,
    pub is_default: bool,
    /// The measured runtime (`ExecutionProfile.compute_time_ns`).
    pub compute_time_ns: Option<i64>,
    /// Layout runs: per configuration slot, the tensors' minor-to-major
    /// prefixes (output, input, kernel; empty = the compiler's choice).
    pub layout: Option<Vec<Vec<Vec<i64>>>>,
    /// Tile runs: kernel, output and input bounds.
    pub tile: Option<[Vec<i64>; 3]>,
}

/// The runs of one module, and for layout the node of each slot.
#[derive(Clone, Debug, PartialEq)]
pub struct Record {
    pub fingerprint: u64,
    /// Layout: `config_index_to_node[i]` is the graph node of slot `i` of
    /// every run; `None`: the slots are in `node_config_ids` order.
    pub config_index_to_node: Option<Vec<i64>>,
    pub runs: Vec<Run>,
}

/// The configuration rows of a record's successful runs.
#[derive(Clone, Debug)]
pub struct Configs {
    pub batch: ConfigBatch,
    /// `compute_time_ns` of each row's run.
    pub runtimes: Vec<i64>,
    /// Tile: each row's normalizer, the runtime of the default run (1 when
    /// the record has none); layout: `None`.
    pub normalizers: Option<Vec<i64>>,
}

impl Configs {
    /// The configurations `hlo-cost featurize` writes for a module without
    /// runs: layout, one configuration, the compiler's default layout
    /// everywhere (all -1), runtime 0; tile, none.
    pub fn compiler_default(graph: &crate::Graph, task: crate::Task) -> Configs {
        match task {
            crate::Task::Layout => Configs {
                batch: ConfigBatch {
                    task,
                    num_configs: 1,
                    nodes_per_config: graph.num_config_nodes(),
                    feat: vec![-1.0; graph.num_config_nodes() * task.config_dim()],
                },
                runtimes: vec![0],
                normalizers: None,
            },
            crate::Task::Tile => Configs {
                batch: ConfigBatch {
                    task,
                    num_configs: 0,
                    nodes_per_config: 1,
                    feat: Vec::new(),
                },
                runtimes: vec![],
                normalizers: None,
            },
        }
    }
}

fn input(message: String) -> CostModelError {
    CostModelError::Input(message)
}

/// Decodes a serialized `ModuleTuningData`.
pub fn decode_module_tuning_data(bytes: &[u8]) -> Result<ModuleTuningData> {
    ModuleTuningData::decode(bytes)
        .map_err(|e| input(format!("not a TpuGraphs ModuleTuningData record: {e}")))
}

/// Decodes a serialized `TuningData`.
pub fn decode_tuning_data(bytes: &[u8]) -> Result<TuningData> {
    TuningData::decode(bytes).map_err(|e| input(format!("not a TpuGraphs TuningData record: {e}")))
}

impl Record {
    /// The runs of a decoded `ModuleTuningData`.
    pub fn from_proto(m: &ModuleTuningData) -> Result<Record> {
        let config_index_to_node = if m.config_index_to_node.is_empty() {
            None
        } else {
            let ids = m
                .config_index_to_node
                .iter()
                .map(|&n| i64::try_from(n).map_err(|_| input(format!("node id {n} out of range"))))
                .collect::<Result<Vec<i64>>>()?;
            Some(ids)
        };
        let runs = m
            .runs
            .iter()
            .map(|r| Run {
                error: r.error,
                is_default: r.is_default,
                compute_time_ns: r.profile.as_ref().map(|p| p.compute_time_ns),
                layout: r
                    .module_config
                    .as_ref()
                    .and_then(|c| c.layout_config.as_ref())
                    .map(|l| {
                        l.nodes
                            .iter()
                            .map(|n| {
                                n.tensors
                                    .iter()
                                    .map(|t| t.dims.iter().map(|&d| i64::from(d)).collect())
                                    .collect()
                            })
                            .collect()
                    }),
                tile: r
                    .op_config
                    .as_ref()
                    .and_then(|c| c.tile_size_config.as_ref())
                    .map(|t| {
                        [
                            t.kernel_bounds.clone(),
                            t.output_bounds.clone(),
                            t.input_bounds.clone(),
                        ]
                    }),
            })
            .collect();
        Ok(Record {
            fingerprint: m.fingerprint,
            config_index_to_node,
            runs,
        })
    }

    /// The runs of a `.runs.json` (`{"fingerprint", "config_index_to_node",
    /// "runs": [{"error", "is_default", "compute_time_ns", "layout" | "tile"}]}`).
    pub fn from_json(doc: &Value) -> Result<Record> {
        let ints =
            |v: &Value| -> Option<Vec<i64>> { v.as_array()?.iter().map(Value::as_i64).collect() };
        let runs = doc
            .get("runs")
            .and_then(Value::as_array)
            .ok_or_else(|| input("no `runs` list".into()))?;
        let config_index_to_node =
            match doc.get("config_index_to_node") {
                None => None,
                Some(v) => Some(ints(v).ok_or_else(|| {
                    input("`config_index_to_node` is not a list of node ids".into())
                })?),
            };
        let flag = |r: &Value, key: &str| r.get(key).and_then(Value::as_bool).unwrap_or(false);
        let mut out = Vec::with_capacity(runs.len());
        for (i, r) in runs.iter().enumerate() {
            let layout = match r.get("layout") {
                None => None,
                Some(nodes) => {
                    let bad = || input(format!("run {i}: bad `layout`"));
                    let nodes = nodes.as_array().ok_or_else(bad)?;
                    let mut v = Vec::with_capacity(nodes.len());
                    for n in nodes {
                        let tensors = n.as_array().ok_or_else(bad)?;
                        v.push(
                            tensors
                                .iter()
                                .map(ints)
                                .collect::<Option<Vec<_>>>()
                                .ok_or_else(bad)?,
                        );
                    }
                    Some(v)
                }
            };
            let tile = match r.get("tile") {
                None => None,
                Some(t) => {
                    let bounds = |key: &str| {
                        t.get(key)
                            .map_or(Some(Vec::new()), ints)
                            .ok_or_else(|| input(format!("run {i}: bad `{key}`")))
                    };
                    Some([
                        bounds("kernel_bounds")?,
                        bounds("output_bounds")?,
                        bounds("input_bounds")?,
                    ])
                }
            };
            out.push(Run {
                error: flag(r, "error"),
                is_default: flag(r, "is_default"),
                compute_time_ns: r.get("compute_time_ns").and_then(Value::as_i64),
                layout,
                tile,
            });
        }
        Ok(Record {
            fingerprint: doc.get("fingerprint").and_then(Value::as_u64).unwrap_or(0),
            config_index_to_node,
            runs: out,
        })
    }

    /// The configuration rows, runtimes and (tile) normalizers of the
    /// successful runs, for a graph whose configurable nodes are
    /// `node_config_ids` (layout; tile graphs have one configuration row
    /// per run).
    pub fn configs(&self, task: Task, node_config_ids: &[i64]) -> Result<Configs> {
        let num_config_nodes = node_config_ids.len();
        // Slot `i` of a layout run is for node `config_index_to_node[i]`;
        // rows go in `node_config_ids` order.
        let mut slot_of: Vec<usize> = (0..num_config_nodes).collect();
        if let (Task::Layout, Some(map)) = (task, &self.config_index_to_node) {
            // Both lists may be in any order; they must name the same nodes.
            let slot: HashMap<i64, usize> = node_config_ids
                .iter()
                .enumerate()
                .map(|(i, &id)| (id, i))
                .collect();
            let mut sorted = map.clone();
            sorted.sort_unstable();
            sorted.dedup();
            let same = sorted.len() == map.len()
                && map.len() == num_config_nodes
                && map.iter().all(|id| slot.contains_key(id));
            if !same {
                return Err(input(format!(
                    "`config_index_to_node` names {} nodes that are not the module's {num_config_nodes} configurable nodes",
                    map.len()
                )));
            }
            slot_of = map.iter().filter_map(|id| slot.get(id).copied()).collect();
        }
        let mut feat = Vec::new();
        let mut runtimes = Vec::new();
        let mut default_runtime = None;
        for (i, run) in self.runs.iter().enumerate() {
            if run.error {
                continue;
            }
            let runtime = run
                .compute_time_ns
                .ok_or_else(|| input(format!("run {i} has no `compute_time_ns`")))?;
            match task {
                Task::Layout => {
                    let layout = run
                        .layout
                        .as_ref()
                        .ok_or_else(|| input(format!("run {i} has no layout configuration")))?;
                    if layout.len() != num_config_nodes {
                        return Err(input(format!(
                            "run {i} has layouts for {} nodes, the module has {num_config_nodes} configurable nodes",
                            layout.len()
                        )));
                    }
                    let mut rows = vec![[0.0f32; LAYOUT_CONFIG_DIM]; num_config_nodes];
                    for (j, tensors) in layout.iter().enumerate() {
                        let tensor =
                            |t: usize| tensors.get(t).filter(|d| !d.is_empty()).map(Vec::as_slice);
                        rows[slot_of[j]] = layout_config_row(tensor(0), tensor(1), tensor(2));
                    }
                    feat.extend(rows.iter().flatten());
                }
                Task::Tile => {
                    let [kernel, output, input_bounds] = run
                        .tile
                        .as_ref()
                        .ok_or_else(|| input(format!("run {i} has no tile configuration")))?;
                    feat.extend_from_slice(&tile_config_row(kernel, output, input_bounds));
                    if run.is_default {
                        default_runtime.get_or_insert(runtime);
                    }
                }
            }
            runtimes.push(runtime);
        }
        let num_configs = runtimes.len();
        Ok(Configs {
            batch: ConfigBatch {
                task,
                num_configs,
                nodes_per_config: match task {
                    Task::Layout => num_config_nodes,
                    Task::Tile => 1,
                },
                feat,
            },
            runtimes,
            normalizers: match task {
                Task::Tile => Some(vec![default_runtime.unwrap_or(1); num_configs]),
                Task::Layout => None,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout_run(layout: Vec<Vec<Vec<i64>>>, ns: i64) -> Run {
        Run {
            error: false,
            is_default: false,
            compute_time_ns: Some(ns),
            layout: Some(layout),
            tile: None,
        }
    }

    #[test]
    fn layout_slots_follow_config_index_to_node() {
        // Slot 0 is node 9, slot 1 node 4; rows go in node_config_ids order (4, 9).
        let record = Record {
            fingerprint: 0,
            config_index_to_node: Some(vec![9, 4]),
            runs: vec![layout_run(vec![vec![vec![1, 0]], vec![vec![0, 1]]], 7)],
        };
        let c = record.configs(Task::Layout, &[4, 9]).expect("configs");
        let dim = LAYOUT_CONFIG_DIM;
        assert_eq!(
            c.batch.feat[..dim],
            layout_config_row(Some(&[0, 1]), None, None)
        );
        assert_eq!(
            c.batch.feat[dim..],
            layout_config_row(Some(&[1, 0]), None, None)
        );
        assert_eq!(c.runtimes, vec![7]);
        // Nodes that are not the graph's configurable nodes: an error.
        let e = record.configs(Task::Layout, &[4, 8]).expect_err("mismatch");
        assert!(e.to_string().contains("config_index_to_node"), "{e}");
    }

    #[test]
    fn failed_runs_are_left_out_and_a_missing_runtime_is_an_error() {
        let mut failed = layout_run(vec![vec![]], 1);
        failed.error = true;
        failed.compute_time_ns = None;
        let record = Record {
            fingerprint: 0,
            config_index_to_node: None,
            runs: vec![failed, layout_run(vec![vec![]], 5)],
        };
        assert_eq!(
            record
                .configs(Task::Layout, &[3])
                .expect("configs")
                .runtimes,
            vec![5]
        );
        let mut no_time = layout_run(vec![vec![]], 1);
        no_time.compute_time_ns = None;
        let record = Record {
            fingerprint: 0,
            config_index_to_node: None,
            runs: vec![no_time],
        };
        assert!(record.configs(Task::Layout, &[3]).is_err());
    }
}
