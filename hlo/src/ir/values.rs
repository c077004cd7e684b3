//! Typed values of XLA's structured attributes that are not protobuf
//! messages: replica groups, sharding domains, original values and the
//! module's recovery table. Their text form: [`crate::attrs::xla`].

use crate::ir::xla;
use crate::ir::Module;

/// `[N,M]<=[dims]T(perm)`: an iota device list (the part after `<=`
/// reshapes `iota(N*M)`; `T` transposes it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IotaList {
    pub dims: Vec<i64>,
    pub reshape: Vec<i64>,
    pub perm: Vec<i64>,
}

/// The device list of a collective: `replica_groups={{0,1},{2,3}}` or the
/// iota form `replica_groups=[2,2]<=[4]`.
#[derive(Clone, Debug, PartialEq)]
pub enum ReplicaGroups {
    List(Vec<Vec<i64>>),
    Iota(IotaList),
    /// `mesh['a'=2,'b'=2] {'b'}`: groups over axes of a mesh (newer XLA).
    Mesh(xla::MeshAxesReplicaGroupListProto),
}

/// The entry and exit shardings of a sharding domain.
#[derive(Clone, Debug, PartialEq)]
pub struct DomainShardings {
    pub entry: xla::OpSharding,
    pub exit: xla::OpSharding,
}

/// `origin={...}`: where an instruction's value comes from in the module
/// before optimization (XLA's `OriginalValue`). Either a synthetic call
/// (`{[synthetic_call]}`) or a tree shaped as the instruction's shape:
/// tuples `(a, b)`, leaves `{"name"}`, `{"name" {0,1}}` (an element of a
/// tuple-shaped original) or `{}` (unknown).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OriginalValue {
    pub synthetic_call: bool,
    pub tree: Option<OriginalNode>,
}

/// One node of an [`OriginalValue`] tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OriginalNode {
    /// The original array (instruction name, shape index), if known.
    Leaf(Option<(String, Vec<i64>)>),
    Tuple(Vec<OriginalNode>),
}

/// One original array: the name of the instruction of the unoptimized
/// module that produced it and the shape index in its value
/// (`{"name"}`, `{"name" {0,1}}`; XLA's `OriginalArray`).
pub type OriginalArray = (String, Vec<i64>);

/// `origin_recovery_table={...}` of the module header (XLA's
/// `OriginalValueRecoveryTable`): for each original array an optimization
/// replaced, the array standing in for it in this module and, unless the
/// stand-in *is* the original, the module that recovers the original from
/// it. Entries are sorted by original array (name, then shape index), the
/// order XLA prints and writes them in, and name each original array once.
#[derive(Clone, Debug, Default)]
pub struct RecoveryTable {
    pub entries: Vec<RecoveryEntry>,
}

/// One entry of a [`RecoveryTable`]. Modules have no structural equality:
/// two entries are equal when their recovery modules print the same text
/// (the `PartialEq` lives with the printer, [`crate::print`]).
#[derive(Clone, Debug)]
pub struct RecoveryEntry {
    /// The original array (the key).
    pub old: OriginalArray,
    /// The array that stands in for it.
    pub new: OriginalArray,
    /// The recovery module: its entry computation takes the stand-in and
    /// returns the original. `None` when the stand-in is the original.
    pub module: Option<Box<Module>>,
}

impl PartialEq for RecoveryTable {
    fn eq(&self, o: &Self) -> bool {
        self.entries == o.entries
    }
}
