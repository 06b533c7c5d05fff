//! What a scan is doing, on stderr, while it does it: one spinner line that says the step
//! (listing claims, page by page; the census's two listings; the second looks), only when stderr
//! is a terminal, cleared before the report and the summary are written. A pipe or a log gets
//! nothing from it.

use std::time::Duration;

/// The scan's progress line; hidden unless stderr is a terminal.
#[derive(Clone, Debug)]
pub struct Progress(indicatif::ProgressBar);

impl Progress {
    /// On stderr when it is a terminal, else hidden.
    pub fn on_terminal() -> Progress {
        use std::io::IsTerminal;
        if std::io::stderr().is_terminal() {
            let bar = indicatif::ProgressBar::new_spinner();
            bar.enable_steady_tick(Duration::from_millis(120));
            Progress(bar)
        } else {
            Progress::hidden()
        }
    }

    /// Nothing shown (tests, pipes).
    pub fn hidden() -> Progress {
        Progress(indicatif::ProgressBar::hidden())
    }

    /// The step now under way.
    pub(crate) fn step(&self, what: impl Into<std::borrow::Cow<'static, str>>) {
        self.0.set_message(what);
    }

    /// Removes the line (before the report is written).
    pub(crate) fn done(&self) {
        self.0.finish_and_clear();
    }
}
