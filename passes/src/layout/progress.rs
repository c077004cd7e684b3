//! Progress on stderr while the pass works: a spinner naming the phase and
//! a bar over the search's budget, shown only when stderr is a terminal so
//! that output to a file or a pipe stays clean.

use std::time::Instant;

/// A spinner on stderr naming the phase of long work; only when `on`.
pub(super) fn phase(on: bool, message: &str) -> Option<Spinner> {
    on.then(|| {
        let b = indicatif::ProgressBar::new_spinner();
        b.set_message(format!("layout: {message}"));
        b.enable_steady_tick(std::time::Duration::from_millis(120));
        Spinner(b)
    })
}

/// A spinner that leaves nothing behind when it ends (on every path).
pub(super) struct Spinner(pub indicatif::ProgressBar);

impl Drop for Spinner {
    fn drop(&mut self) {
        self.0.finish_and_clear();
    }
}

/// A bar over the search's budget, shown once the search has taken more
/// than a second.
pub(super) struct SearchBar {
    on: bool,
    budget: usize,
    start: Instant,
    bar: Option<indicatif::ProgressBar>,
}

impl SearchBar {
    pub(super) fn new(on: bool, budget: usize) -> Self {
        SearchBar {
            on,
            budget,
            start: Instant::now(),
            bar: None,
        }
    }

    /// `done` configurations scored so far.
    pub(super) fn tick(&mut self, done: usize) {
        if !self.on {
            return;
        }
        if self.bar.is_none() && self.start.elapsed().as_secs_f64() > 1.0 {
            let b = indicatif::ProgressBar::new(self.budget as u64);
            if let Ok(style) = indicatif::ProgressStyle::with_template(
                "{msg} [{bar:40}] {pos}/{len} configurations scored ({elapsed})",
            ) {
                b.set_style(style);
            }
            b.set_message("layout: searching");
            self.bar = Some(b);
        }
        if let Some(b) = &self.bar {
            b.set_position(done as u64);
        }
    }

    /// Clears the bar; the seconds since the search started.
    pub(super) fn finish(mut self) -> f64 {
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
        }
        self.start.elapsed().as_secs_f64()
    }
}
