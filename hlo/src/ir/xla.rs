//! XLA's `HloModuleProto` and every message it reaches, as prost messages.
//!
//! Written by hand from the field names and numbers of XLA's
//! `xla/service/hlo.proto` and `xla/xla_data.proto` as jaxlib 0.10.2 ships
//! them (names and numbers are the interoperability facts; nothing here is
//! copied from XLA's sources). Enumerations are kept as `i32` (the wire
//! form); their names are decoded and printed by [`crate::attrs::xla`].
//!
//! Invariants: every message also implements [`Fields`], the table of its
//! field numbers and message-typed children, generated from the same
//! declaration as the struct, so the unknown-field walk
//! ([`crate::proto::walk`]) and the decoder cannot disagree. Maps are
//! `BTreeMap`s so encoding is deterministic.

use std::collections::BTreeMap;

/// A message's field table: the name and, when message-typed, the child
/// message of each field number it declares (generated with the message).
/// The proto layer walks the wire format with it ([`crate::proto::walk`]).
pub trait Fields {
    const NAME: &'static str;
    /// Field `tag`'s name and, for a message-typed field, `V::child` of the
    /// child message's type; `None` for a number the message does not declare.
    fn field<V: ChildOf>(tag: u32) -> Option<(&'static str, Option<V::Out>)>;
}

/// What a [`Fields`] table gives for a message-typed field: a value made
/// from the child message's type (the proto layer's walker or scanner).
pub trait ChildOf {
    type Out;
    fn child<C: Fields>() -> Self::Out;
}

/// `xla.PrimitiveType`'s numbers for a tuple shape and a buffer shape.
pub const TUPLE_TYPE: i32 = 13;
pub const BUFFER_TYPE: i32 = 34;

/// Declares prost messages and their [`Fields`] tables from one list.
/// Each field: `TAG name: RustType = (prost kind...) [=> ChildMessage];`.
macro_rules! messages {
    ($(
        $(#[$doc:meta])*
        $name:ident { $( $tag:literal $field:ident : $ty:ty = ($($kind:tt)*) $(=> $child:ty)? ; )* }
    )*) => {
        $(
            $(#[$doc])*
            #[derive(Clone, PartialEq, ::prost::Message)]
            pub struct $name {
                $( #[prost($($kind)*, tag = $tag)] pub $field: $ty, )*
            }
            impl Fields for $name {
                const NAME: &'static str = stringify!($name);
                fn field<V: ChildOf>(tag: u32) -> Option<(&'static str, Option<V::Out>)> {
                    match tag {
                        $( $tag => Some((stringify!($field), messages!(@child V $($child)?))), )*
                        _ => None,
                    }
                }
            }
        )*
    };
    (@child $v:ident) => { None };
    (@child $v:ident $c:ty) => { Some($v::child::<$c>()) };
}

messages! {
    /// `xla.PaddingConfig.PaddingConfigDimension`.
    PaddingConfigDimension {
        1 edge_padding_low: i64 = (int64);
        2 edge_padding_high: i64 = (int64);
        3 interior_padding: i64 = (int64);
    }
    PaddingConfig {
        1 dimensions: Vec<PaddingConfigDimension> = (message, repeated) => PaddingConfigDimension;
    }
    TileProto {
        1 dimensions: Vec<i64> = (int64, repeated);
    }
    SplitConfigProto {
        1 dimension: i64 = (int64);
        2 split_indices: Vec<i64> = (int64, repeated);
    }
    LayoutProto {
        1 minor_to_major: Vec<i64> = (int64, repeated);
        9 dim_level_types: Vec<i32> = (int32, repeated);
        13 dim_unique: Vec<bool> = (bool, repeated);
        14 dim_ordered: Vec<bool> = (bool, repeated);
        6 tiles: Vec<TileProto> = (message, repeated) => TileProto;
        16 tail_padding_alignment_in_elements: i64 = (int64);
        7 element_size_in_bits: i64 = (int64);
        8 memory_space: i64 = (int64);
        11 index_primitive_type: i32 = (int32);
        12 pointer_primitive_type: i32 = (int32);
        10 physical_shape: Option<Box<ShapeProto>> = (message, optional, boxed) => ShapeProto;
        15 dynamic_shape_metadata_prefix_bytes: i64 = (int64);
        17 split_configs: Vec<SplitConfigProto> = (message, repeated) => SplitConfigProto;
    }
    ShapeProto {
        2 element_type: i32 = (int32);
        3 dimensions: Vec<i64> = (int64, repeated);
        6 is_dynamic_dimension: Vec<bool> = (bool, repeated);
        4 tuple_shapes: Vec<ShapeProto> = (message, repeated) => ShapeProto;
        5 layout: Option<LayoutProto> = (message, optional) => LayoutProto;
    }
    ProgramShapeProto {
        1 parameters: Vec<ShapeProto> = (message, repeated) => ShapeProto;
        2 result: Option<ShapeProto> = (message, optional) => ShapeProto;
        3 parameter_names: Vec<String> = (string, repeated);
    }
    /// `xla.Payload` (a oneof of `value` and `id`).
    Payload {
        1 value: Option<Vec<u8>> = (bytes = "vec", optional);
        2 id: Option<i64> = (int64, optional);
    }
    OpMetadataProfileInfo {
        1 profile_type: Vec<i32> = (int32, repeated);
        2 relative_speedup: f64 = (double);
        3 profile_source: i32 = (int32);
        4 compilation_event: i32 = (int32);
        5 profile_generation_strategy: i32 = (int32);
    }
    OpMetadata {
        1 op_type: String = (string);
        2 op_name: String = (string);
        3 source_file: String = (string);
        4 source_line: i32 = (int32);
        17 source_end_line: i32 = (int32);
        18 source_column: i32 = (int32);
        19 source_end_column: i32 = (int32);
        5 profile_type: Vec<i32> = (int32, repeated);
        8 size_of_generated_code_in_bytes: i64 = (int64);
        9 size_of_memory_working_set_in_bytes: i64 = (int64);
        10 profile_info: Option<OpMetadataProfileInfo> = (message, optional) => OpMetadataProfileInfo;
        12 deduplicated_name: String = (string);
        15 stack_frame_id: i32 = (int32);
        16 scheduling_name: String = (string);
        20 metadata_payload: Option<Payload> = (message, optional) => Payload;
    }
    ComputationDevice {
        1 replica_device_ids: Vec<i64> = (int64, repeated);
    }
    DeviceAssignmentProto {
        1 replica_count: i32 = (int32);
        2 computation_count: i32 = (int32);
        3 computation_devices: Vec<ComputationDevice> = (message, repeated) => ComputationDevice;
    }
    LiteralProto {
        1 shape: Option<ShapeProto> = (message, optional) => ShapeProto;
        2 preds: Vec<bool> = (bool, repeated);
        30 s1s: Vec<u8> = (bytes = "vec");
        26 s2s: Vec<u8> = (bytes = "vec");
        21 s4s: Vec<u8> = (bytes = "vec");
        15 s8s: Vec<u8> = (bytes = "vec");
        31 u1s: Vec<u8> = (bytes = "vec");
        27 u2s: Vec<u8> = (bytes = "vec");
        22 u4s: Vec<u8> = (bytes = "vec");
        3 u8s: Vec<u8> = (bytes = "vec");
        4 s32s: Vec<i32> = (int32, repeated);
        5 s64s: Vec<i64> = (int64, repeated);
        6 u32s: Vec<u32> = (uint32, repeated);
        7 u64s: Vec<u64> = (uint64, repeated);
        8 f32s: Vec<f32> = (float, repeated);
        9 f64s: Vec<f64> = (double, repeated);
        12 c64s: Vec<f32> = (float, repeated);
        18 c128s: Vec<f64> = (double, repeated);
        10 tuple_literals: Vec<LiteralProto> = (message, repeated) => LiteralProto;
        11 f16s: Vec<u8> = (bytes = "vec");
        13 bf16s: Vec<u8> = (bytes = "vec");
        16 u16s: Vec<u8> = (bytes = "vec");
        17 s16s: Vec<u8> = (bytes = "vec");
        32 f4e2m1fns: Vec<u8> = (bytes = "vec");
        29 f8e3m4s: Vec<u8> = (bytes = "vec");
        23 f8e4m3b11fnuzs: Vec<u8> = (bytes = "vec");
        20 f8e4m3fns: Vec<u8> = (bytes = "vec");
        25 f8e4m3fnuzs: Vec<u8> = (bytes = "vec");
        28 f8e4m3s: Vec<u8> = (bytes = "vec");
        24 f8e5m2fnuzs: Vec<u8> = (bytes = "vec");
        19 f8e5m2s: Vec<u8> = (bytes = "vec");
        33 f8e8m0fnus: Vec<u8> = (bytes = "vec");
        35 f6e3m2fns: Vec<u8> = (bytes = "vec");
        36 f6e2m3fns: Vec<u8> = (bytes = "vec");
        14 sparse_indices: Vec<i64> = (int64, repeated);
        34 dynamic_sizes: Vec<i32> = (int32, repeated);
    }
    WindowDimension {
        1 size: i64 = (int64);
        2 stride: i64 = (int64);
        3 padding_low: i64 = (int64);
        4 padding_high: i64 = (int64);
        5 window_dilation: i64 = (int64);
        6 base_dilation: i64 = (int64);
        7 window_reversal: bool = (bool);
    }
    Window {
        1 dimensions: Vec<WindowDimension> = (message, repeated) => WindowDimension;
    }
    GatherDimensionNumbers {
        1 offset_dims: Vec<i64> = (int64, repeated);
        2 collapsed_slice_dims: Vec<i64> = (int64, repeated);
        3 start_index_map: Vec<i64> = (int64, repeated);
        4 index_vector_dim: i64 = (int64);
        5 operand_batching_dims: Vec<i64> = (int64, repeated);
        6 start_indices_batching_dims: Vec<i64> = (int64, repeated);
    }
    ScatterDimensionNumbers {
        1 update_window_dims: Vec<i64> = (int64, repeated);
        2 inserted_window_dims: Vec<i64> = (int64, repeated);
        3 scatter_dims_to_operand_dims: Vec<i64> = (int64, repeated);
        4 index_vector_dim: i64 = (int64);
        5 input_batching_dims: Vec<i64> = (int64, repeated);
        6 scatter_indices_batching_dims: Vec<i64> = (int64, repeated);
    }
    ConvolutionDimensionNumbers {
        7 input_batch_dimension: i64 = (int64);
        8 input_feature_dimension: i64 = (int64);
        11 input_spatial_dimensions: Vec<i64> = (int64, repeated);
        3 kernel_input_feature_dimension: i64 = (int64);
        4 kernel_output_feature_dimension: i64 = (int64);
        6 kernel_spatial_dimensions: Vec<i64> = (int64, repeated);
        9 output_batch_dimension: i64 = (int64);
        10 output_feature_dimension: i64 = (int64);
        12 output_spatial_dimensions: Vec<i64> = (int64, repeated);
    }
    TensorSparsityConfig {
        1 num_non_zero: i64 = (int64);
        2 block_size: i64 = (int64);
        3 dimension: i64 = (int64);
        4 stride: i64 = (int64);
    }
    SparsityConfig {
        1 lhs: Option<TensorSparsityConfig> = (message, optional) => TensorSparsityConfig;
        2 rhs: Option<TensorSparsityConfig> = (message, optional) => TensorSparsityConfig;
    }
    DotDimensionNumbers {
        1 lhs_contracting_dimensions: Vec<i64> = (int64, repeated);
        2 rhs_contracting_dimensions: Vec<i64> = (int64, repeated);
        3 lhs_batch_dimensions: Vec<i64> = (int64, repeated);
        4 rhs_batch_dimensions: Vec<i64> = (int64, repeated);
    }
    RaggedDotDimensionNumbers {
        1 dot_dimension_numbers: Option<DotDimensionNumbers> = (message, optional) => DotDimensionNumbers;
        2 lhs_ragged_dimensions: Vec<i64> = (int64, repeated);
        3 rhs_group_dimensions: Vec<i64> = (int64, repeated);
    }
    TriangularSolveOptions {
        1 left_side: bool = (bool);
        2 lower: bool = (bool);
        3 unit_diagonal: bool = (bool);
        4 transpose_a: i32 = (int32);
    }
    CholeskyOptions {
        1 lower: bool = (bool);
    }
    FrontendAttributes {
        1 map: BTreeMap<String, String> = (btree_map = "string, string") => ScalarMapEntry;
    }
    Statistic {
        1 stat_name: String = (string);
        2 stat_val: f64 = (double);
    }
    StatisticsViz {
        1 stat_index_to_visualize: i64 = (int64);
        2 statistics: Vec<Statistic> = (message, repeated) => Statistic;
    }
    MeshAxis {
        1 name: String = (string);
        2 size: i64 = (int64);
    }
    IotaTransform {
        1 reshape_dims: Vec<i64> = (int64, repeated);
        2 transpose_perm: Vec<i64> = (int64, repeated);
    }
    MeshProto {
        1 axes: Vec<MeshAxis> = (message, repeated) => MeshAxis;
        2 device_ids: Vec<i64> = (int64, repeated);
        3 iota_transform: Option<IotaTransform> = (message, optional) => IotaTransform;
    }
    SubAxis {
        1 pre_size: i64 = (int64);
        2 size: i64 = (int64);
    }
    AxisRefProto {
        1 mesh_axis_index: i64 = (int64);
        2 sub_axis_info: Option<SubAxis> = (message, optional) => SubAxis;
    }
    DimensionSharding {
        1 axes: Vec<AxisRefProto> = (message, repeated) => AxisRefProto;
        2 is_closed: bool = (bool);
    }
    NamedShardingProto {
        2 mesh: Option<MeshProto> = (message, optional) => MeshProto;
        3 dim_shardings: Vec<DimensionSharding> = (message, repeated) => DimensionSharding;
        4 replicated_axes: Vec<AxisRefProto> = (message, repeated) => AxisRefProto;
        5 unreduced_axes: Vec<AxisRefProto> = (message, repeated) => AxisRefProto;
        7 manual_axes: Vec<AxisRefProto> = (message, repeated) => AxisRefProto;
        6 metadata: Vec<OpMetadata> = (message, repeated) => OpMetadata;
    }
    OpSharding {
        1 r#type: i32 = (int32);
        2 tile_shape: Option<ShapeProto> = (message, optional) => ShapeProto;
        3 tile_assignment_dimensions: Vec<i64> = (int64, repeated);
        4 tile_assignment_devices: Vec<i64> = (int64, repeated);
        5 tuple_shardings: Vec<OpSharding> = (message, repeated) => OpSharding;
        6 replicate_on_last_tile_dim: bool = (bool);
        7 metadata: Vec<OpMetadata> = (message, repeated) => OpMetadata;
        8 last_tile_dims: Vec<i32> = (int32, repeated);
        9 iota_reshape_dims: Vec<i64> = (int64, repeated);
        10 iota_transpose_perm: Vec<i32> = (int32, repeated);
        11 is_shard_group: bool = (bool);
        12 shard_group_id: i64 = (int64);
        13 shard_group_type: i32 = (int32);
        14 named_sharding: Option<NamedShardingProto> = (message, optional) => NamedShardingProto;
    }
    ReplicaGroup {
        1 replica_ids: Vec<i64> = (int64, repeated);
    }
    MeshAxesReplicaGroupListProto {
        1 mesh: Option<MeshProto> = (message, optional) => MeshProto;
        2 axes: Vec<AxisRefProto> = (message, repeated) => AxisRefProto;
    }
    IotaReplicaGroupListProto {
        1 num_replica_groups: i64 = (int64);
        2 num_devices_per_group: i64 = (int64);
        3 iota_reshape_dims: Vec<i64> = (int64, repeated);
        4 iota_transpose_perm: Vec<i32> = (int32, repeated);
    }
    CollectiveDeviceListProto {
        1 replica_groups: Vec<ReplicaGroup> = (message, repeated) => ReplicaGroup;
    }
    SourceTarget {
        1 source: i64 = (int64);
        2 target: i64 = (int64);
    }
    Tolerance {
        1 atol: f64 = (double);
        2 rtol: f64 = (double);
        3 ulps: i64 = (int64);
    }
    /// `xla.ResultAccuracy` (a oneof of `mode` and `tolerance`).
    ResultAccuracy {
        1 mode: Option<i32> = (int32, optional);
        2 tolerance: Option<Tolerance> = (message, optional) => Tolerance;
    }
    PrecisionConfig {
        1 operand_precision: Vec<i32> = (int32, repeated);
        2 algorithm: i32 = (int32);
    }
    ParameterReplication {
        1 replicated_at_leaf_buffers: Vec<bool> = (bool, repeated);
    }
    OutputOperandAliasing {
        1 output_shape_index: Vec<i64> = (int64, repeated);
        2 operand_index: i64 = (int64);
        3 operand_shape_index: Vec<i64> = (int64, repeated);
    }
    OriginalArrayProto {
        1 instruction_name: String = (string);
        2 shape_index: Vec<i64> = (int64, repeated);
    }
    OriginalValueElementProto {
        1 shape_index: Vec<i64> = (int64, repeated);
        2 original_array: Option<OriginalArrayProto> = (message, optional) => OriginalArrayProto;
    }
    OriginalValueProto {
        1 elements: Vec<OriginalValueElementProto> = (message, repeated) => OriginalValueElementProto;
        2 is_synthetic_call: bool = (bool);
    }
    SliceDimensions {
        1 start: i64 = (int64);
        2 limit: i64 = (int64);
        3 stride: i64 = (int64);
    }
    /// `xla.HloInstructionProto`. The `replica_group_list` oneof is three
    /// optional fields; `optional_cross_program_prefetch_index` is an `Option`.
    HloInstructionProto {
        1 name: String = (string);
        2 opcode: String = (string);
        3 shape: Option<ShapeProto> = (message, optional) => ShapeProto;
        7 metadata: Option<OpMetadata> = (message, optional) => OpMetadata;
        8 literal: Option<Box<LiteralProto>> = (message, optional, boxed) => LiteralProto;
        9 parameter_number: i64 = (int64);
        11 fusion_kind: String = (string);
        13 tuple_index: i64 = (int64);
        14 dimensions: Vec<i64> = (int64, repeated);
        15 window: Option<Box<Window>> = (message, optional, boxed) => Window;
        16 convolution_dimension_numbers: Option<Box<ConvolutionDimensionNumbers>> = (message, optional, boxed) => ConvolutionDimensionNumbers;
        50 feature_group_count: i64 = (int64);
        58 batch_group_count: i64 = (int64);
        17 slice_dimensions: Vec<SliceDimensions> = (message, repeated) => SliceDimensions;
        18 exponent_bits: i32 = (int32);
        19 mantissa_bits: i32 = (int32);
        20 dynamic_slice_sizes: Vec<i64> = (int64, repeated);
        21 padding_config: Option<Box<PaddingConfig>> = (message, optional, boxed) => PaddingConfig;
        22 outfeed_config: Vec<u8> = (bytes = "vec");
        23 distribution: i32 = (int32);
        24 epsilon: f32 = (float);
        25 feature_index: i64 = (int64);
        26 channel_id: i64 = (int64);
        27 infeed_config: Vec<u8> = (bytes = "vec");
        28 custom_call_target: String = (string);
        29 outfeed_shape: Option<Box<ShapeProto>> = (message, optional, boxed) => ShapeProto;
        30 dot_dimension_numbers: Option<Box<DotDimensionNumbers>> = (message, optional, boxed) => DotDimensionNumbers;
        90 ragged_dot_dimension_numbers: Option<Box<RaggedDotDimensionNumbers>> = (message, optional, boxed) => RaggedDotDimensionNumbers;
        31 fft_type: i32 = (int32);
        32 fft_length: Vec<i64> = (int64, repeated);
        63 comparison_direction: String = (string);
        33 gather_dimension_numbers: Option<Box<GatherDimensionNumbers>> = (message, optional, boxed) => GatherDimensionNumbers;
        34 gather_slice_sizes: Vec<i64> = (int64, repeated);
        35 id: i64 = (int64);
        36 operand_ids: Vec<i64> = (int64, repeated);
        37 control_predecessor_ids: Vec<i64> = (int64, repeated);
        38 called_computation_ids: Vec<i64> = (int64, repeated);
        40 sharding: Option<Box<OpSharding>> = (message, optional, boxed) => OpSharding;
        43 backend_config: Vec<u8> = (bytes = "vec");
        99 backend_config_payload: Option<Box<Payload>> = (message, optional, boxed) => Payload;
        49 replica_groups: Vec<ReplicaGroup> = (message, repeated) => ReplicaGroup;
        45 all_reduce_id: i64 = (int64);
        71 use_global_device_ids: bool = (bool);
        47 is_host_transfer: bool = (bool);
        60 is_stable: bool = (bool);
        48 scatter_dimension_numbers: Option<Box<ScatterDimensionNumbers>> = (message, optional, boxed) => ScatterDimensionNumbers;
        51 precision_config: Option<Box<PrecisionConfig>> = (message, optional, boxed) => PrecisionConfig;
        52 source_target_pairs: Vec<SourceTarget> = (message, repeated) => SourceTarget;
        54 domain_entry_sharding: Option<Box<OpSharding>> = (message, optional, boxed) => OpSharding;
        55 domain_exit_sharding: Option<Box<OpSharding>> = (message, optional, boxed) => OpSharding;
        56 constrain_layout: bool = (bool);
        57 operand_shapes_with_layout: Vec<ShapeProto> = (message, repeated) => ShapeProto;
        59 triangular_solve_options: Option<Box<TriangularSolveOptions>> = (message, optional, boxed) => TriangularSolveOptions;
        62 cholesky_options: Option<Box<CholeskyOptions>> = (message, optional, boxed) => CholeskyOptions;
        61 parameter_replication: Option<Box<ParameterReplication>> = (message, optional, boxed) => ParameterReplication;
        65 custom_call_has_side_effect: bool = (bool);
        74 output_operand_aliasing: Vec<OutputOperandAliasing> = (message, repeated) => OutputOperandAliasing;
        76 custom_call_schedule: i32 = (int32);
        66 delta: i64 = (int64);
        67 indices_are_sorted: bool = (bool);
        68 frontend_attributes: Option<Box<FrontendAttributes>> = (message, optional, boxed) => FrontendAttributes;
        69 unique_indices: bool = (bool);
        70 rng_algorithm: i32 = (int32);
        72 comparison_type: String = (string);
        73 is_cross_program_prefetch: bool = (bool);
        80 cross_program_prefetch_index: Option<i32> = (int32, optional);
        75 padding_type: i32 = (int32);
        77 custom_call_api_version: i32 = (int32);
        79 async_execution_thread: String = (string);
        81 k: i64 = (int64);
        85 largest: bool = (bool);
        82 statistics_viz: Option<Box<StatisticsViz>> = (message, optional, boxed) => StatisticsViz;
        87 collective_device_list: Option<Box<CollectiveDeviceListProto>> = (message, optional, boxed) => CollectiveDeviceListProto;
        92 iota_collective_device_list: Option<Box<IotaReplicaGroupListProto>> = (message, optional, boxed) => IotaReplicaGroupListProto;
        93 mesh_axes_replica_group_list: Option<Box<MeshAxesReplicaGroupListProto>> = (message, optional, boxed) => MeshAxesReplicaGroupListProto;
        88 original_value: Option<Box<OriginalValueProto>> = (message, optional, boxed) => OriginalValueProto;
        89 is_composite: bool = (bool);
        91 result_accuracy: Option<Box<ResultAccuracy>> = (message, optional, boxed) => ResultAccuracy;
        94 is_reverse: bool = (bool);
        95 num_carries: i64 = (int64);
        96 is_associative: i32 = (int32);
        97 conv_kind: i32 = (int32);
        98 sparsity_config: Option<Box<SparsityConfig>> = (message, optional, boxed) => SparsityConfig;
    }
    HloComputationProto {
        1 name: String = (string);
        2 instructions: Vec<HloInstructionProto> = (message, repeated) => HloInstructionProto;
        4 program_shape: Option<ProgramShapeProto> = (message, optional) => ProgramShapeProto;
        5 id: i64 = (int64);
        6 root_id: i64 = (int64);
        7 is_fusion_computation: bool = (bool);
        8 execution_thread: String = (string);
    }
    InstructionSequence {
        1 instruction_ids: Vec<i64> = (int64, repeated);
    }
    HloScheduleProto {
        1 sequences: BTreeMap<i64, InstructionSequence> = (btree_map = "int64, message") => SequenceMapEntry;
    }
    AliasEntryProto {
        1 output_shape_index: Vec<i64> = (int64, repeated);
        2 parameter_number: i64 = (int64);
        3 parameter_shape_index: Vec<i64> = (int64, repeated);
        4 kind: i32 = (int32);
    }
    HloInputOutputAliasProto {
        1 entries: Vec<AliasEntryProto> = (message, repeated) => AliasEntryProto;
    }
    BufferDonorEntryProto {
        1 parameter_number: i64 = (int64);
        2 parameter_shape_index: Vec<i64> = (int64, repeated);
    }
    HloBufferDonorProto {
        1 entries: Vec<BufferDonorEntryProto> = (message, repeated) => BufferDonorEntryProto;
    }
    CrossProgramPrefetch {
        1 parameter: i64 = (int64);
        2 index: Vec<i64> = (int64, repeated);
        3 offset: i64 = (int64);
    }
    FileLocation {
        1 file_name_id: i32 = (int32);
        2 function_name_id: i32 = (int32);
        3 line: i32 = (int32);
        5 end_line: i32 = (int32);
        4 column: i32 = (int32);
        6 end_column: i32 = (int32);
    }
    StackFrame {
        1 file_location_id: i32 = (int32);
        2 parent_frame_id: i32 = (int32);
    }
    StackFrameIndexProto {
        1 file_names: Vec<String> = (string, repeated);
        2 function_names: Vec<String> = (string, repeated);
        3 file_locations: Vec<FileLocation> = (message, repeated) => FileLocation;
        4 stack_frames: Vec<StackFrame> = (message, repeated) => StackFrame;
    }
    ModuleProfileInfo {
        1 profile_type: i32 = (int32);
        2 relative_speedup: f64 = (double);
        3 profile_source: i32 = (int32);
        4 compilation_event: i32 = (int32);
        5 fingerprint: String = (string);
        6 profile_generation_strategy: i32 = (int32);
        7 original_changelist: i64 = (int64);
        8 changelist: i64 = (int64);
    }
    RecoveryEntry {
        1 old_original_array: Option<OriginalArrayProto> = (message, optional) => OriginalArrayProto;
        2 new_original_array: Option<OriginalArrayProto> = (message, optional) => OriginalArrayProto;
        3 recovery_module: Option<Box<HloModuleProto>> = (message, optional, boxed) => HloModuleProto;
    }
    OriginalValueRecoveryTableProto {
        1 entries: Vec<RecoveryEntry> = (message, repeated) => RecoveryEntry;
    }
    HloModuleProto {
        1 name: String = (string);
        2 entry_computation_name: String = (string);
        6 entry_computation_id: i64 = (int64);
        3 computations: Vec<HloComputationProto> = (message, repeated) => HloComputationProto;
        4 host_program_shape: Option<ProgramShapeProto> = (message, optional) => ProgramShapeProto;
        5 id: i64 = (int64);
        23 pjrt_id: Option<i64> = (int64, optional);
        7 schedule: Option<HloScheduleProto> = (message, optional) => HloScheduleProto;
        8 input_output_alias: Option<HloInputOutputAliasProto> = (message, optional) => HloInputOutputAliasProto;
        22 payloads: Vec<Vec<u8>> = (bytes = "vec", repeated);
        18 buffer_donor: Option<HloBufferDonorProto> = (message, optional) => HloBufferDonorProto;
        10 cross_program_prefetches: Vec<CrossProgramPrefetch> = (message, repeated) => CrossProgramPrefetch;
        11 is_dynamic: bool = (bool);
        12 spmd_output_sharding: Option<OpSharding> = (message, optional) => OpSharding;
        14 spmd_parameters_shardings: Vec<OpSharding> = (message, repeated) => OpSharding;
        16 use_auto_spmd_partitioning: bool = (bool);
        13 profile_info: Vec<ModuleProfileInfo> = (message, repeated) => ModuleProfileInfo;
        15 device_assignment: Option<DeviceAssignmentProto> = (message, optional) => DeviceAssignmentProto;
        17 stack_frame_index: Option<StackFrameIndexProto> = (message, optional) => StackFrameIndexProto;
        19 frontend_attributes: Option<FrontendAttributes> = (message, optional) => FrontendAttributes;
        20 original_value_recovery_table: Option<OriginalValueRecoveryTableProto> = (message, optional) => OriginalValueRecoveryTableProto;
        21 device_type: String = (string);
    }
}

/// The entry of a `map<string, string>` (or of any map with scalar values):
/// key 1, value 2. Only a field table (maps decode into `BTreeMap`s).
pub struct ScalarMapEntry;

impl Fields for ScalarMapEntry {
    const NAME: &'static str = "MapEntry";
    fn field<V: ChildOf>(tag: u32) -> Option<(&'static str, Option<V::Out>)> {
        match tag {
            1 => Some(("key", None)),
            2 => Some(("value", None)),
            _ => None,
        }
    }
}

/// The entry of `HloScheduleProto.sequences`: key 1 (computation id),
/// value 2 (an [`InstructionSequence`]).
pub struct SequenceMapEntry;

impl Fields for SequenceMapEntry {
    const NAME: &'static str = "SequencesEntry";
    fn field<V: ChildOf>(tag: u32) -> Option<(&'static str, Option<V::Out>)> {
        match tag {
            1 => Some(("key", None)),
            2 => Some(("value", Some(V::child::<InstructionSequence>()))),
            _ => None,
        }
    }
}
