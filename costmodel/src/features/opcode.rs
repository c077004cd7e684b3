//! TpuGraphs opcode ids (`node_opcode`), as `tpu_graphs/process_data/xla/hlo_opcode.h`
//! numbers them.
//!
//! Invariants: the ids are the dataset's and never change; an opcode the
//! TpuGraphs list does not know maps to id 0, exactly as the dataset's
//! `StringToOpcodeID` does (the documented fallback for newer XLA opcodes).

use hlo::Opcode;

/// The id TpuGraphs gives an opcode it does not know.
pub const UNKNOWN_OPCODE_ID: u8 = 0;

/// TpuGraphs' opcode list: `(XLA spelling, id)`, including the two
/// tombstoned opcodes (`trace` = 97, `tuple-select` = 101). Spellings are the
/// ones the dataset used (`count-leading-zeros`, not `clz`).
pub const TPUGRAPHS_OPCODES: &[(&str, u8)] = &[
    ("abs", 1),
    ("add", 2),
    ("add-dependency", 3),
    ("after-all", 4),
    ("all-reduce", 5),
    ("all-to-all", 6),
    ("atan2", 7),
    ("batch-norm-grad", 8),
    ("batch-norm-inference", 9),
    ("batch-norm-training", 10),
    ("bitcast", 11),
    ("bitcast-convert", 12),
    ("broadcast", 13),
    ("call", 14),
    ("ceil", 15),
    ("cholesky", 16),
    ("clamp", 17),
    ("collective-permute", 18),
    ("count-leading-zeros", 19),
    ("compare", 20),
    ("complex", 21),
    ("concatenate", 22),
    ("conditional", 23),
    ("constant", 24),
    ("convert", 25),
    ("convolution", 26),
    ("copy", 27),
    ("copy-done", 28),
    ("copy-start", 29),
    ("cosine", 30),
    ("custom-call", 31),
    ("divide", 32),
    ("domain", 33),
    ("dot", 34),
    ("dynamic-slice", 35),
    ("dynamic-update-slice", 36),
    ("exponential", 37),
    ("exponential-minus-one", 38),
    ("fft", 39),
    ("floor", 40),
    ("fusion", 41),
    ("gather", 42),
    ("get-dimension-size", 43),
    ("set-dimension-size", 44),
    ("get-tuple-element", 45),
    ("imag", 46),
    ("infeed", 47),
    ("iota", 48),
    ("is-finite", 49),
    ("log", 50),
    ("log-plus-one", 51),
    ("and", 52),
    ("not", 53),
    ("or", 54),
    ("xor", 55),
    ("map", 56),
    ("maximum", 57),
    ("minimum", 58),
    ("multiply", 59),
    ("negate", 60),
    ("outfeed", 61),
    ("pad", 62),
    ("parameter", 63),
    ("partition-id", 64),
    ("popcnt", 65),
    ("power", 66),
    ("real", 67),
    ("recv", 68),
    ("recv-done", 69),
    ("reduce", 70),
    ("reduce-precision", 71),
    ("reduce-window", 72),
    ("remainder", 73),
    ("replica-id", 74),
    ("reshape", 75),
    ("reverse", 76),
    ("rng", 77),
    ("rng-get-and-update-state", 78),
    ("rng-bit-generator", 79),
    ("round-nearest-afz", 80),
    ("rsqrt", 81),
    ("scatter", 82),
    ("select", 83),
    ("select-and-scatter", 84),
    ("send", 85),
    ("send-done", 86),
    ("shift-left", 87),
    ("shift-right-arithmetic", 88),
    ("shift-right-logical", 89),
    ("sign", 90),
    ("sine", 91),
    ("slice", 92),
    ("sort", 93),
    ("sqrt", 94),
    ("subtract", 95),
    ("tanh", 96),
    ("trace", 97),
    ("transpose", 98),
    ("triangular-solve", 99),
    ("tuple", 100),
    ("tuple-select", 101),
    ("while", 102),
    ("cbrt", 103),
    ("all-gather", 104),
    ("collective-permute-start", 105),
    ("collective-permute-done", 106),
    ("logistic", 107),
    ("dynamic-reshape", 108),
    ("all-reduce-start", 109),
    ("all-reduce-done", 110),
    ("reduce-scatter", 111),
    ("all-gather-start", 112),
    ("all-gather-done", 113),
    ("opt-barrier", 114),
    ("async-start", 115),
    ("async-update", 116),
    ("async-done", 117),
    ("round-nearest-even", 118),
    ("stochastic-convert", 119),
    ("tan", 120),
];

/// TpuGraphs id of an opcode spelled the way XLA prints it; 0 if unknown.
pub fn opcode_id_by_name(name: &str) -> u8 {
    // `clz` is today's spelling of the dataset's `count-leading-zeros`.
    let name = if name == "clz" {
        "count-leading-zeros"
    } else {
        name
    };
    TPUGRAPHS_OPCODES
        .iter()
        .find(|(n, _)| *n == name)
        .map_or(UNKNOWN_OPCODE_ID, |&(_, id)| id)
}

/// TpuGraphs id of an opcode; [`UNKNOWN_OPCODE_ID`] for opcodes newer than the dataset.
pub fn opcode_id(op: Opcode) -> u8 {
    // A table indexed by our enum, built once; the enum is small and closed.
    static TABLE: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    let table = TABLE.get_or_init(|| {
        let mut t = vec![UNKNOWN_OPCODE_ID; Opcode::ALL.len()];
        for &op in Opcode::ALL {
            t[op as usize] = opcode_id_by_name(op.name());
        }
        t
    });
    table[op as usize]
}

/// The XLA spelling of a TpuGraphs opcode id, `None` for 0 and unused ids.
pub fn opcode_name(id: u8) -> Option<&'static str> {
    TPUGRAPHS_OPCODES
        .iter()
        .find(|&&(_, i)| i == id)
        .map(|&(n, _)| n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_the_datasets() {
        assert_eq!(opcode_id(Opcode::Parameter), 63);
        assert_eq!(opcode_id(Opcode::Convolution), 26);
        assert_eq!(opcode_id(Opcode::Dot), 34);
        assert_eq!(opcode_id(Opcode::Reshape), 75);
        assert_eq!(opcode_id(Opcode::Fusion), 41);
        assert_eq!(opcode_id(Opcode::Transpose), 98);
        assert_eq!(opcode_id(Opcode::Tan), 120);
    }

    #[test]
    fn clz_is_count_leading_zeros() {
        assert_eq!(opcode_id(Opcode::Clz), 19);
        assert_eq!(opcode_name(19), Some("count-leading-zeros"));
    }

    #[test]
    fn opcodes_newer_than_the_dataset_map_to_zero() {
        assert_eq!(opcode_id(Opcode::Erf), UNKNOWN_OPCODE_ID);
        assert_eq!(opcode_id(Opcode::Topk), UNKNOWN_OPCODE_ID);
        assert_eq!(opcode_id_by_name("no-such-op"), UNKNOWN_OPCODE_ID);
    }

    #[test]
    fn ids_are_unique_and_tombstones_kept() {
        let mut ids: Vec<u8> = TPUGRAPHS_OPCODES.iter().map(|&(_, i)| i).collect();
        ids.sort_unstable();
        let n = ids.len();
        ids.dedup();
        assert_eq!(ids.len(), n);
        assert_eq!(ids, (1..=120).collect::<Vec<u8>>());
    }
}
