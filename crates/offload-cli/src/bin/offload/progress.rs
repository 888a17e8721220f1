//! A one-line progress count on a terminal, for scans of large packages
//! and folders: `scanning torch.whl: 1234/5678 members`, rewritten in
//! place, shown only after half a second, and only when standard error is
//! a terminal and the output is not JSON. `OFFLOAD_PROGRESS_AFTER_MS`
//! changes the delay (the tests set 0 to see it on a small package).

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

const DEFAULT_DELAY: Duration = Duration::from_millis(500);
const REDRAW: Duration = Duration::from_millis(100);

pub struct Progress {
    label: String,
    enabled: bool,
    start: Instant,
    delay: Duration,
    last: Option<Instant>,
}

impl Progress {
    /// `wanted`: the command's output allows it (not `--json`).
    pub fn new(label: &str, wanted: bool) -> Self {
        let enabled = wanted && std::io::stderr().is_terminal();
        let delay = std::env::var("OFFLOAD_PROGRESS_AFTER_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .map_or(DEFAULT_DELAY, Duration::from_millis);
        Progress { label: label.to_string(), enabled, start: Instant::now(), delay, last: None }
    }

    pub fn tick(&mut self, done: u64, total: Option<u64>, unit: &str) {
        if !self.enabled {
            return;
        }
        let now = Instant::now();
        if now.duration_since(self.start) < self.delay || self.last.is_some_and(|l| now.duration_since(l) < REDRAW) {
            return;
        }
        let count = total.map_or_else(|| done.to_string(), |t| format!("{done}/{t}"));
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r\x1b[Kscanning {}: {count} {unit}", self.label);
        let _ = err.flush();
        self.last = Some(now);
    }

    /// Erases the line, so that other messages start on a clean one; the
    /// next tick draws it again.
    pub fn clear(&mut self) {
        if self.last.take().is_some() {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[K");
            let _ = err.flush();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.clear();
    }
}
