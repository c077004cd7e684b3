//! The decision space: which work XLA:CPU hands to YNNPACK, one compile
//! option for the whole program (`xla_cpu_experimental_ynn_fusion_type`,
//! a comma-separated list of `LIBRARY_FUSION_TYPE_*` names). The candidates
//! are XLA's default (the option unset) and every subset of {DOT, ELTWISE,
//! REDUCE}; docs/xla-cpu.md says what each jaxlib does with them. The
//! Python package (`hlo_opt.xla_cpu.CANDIDATES`) reads this table.

/// The compile option the candidates set.
pub const OPTION: &str = "xla_cpu_experimental_ynn_fusion_type";

/// The YNNPACK fusion kinds, in the order of [`Candidate::kinds`]' bits.
pub const KINDS: [&str; 3] = ["DOT", "ELTWISE", "REDUCE"];

/// One candidate: `None` is XLA's default (the option unset), `Some(bits)`
/// the subset of [`KINDS`] whose bit is set (bit 0: DOT).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Candidate {
    pub kinds: Option<u8>,
}

/// Every candidate, the default first.
pub fn all() -> Vec<Candidate> {
    std::iter::once(Candidate { kinds: None })
        .chain((0..8u8).map(|b| Candidate { kinds: Some(b) }))
        .collect()
}

impl Candidate {
    pub const DEFAULT: Candidate = Candidate { kinds: None };

    pub fn is_default(self) -> bool {
        self.kinds.is_none()
    }

    /// `default`, `ynn:none`, `ynn:dot`, `ynn:dot+reduce`, ...
    pub fn name(self) -> String {
        match self.kinds {
            None => "default".into(),
            Some(0) => "ynn:none".into(),
            Some(b) => {
                let kinds: Vec<String> = KINDS
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| b >> i & 1 == 1)
                    .map(|(_, k)| k.to_lowercase())
                    .collect();
                format!("ynn:{}", kinds.join("+"))
            }
        }
    }

    /// The candidate named `name` ([`Candidate::name`]).
    pub fn from_name(name: &str) -> Option<Candidate> {
        all().into_iter().find(|c| c.name() == name)
    }

    /// The compile options that select it: `(option, value)` pairs, none for
    /// the default.
    pub fn options(self) -> Vec<(String, String)> {
        match self.kinds {
            None => Vec::new(),
            Some(b) => {
                let value: Vec<String> = KINDS
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| b >> i & 1 == 1)
                    .map(|(_, k)| format!("LIBRARY_FUSION_TYPE_{k}"))
                    .collect();
                vec![(OPTION.to_string(), value.join(","))]
            }
        }
    }

    /// Its columns in a model row: is-default, then one per kind.
    pub fn encoding(self) -> [f64; 4] {
        let b = self.kinds.unwrap_or(0);
        [
            f64::from(u8::from(self.is_default())),
            f64::from(b & 1),
            f64::from(b >> 1 & 1),
            f64::from(b >> 2 & 1),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_options_and_encodings_are_one_table() {
        let all = all();
        assert_eq!(all.len(), 9);
        assert_eq!(all[0], Candidate::DEFAULT);
        for c in &all {
            assert_eq!(Candidate::from_name(&c.name()), Some(*c));
        }
        let none = Candidate::from_name("ynn:none").expect("ynn:none");
        assert_eq!(none.options(), vec![(OPTION.to_string(), String::new())]);
        let dr = Candidate::from_name("ynn:dot+reduce").expect("ynn:dot+reduce");
        assert_eq!(
            dr.options()[0].1,
            "LIBRARY_FUSION_TYPE_DOT,LIBRARY_FUSION_TYPE_REDUCE"
        );
        assert_eq!(dr.encoding(), [0.0, 1.0, 0.0, 1.0]);
        assert!(Candidate::DEFAULT.options().is_empty());
    }
}
