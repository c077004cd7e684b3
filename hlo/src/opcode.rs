//! XLA opcodes: the closed set of operations HLO text may name.
//!
//! Names follow XLA's `HloOpcodeString` spelling (`Clz` is `count-leading-zeros`,
//! `OptBarrier` is `opt-barrier`). This numbering is ours;
//! the TpuGraphs opcode ids live in the cost model's featurizer.

macro_rules! opcodes {
    ($($variant:ident => $name:literal,)*) => {
        /// An HLO opcode.
        #[derive(Copy, Clone, PartialEq, Eq, Hash, Debug, PartialOrd, Ord)]
        pub enum Opcode {
            $($variant,)*
        }

        impl Opcode {
            /// Every opcode, in declaration order.
            pub const ALL: &'static [Opcode] = &[$(Opcode::$variant,)*];

            /// XLA's text spelling.
            pub fn name(self) -> &'static str {
                match self {
                    $(Opcode::$variant => $name,)*
                }
            }

            /// Parses XLA's text spelling; `None` for an unknown opcode.
            pub fn from_name(s: &str) -> Option<Opcode> {
                Some(match s {
                    $($name => Opcode::$variant,)*
                    _ => return None,
                })
            }
        }
    };
}

opcodes! {
    Abs => "abs",
    Acos => "acos",
    Acosh => "acosh",
    Add => "add",
    AddDependency => "add-dependency",
    AfterAll => "after-all",
    AllGather => "all-gather",
    AllGatherDone => "all-gather-done",
    AllGatherStart => "all-gather-start",
    AllReduce => "all-reduce",
    AllReduceDone => "all-reduce-done",
    AllReduceStart => "all-reduce-start",
    AllToAll => "all-to-all",
    Asin => "asin",
    Asinh => "asinh",
    And => "and",
    AsyncDone => "async-done",
    AsyncStart => "async-start",
    AsyncUpdate => "async-update",
    Atan2 => "atan2",
    Atanh => "atanh",
    BatchNormGrad => "batch-norm-grad",
    BatchNormInference => "batch-norm-inference",
    BatchNormTraining => "batch-norm-training",
    Bitcast => "bitcast",
    BitcastConvert => "bitcast-convert",
    Broadcast => "broadcast",
    Call => "call",
    Cbrt => "cbrt",
    Ceil => "ceil",
    Cholesky => "cholesky",
    Clamp => "clamp",
    Clz => "count-leading-zeros",
    CollectiveBroadcast => "collective-broadcast",
    CollectivePermute => "collective-permute",
    CollectivePermuteDone => "collective-permute-done",
    CollectivePermuteStart => "collective-permute-start",
    Compare => "compare",
    Complex => "complex",
    Concatenate => "concatenate",
    Conditional => "conditional",
    Constant => "constant",
    Convert => "convert",
    Convolution => "convolution",
    Copy => "copy",
    CopyDone => "copy-done",
    CopyStart => "copy-start",
    Cosine => "cosine",
    Cosh => "cosh",
    CustomCall => "custom-call",
    Divide => "divide",
    Domain => "domain",
    Dot => "dot",
    DynamicReshape => "dynamic-reshape",
    DynamicSlice => "dynamic-slice",
    DynamicUpdateSlice => "dynamic-update-slice",
    Erf => "erf",
    Exponential => "exponential",
    ExponentialMinusOne => "exponential-minus-one",
    Fft => "fft",
    Floor => "floor",
    Fusion => "fusion",
    Gather => "gather",
    GetDimensionSize => "get-dimension-size",
    GetTupleElement => "get-tuple-element",
    Imag => "imag",
    Infeed => "infeed",
    Iota => "iota",
    IsFinite => "is-finite",
    Log => "log",
    LogPlusOne => "log-plus-one",
    Logistic => "logistic",
    Map => "map",
    Maximum => "maximum",
    Minimum => "minimum",
    Multiply => "multiply",
    Negate => "negate",
    Not => "not",
    OptBarrier => "opt-barrier",
    Or => "or",
    Outfeed => "outfeed",
    Pad => "pad",
    Parameter => "parameter",
    PartitionId => "partition-id",
    Popcnt => "popcnt",
    Power => "power",
    RaggedAllToAll => "ragged-all-to-all",
    RaggedDot => "ragged-dot",
    Real => "real",
    Recv => "recv",
    RecvDone => "recv-done",
    Reduce => "reduce",
    ReducePrecision => "reduce-precision",
    ReduceScatter => "reduce-scatter",
    ReduceWindow => "reduce-window",
    Remainder => "remainder",
    ReplicaId => "replica-id",
    Reshape => "reshape",
    Reverse => "reverse",
    Rng => "rng",
    RngBitGenerator => "rng-bit-generator",
    RngGetAndUpdateState => "rng-get-and-update-state",
    RoundNearestAfz => "round-nearest-afz",
    RoundNearestEven => "round-nearest-even",
    Scan => "scan",
    Rsqrt => "rsqrt",
    ScaledDot => "scaled-dot",
    Scatter => "scatter",
    Select => "select",
    SelectAndScatter => "select-and-scatter",
    Send => "send",
    SendDone => "send-done",
    SetDimensionSize => "set-dimension-size",
    ShiftLeft => "shift-left",
    ShiftRightArithmetic => "shift-right-arithmetic",
    ShiftRightLogical => "shift-right-logical",
    Sign => "sign",
    Sine => "sine",
    Sinh => "sinh",
    Slice => "slice",
    Sort => "sort",
    Sqrt => "sqrt",
    StochasticConvert => "stochastic-convert",
    Subtract => "subtract",
    Tan => "tan",
    Tanh => "tanh",
    Topk => "topk",
    Transpose => "transpose",
    TriangularSolve => "triangular-solve",
    Tuple => "tuple",
    While => "while",
    Xor => "xor",
}

