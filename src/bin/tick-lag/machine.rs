//! What the measurement ran on and when: cores, kernel, CPU model, UTC date.
//!
//! Everything here is best effort: a file that cannot be read is reported
//! as unknown, never as an error.

use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

/// One line describing the machine, e.g.
/// `machine: 8 cores, kernel 6.8.0, Intel(R) Xeon(R) ...`.
pub fn describe() -> String {
    let cores = std::thread::available_parallelism()
        .map_or_else(|_| "unknown".to_owned(), |n| n.to_string());
    let cpu = cpu_model().unwrap_or_else(|| "CPU model unknown".to_owned());
    let kernel = kernel().unwrap_or_else(|| "unknown".to_owned());
    format!(
        "machine: {cores} cores, {} kernel {kernel}, {cpu}",
        std::env::consts::OS
    )
}

/// The UTC date, `YYYY-MM-DD`.
pub fn today_utc() -> String {
    let days = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_secs() / 86_400);
    let (year, month, day) = civil_from_days(i64::try_from(days).unwrap_or(0));
    format!("{year:04}-{month:02}-{day:02}")
}

fn kernel() -> Option<String> {
    if let Ok(release) = std::fs::read_to_string("/proc/sys/kernel/osrelease") {
        return non_empty(&release);
    }
    let output = Command::new("uname").arg("-r").output().ok()?;
    if !output.status.success() {
        return None;
    }
    non_empty(&String::from_utf8_lossy(&output.stdout))
}

fn cpu_model() -> Option<String> {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    cpuinfo.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        (key.trim() == "model name").then(|| non_empty(value))?
    })
}

fn non_empty(text: &str) -> Option<String> {
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_owned())
}

/// The proleptic Gregorian date of `days` since 1970-01-01 (Howard
/// Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097); // [0, 146096]
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // [0, 399]
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // [0, 365]
    let mp = (5 * doy + 2) / 153; // [0, 11], March first
    let day = doy - (153 * mp + 2) / 5 + 1; // [1, 31]
    let month = if mp < 10 { mp + 3 } else { mp - 9 }; // [1, 12]
    let year = yoe + era * 400 + i64::from(month <= 2);
    // Both are in range by construction.
    (year, month as u32, day as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(59), (1970, 3, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(19_723), (2024, 1, 1));
        assert_eq!(civil_from_days(20_513), (2026, 3, 1));
        assert_eq!(today_utc().len(), 10);
    }
}
