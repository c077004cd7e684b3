//! The `--explain` text of a decision record ([`LayoutReport`]): a report
//! for a compiler engineer. Without `--explain` only the summary lines
//! (decision, warnings, result) are written; `--explain=all` adds every
//! node and the raw model scores.

use std::fmt::Write as _;

use super::record::{Considered, LayoutReport};

/// Appends the report's lines to `out`.
pub(super) fn explain(r: &LayoutReport, explain: bool, all: bool, out: &mut String) {
    let mut lines = header(r);
    lines.extend(considered(r, all));
    lines.extend(r.result.copies.iter().map(|c| format!("  {c}")));
    if let Some(text) = r.measurement.as_ref().and_then(|m| m.report.as_ref()) {
        lines.extend(text.lines().map(str::to_string));
    }
    let by = match r.decision.decided_by {
        "trust region" => "the trust region",
        "model" => "the model",
        other => other,
    };
    lines.push(format!(
        "layout: decision: {}; decided by {by}",
        r.decision.text
    ));
    if all {
        lines.push(format!(
            "layout: scores (lower is predicted faster): the search's best {:.4}, the compiler default {:.4}",
            r.decision.best_score, r.decision.default_score
        ));
    }
    lines.extend(r.warnings.iter().cloned());
    lines.push(result(r));
    for l in &lines {
        if explain || !l.starts_with("  ") && !l.starts_with("layout: considered") {
            let _ = writeln!(out, "{l}");
        }
    }
}

/// The error beside a prediction (` ±27.73%`), or nothing.
pub(super) fn error_text(error_pct: Option<f64>) -> String {
    match error_pct {
        Some(e) => format!(" ±{e:.2}%"),
        None => String::new(),
    }
}

/// A predicted change in percent, negative = faster (`-3.88%`).
pub(super) fn change(predicted_change_pct: f64) -> String {
    if predicted_change_pct.is_infinite() {
        return "faster by an unbounded amount (a score that is not finite)".into();
    }
    format!("{predicted_change_pct:+.2}%")
}

/// `n` with thousands separators (`39,840,000`).
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A count exactly up to a trillion, else a mantissa and a power of ten
/// (`1.83e42`, never capped).
fn count(exact: Option<u64>, log10: f64) -> String {
    match exact {
        Some(n) if n < 1_000_000_000_000 => thousands(n),
        _ => {
            let e = log10.floor();
            format!("{:.2}e{}", 10f64.powf(log10 - e), e as i64)
        }
    }
}

/// What was searched, and the model with its error and threshold (once).
fn header(r: &LayoutReport) -> Vec<String> {
    let free = r.nodes_with_choice;
    let t = &r.trust_region;
    let region = if t.saturated {
        "more than 3.40e38".to_string()
    } else {
        count(t.configurations, t.log10)
    };
    let s = &r.search;
    vec![
        format!(
            "layout: {} configurable nodes, {free} with a choice of layout: {} configurations",
            r.nodes,
            count(r.space.configurations, r.space.log10)
        ),
        match t.radius {
            Some(k) if k < free => format!(
                "layout: trust region (--trust-radius {k}; `all` lifts it): the {region} {} at most {k} of the {free} nodes from the compiler default",
                if t.configurations == Some(1) {
                    "configuration that changes"
                } else {
                    "configurations that change"
                }
            ),
            Some(k) => format!(
                "layout: trust region (--trust-radius {k}): the whole space, {k} reaches all {free} nodes with a choice"
            ),
            None => "layout: trust region: none (--trust-radius all): the whole space".to_string(),
        },
        format!(
            "layout: {} search scored {} configurations in {:.2} s, seed {}{}",
            s.method,
            thousands(s.scored as u64),
            s.seconds,
            s.seed,
            if s.rescored > 0 {
                format!("; the best {} rescored in one model call", s.rescored)
            } else {
                String::new()
            }
        ),
        model(r),
    ]
}

fn model(r: &LayoutReport) -> String {
    let md = &r.model;
    let unit = if md.runtime_calibrated {
        "predicted runtime changes"
    } else {
        "predicted changes of the model's score relative to the default's (the model gives no runtime calibration)"
    };
    let error_sentence = match (md.error_pct, md.log_runtime_resolution) {
        (Some(e), Some(res)) => format!(
            "its error ±{e:.2}% (log_runtime_resolution {res:.3}, measured on its training graphs)"
        ),
        _ => "its error unknown (the model records no log_runtime_resolution)".to_string(),
    };
    let threshold = match (md.threshold_pct, &md.threshold_source) {
        (Some(pct), Some(source)) => format!(
            "a change is applied when predicted faster by at least {pct:.2}% ({source}) plus its copies' price"
        ),
        _ => "measured candidates decide, no threshold".to_string(),
    };
    format!(
        "layout: model: {} ({}); {unit}, negative is faster; {error_sentence}; {threshold}",
        md.name,
        match &md.device {
            Some(d) => format!("trained on {d} runtimes"),
            None => "of no device".to_string(),
        }
    )
}

