//! A one-line progress count on a terminal, for scans of large packages
//! and folders: `scanning torch.whl: 12.3 MiB of 68.3 MiB (18%), 1234/5678
//! members` (by bytes, so that a `.deb`'s one compressed member moves too),
//! rewritten in
//! place, shown only after half a second, and only when standard error is
//! a terminal and the output is not JSON. `OFFLOAD_PROGRESS_AFTER_MS`
//! changes the delay and `OFFLOAD_PROGRESS_EVERY_MS` the shortest time
//! between two redraws (100 ms); the tests set both to 0 to see every
//! step on a small package.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

const DEFAULT_DELAY: Duration = Duration::from_millis(500);
const REDRAW: Duration = Duration::from_millis(100);

pub struct Progress {
    label: String,
    enabled: bool,
    start: Instant,
    delay: Duration,
    every: Duration,
    last: Option<Instant>,
}

/// A duration in milliseconds from the environment variable `name`.
fn millis(name: &str) -> Option<Duration> {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).map(Duration::from_millis)
}

impl Progress {
    /// `wanted`: the command's output allows it (not `--json`).
    pub fn new(label: &str, wanted: bool) -> Self {
        let enabled = wanted && std::io::stderr().is_terminal();
        let delay = millis("OFFLOAD_PROGRESS_AFTER_MS").unwrap_or(DEFAULT_DELAY);
        let every = millis("OFFLOAD_PROGRESS_EVERY_MS").unwrap_or(REDRAW);
        Progress { label: label.to_string(), enabled, start: Instant::now(), delay, every, last: None }
    }

    pub fn tick(&mut self, done: u64, total: Option<u64>, unit: &str) {
        self.draw(|| {
            let count = total.map_or_else(|| done.to_string(), |t| format!("{done}/{t}"));
            format!("{count} {unit}")
        });
    }

    /// A package's progress: bytes of the file read (compressed bytes
    /// inside a compressed member count as read), and members passed.
    pub fn tick_bytes(&mut self, read: u64, size: u64, done: u64, total: Option<u64>) {
        self.draw(|| {
            let percent = (read.min(size) as f64 * 100.0 / size.max(1) as f64).floor();
            let members = total.map_or_else(|| format!("{done} members"), |t| format!("{done}/{t} members"));
            format!(
                "{} of {} ({percent:.0}%), {members}",
                crate::output::human(read.min(size)),
                crate::output::human(size)
            )
        });
    }

    fn draw(&mut self, text: impl FnOnce() -> String) {
        if !self.enabled {
            return;
        }
        let now = Instant::now();
        if now.duration_since(self.start) < self.delay || self.last.is_some_and(|l| now.duration_since(l) < self.every)
        {
            return;
        }
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r\x1b[Kscanning {}: {}", self.label, text());
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
