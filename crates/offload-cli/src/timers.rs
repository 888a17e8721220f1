//! Statistics output in LLVM's layout: numbers with thousands separators and
//! the timer-group table LLVM tools print under `-verbose`.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

/// `1234567` as `1,234,567`.
pub fn with_commas(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[derive(Clone, Copy, Default, Debug)]
struct Times {
    wall: f64,
    user: f64,
    system: f64,
}

fn cpu_times() -> (f64, f64) {
    // getrusage has no safe wrapper in std.
    // SAFETY: getrusage writes into the zeroed struct we pass.
    #[allow(unsafe_code)]
    let usage = unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut u);
        u
    };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (secs(usage.ru_utime), secs(usage.ru_stime))
}

/// A set of named timers, printed like LLVM's `TimerGroup`.
pub struct TimerGroup {
    title: &'static str,
    timers: Vec<(&'static str, Times)>,
}

impl TimerGroup {
    pub fn new(title: &'static str) -> Self {
        TimerGroup { title, timers: Vec::new() }
    }

    /// Runs `f`, recording its wall, user and system time under `name`.
    pub fn time<T>(&mut self, name: &'static str, f: impl FnOnce() -> T) -> (T, Duration) {
        let (u0, s0) = cpu_times();
        let start = Instant::now();
        let out = f();
        let wall = start.elapsed();
        let (u1, s1) = cpu_times();
        self.timers.push((name, Times { wall: wall.as_secs_f64(), user: u1 - u0, system: s1 - s0 }));
        (out, wall)
    }

    pub fn is_empty(&self) -> bool {
        self.timers.is_empty()
    }

    /// The report: columns with a zero total are left out, timers sorted by
    /// wall time, largest first.
    pub fn report(&self) -> String {
        let total = self.timers.iter().fold(Times::default(), |t, (_, x)| Times {
            wall: t.wall + x.wall,
            user: t.user + x.user,
            system: t.system + x.system,
        });
        let line = "===-------------------------------------------------------------------------===";
        let mut out = String::new();
        let pad = 80usize.saturating_sub(self.title.len()) / 2;
        let _ = writeln!(out, "{line}\n{:pad$}{}\n{line}", "", self.title);
        let _ = writeln!(
            out,
            "  Total Execution Time: {:5.4} seconds ({:5.4} wall clock)\n",
            total.user + total.system,
            total.wall
        );
        type Column = (&'static str, fn(&Times) -> f64);
        let cols: Vec<Column> = [
            ("   ---User Time---", (|t: &Times| t.user) as fn(&Times) -> f64),
            ("   --System Time--", |t: &Times| t.system),
            ("   --User+System--", |t: &Times| t.user + t.system),
            ("   ---Wall Time---", |t: &Times| t.wall),
        ]
        .into_iter()
        .filter(|(name, f)| name.contains("Wall") || f(&total) != 0.0)
        .collect();
        for (name, _) in &cols {
            out.push_str(name);
        }
        out.push_str("  --- Name ---\n");
        let mut rows = self.timers.clone();
        rows.sort_by(|a, b| b.1.wall.total_cmp(&a.1.wall));
        rows.push(("Total", total));
        for (name, t) in rows {
            for (_, f) in &cols {
                let v = f(&t);
                let pct = if f(&total) != 0.0 { v * 100.0 / f(&total) } else { 0.0 };
                let _ = write!(out, "  {v:7.4} ({pct:5.1}%)");
            }
            let _ = writeln!(out, "  {name}");
        }
        out.push('\n');
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_separators() {
        assert_eq!(with_commas(0), "0");
        assert_eq!(with_commas(999), "999");
        assert_eq!(with_commas(1000), "1,000");
        assert_eq!(with_commas(23512), "23,512");
        assert_eq!(with_commas(1234567), "1,234,567");
    }

    #[test]
    fn report_layout() {
        let mut g = TimerGroup::new("Timer group for clang offload bundler");
        g.time("Compression time", || std::thread::sleep(Duration::from_millis(2)));
        let r = g.report();
        let lines: Vec<&str> = r.lines().collect();
        assert_eq!(lines[1], format!("{:21}Timer group for clang offload bundler", ""));
        assert!(lines[3].starts_with("  Total Execution Time: "));
        assert!(lines[5].ends_with("---Wall Time---  --- Name ---"));
        assert!(lines[6].ends_with("  Compression time"));
        assert!(lines[7].ends_with("(100.0%)  Total"));
    }
}
