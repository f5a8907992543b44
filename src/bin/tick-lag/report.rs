//! Printing the results: an aligned table for people, CSV for scripts.

use crate::summary::Summary;
use std::time::Duration;

/// One row: an instrument at one deadline.
#[derive(Debug, Clone)]
pub struct Row {
    /// Instrument name.
    pub instrument: &'static str,
    /// The deadline the burst was armed with.
    pub deadline: Duration,
    /// The lags of those that fired; `None` if none did.
    pub summary: Option<Summary>,
}

impl Row {
    /// How many timeouts fired.
    pub fn count(&self) -> usize {
        self.summary.map_or(0, |summary| summary.count)
    }
}

/// Lines printed under the table (to stderr in CSV mode), one per note,
/// each prefixed `note: `; empty without notes.
pub fn notes(notes: &[String]) -> String {
    if notes.is_empty() {
        return String::new();
    }
    let mut out = String::from("\n");
    for note in notes {
        out.push_str("note: ");
        out.push_str(note);
        out.push('\n');
    }
    out
}

/// Mean, p50, p99 and max of `summary`, each through `cell`; `none` for
/// each when nothing fired.
fn lag_cells(summary: Option<Summary>, cell: impl Fn(f64) -> String, none: &str) -> [String; 4] {
    match summary {
        Some(s) => [s.mean, s.p50 as f64, s.p99 as f64, s.max as f64].map(cell),
        None => [(); 4].map(|()| none.to_owned()),
    }
}

/// The exact CSV header.
pub const CSV_HEADER: &str = "instrument,deadline_ms,count,mean_us,p50_us,p99_us,max_us";

/// The rows as CSV, header first; lags in µs with one decimal (empty if
/// nothing fired).
pub fn csv(rows: &[Row]) -> String {
    let mut out = String::from(CSV_HEADER);
    out.push('\n');
    for row in rows {
        let [mean, p50, p99, max] = lag_cells(row.summary, |ns| format!("{:.1}", ns / 1e3), "");
        out.push_str(&format!(
            "{},{},{},{mean},{p50},{p99},{max}\n",
            row.instrument,
            row.deadline.as_millis(),
            row.count(),
        ));
    }
    out
}

/// The rows as an aligned table with a header line.
pub fn table(rows: &[Row]) -> String {
    let header = [
        "instrument",
        "deadline",
        "count",
        "mean",
        "p50",
        "p99",
        "max",
    ];
    let mut cells: Vec<[String; 7]> = vec![header.map(str::to_owned)];
    for row in rows {
        let [mean, p50, p99, max] = lag_cells(row.summary, lag_cell, "-");
        cells.push([
            row.instrument.to_owned(),
            format!("{} ms", row.deadline.as_millis()),
            row.count().to_string(),
            mean,
            p50,
            p99,
            max,
        ]);
    }
    let mut widths = [0usize; 7];
    for line in &cells {
        for (width, cell) in widths.iter_mut().zip(line) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for line in &cells {
        let mut text = String::new();
        for (column, (cell, width)) in line.iter().zip(widths).enumerate() {
            if column > 0 {
                text.push_str("   ");
            }
            // Names left, numbers right.
            if column == 0 {
                text.push_str(&format!("{cell:<width$}"));
            } else {
                text.push_str(&format!("{cell:>width$}"));
            }
        }
        out.push_str(text.trim_end());
        out.push('\n');
    }
    out
}

/// A lag as `+0.2 ms (153 µs)`: signed milliseconds with one decimal, then
/// whole microseconds (signed only when negative).
pub fn lag_cell(ns: f64) -> String {
    format!("{:+.1} ms ({:.0} µs)", ns / 1e6, ns / 1e3)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(instrument: &'static str, lags: &[i64]) -> Row {
        Row {
            instrument,
            deadline: Duration::from_millis(20),
            summary: Summary::of(lags),
        }
    }

    #[test]
    fn cells() {
        assert_eq!(lag_cell(153_400.0), "+0.2 ms (153 µs)");
        assert_eq!(lag_cell(2_712_000.0), "+2.7 ms (2712 µs)");
        assert_eq!(lag_cell(-53_000.0), "-0.1 ms (-53 µs)");
    }

    #[test]
    fn notes_follow_a_blank_line_or_are_nothing() {
        assert_eq!(notes(&[]), "");
        let two = ["a".to_owned(), "b".to_owned()];
        assert_eq!(notes(&two), "\nnote: a\nnote: b\n");
    }

    #[test]
    fn csv_and_table_shapes() {
        let rows = [row("wheel-5ms", &[1_000, 2_000]), row("event-loop", &[])];
        assert_eq!(
            csv(&rows),
            "instrument,deadline_ms,count,mean_us,p50_us,p99_us,max_us\n\
             wheel-5ms,20,2,1.5,1.0,2.0,2.0\n\
             event-loop,20,0,,,,\n"
        );
        let table = table(&rows);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(lines[0].starts_with("instrument   deadline"));
        // Aligned: the count column ends at the same character on every line.
        let end_of_count = |line: &str| {
            let chars: Vec<char> = line.chars().collect();
            let deadline_end = line.find(" ms").map(|i| line[..i].chars().count() + 3);
            (chars.len(), deadline_end)
        };
        assert!(end_of_count(lines[1]).1 == end_of_count(lines[2]).1);
    }
}