impl std::fmt::Display for Opcode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl Opcode {
    /// Whether XLA's async shorthand (`<op>-start` / `-update` / `-done`)
    /// may wrap this opcode: not send / recv (asynchronous already) nor an
    /// opcode with async opcodes of its own (`all-reduce-start`, ...), nor
    /// parameter / constant (their parentheses hold no operands).
    pub fn has_async_shorthand(self) -> bool {
        use Opcode::*;
        !matches!(
            self,
            Send | Recv | AllGather | AllReduce | CollectivePermute | Copy | Parameter | Constant
        )
    }

    /// Elementwise operations whose output shape equals each operand's shape
    /// (ignoring element type for compare/convert and friends).
    pub fn is_elementwise(self) -> bool {
        use Opcode::*;
        matches!(
            self,
            Abs | Add
                | And
                | Atan2
                | BitcastConvert
                | Cbrt
                | Ceil
                | Clamp
                | Clz
                | Compare
                | Complex
                | Convert
                | Copy
                | Cosine
                | Divide
                | Erf
                | Exponential
                | ExponentialMinusOne
                | Floor
                | Imag
                | IsFinite
                | Log
                | LogPlusOne
                | Logistic
                | Maximum
                | Minimum
                | Multiply
                | Negate
                | Not
                | Or
                | Popcnt
                | Power
                | Real
                | ReducePrecision
                | Remainder
                | RoundNearestAfz
                | RoundNearestEven
                | Rsqrt
                | Select
                | ShiftLeft
                | ShiftRightArithmetic
                | ShiftRightLogical
                | Sign
                | Sine
                | Sqrt
                | StochasticConvert
                | Subtract
                | Tan
                | Tanh
                | Xor
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for &op in Opcode::ALL {
            assert_eq!(Opcode::from_name(op.name()), Some(op));
        }
        assert_eq!(Opcode::from_name("no-such-op"), None);
    }
}