/// What was considered: the candidates for measurement, each change alone,
/// the nodes relaid out around them and (`--explain=all`) the others.
fn considered(r: &LayoutReport, all: bool) -> Vec<String> {
    let error_text = error_text(r.model.error_pct);
    let mut lines = Vec::new();
    if !r.model_ranked.is_empty() {
        let preds: Vec<String> = r
            .model_ranked
            .iter()
            .map(|k| {
                format!(
                    "rank {}: {}{error_text} ({} nodes changed: {})",
                    k.rank,
                    change(k.predicted_change_pct),
                    k.nodes_changed,
                    k.changes.join(", ")
                )
            })
            .collect();
        lines.push(format!(
            "layout: considered for measurement: the model's {} best configurations against the compiler default: {}",
            r.model_ranked.len(),
            preds.join("; ")
        ));
    }
    if !r.considered.is_empty() {
        lines.push(format!(
            "layout: considered: the search's best configuration changes {} of the {} nodes; each change alone against the compiler default:",
            r.considered.len(),
            r.nodes
        ));
    }
    let threshold = r.model.threshold_pct.unwrap_or_default();
    for c in &r.considered {
        lines.push(change_line(c, &error_text, threshold, all));
    }
    let mut hidden = 0usize;
    for n in &r.other_nodes {
        if n.relaid_out {
            lines.push(format!(
                "  %{}: its own choice is the default ({}); relaid out by the changes around it",
                n.node, n.default
            ));
        } else if all {
            lines.push(format!("  %{}: unchanged ({})", n.node, n.default));
        } else {
            hidden += 1;
        }
    }
    if hidden > 0 {
        lines.push(format!(
            "  ({hidden} unchanged nodes not listed; --explain=all lists every node)"
        ));
    }
    lines
}

/// One change considered, alone against the compiler default.
fn change_line(c: &Considered, error_text: &str, threshold: f64, all: bool) -> String {
    let mut line = format!("  %{}", c.node);
    if let Some(choice) = &c.choice {
        let _ = write!(line, ": {choice} (default {})", c.default);
    }
    match c.predicted_change_pct {
        Some(p) => {
            let _ = write!(line, ": {}{error_text} alone", change(p));
        }
        None => line.push_str(": not scored alone"),
    }
    if c.outcome == "reverted" {
        let _ = write!(
            line,
            " -> reverted by the trust region's per-change check (not faster by {threshold:.2}%)"
        );
    } else if c.outcome == "applied" && !c.changed {
        line.push_str(" -> applied (the layouts it already had)");
    } else {
        let _ = write!(line, " -> {}", c.outcome);
    }
    if all {
        if let (Some(a), Some(b)) = (c.score_alone, c.default_score) {
            let _ = write!(line, " [score {a:.4} alone vs {b:.4} default]");
        }
    }
    line
}

fn result(r: &LayoutReport) -> String {
    let res = &r.result;
    let nodes = if res.chose_same_layouts > 0 {
        format!(
            "{} nodes changed ({} more chose the layouts they had)",
            res.nodes_changed, res.chose_same_layouts
        )
    } else {
        format!("{} nodes changed", res.nodes_changed)
    };
    format!(
        "layout: result: {nodes}, {} copies added, {} instructions relaid out",
        res.copies_added, res.instructions_relaid_out
    )
}

#[cfg(test)]
mod tests {
    use super::{count, thousands};
    use crate::layout::report::space_size;

    /// The space's size in the report: exact up to a trillion, a power of
    /// ten beyond, and never capped (the f32 and u128 maxima are not limits).
    #[test]
    fn a_space_size_is_exact_or_a_power_of_ten_never_capped() {
        let text = |sizes: &[usize]| {
            let (exact, log10) = space_size(sizes);
            count(exact.and_then(|n| u64::try_from(n).ok()), log10)
        };
        assert_eq!(thousands(39_835_810), "39,835,810");
        assert_eq!(thousands(999), "999");
        assert_eq!(text(&[2, 64]), "128");
        assert_eq!(text(&[10; 13]), "1.00e13");
        assert_eq!(space_size(&[10; 13]).0, Some(10u128.pow(13)));
        // 4^200 = 2.58e120: beyond u128 (3.4e38) and f32 (3.4e38).
        let (exact, log10) = space_size(&[4; 200]);
        assert_eq!((text(&[4; 200]).as_str(), exact), ("2.58e120", None));
        assert!((log10 - 200.0 * 4f64.log10()).abs() < 1e-9);
    }
}
