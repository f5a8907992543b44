//! Rows, the table and the CSV.

use crate::cases::Case;
use crate::clients::Peer;
use crate::lateness::Burst;
use crate::measure::{percentile, Sample};
use crate::server::Totals;
use std::time::Duration;

/// One measured run and, with the built-in server, what the server did.
#[derive(Debug, Clone)]
pub struct Run {
    pub sample: Sample,
    pub server: Option<Totals>,
}

impl Run {
    fn requests(&self) -> f64 {
        self.sample.requests.max(1) as f64
    }

    fn wall(&self) -> f64 {
        self.sample.span.wall.as_secs_f64()
    }

    pub fn req_per_s(&self) -> f64 {
        self.sample.requests as f64 / self.wall()
    }

    pub fn mb_per_s(&self) -> f64 {
        self.sample.body_bytes as f64 / 1e6 / self.wall()
    }

    /// Process CPU (every thread, the built-in server's too) per request.
    pub fn cpu_us(&self) -> f64 {
        self.sample.span.usage.cpu.as_secs_f64() * 1e6 / self.requests()
    }

    /// Process context switches per request.
    pub fn csw(&self) -> f64 {
        self.sample.span.usage.switches as f64 / self.requests()
    }

    /// The built-in server's CPU per request it answered (its connection
    /// threads' own `RUSAGE_THREAD`, over the whole run, warm-up included).
    pub fn server_cpu_us(&self) -> Option<f64> {
        let totals = self.server?;
        let usage = totals.usage?;
        (totals.served > 0).then(|| usage.cpu.as_secs_f64() * 1e6 / totals.served as f64)
    }

    pub fn server_csw(&self) -> Option<f64> {
        let totals = self.server?;
        let usage = totals.usage?;
        (totals.served > 0).then(|| usage.switches as f64 / totals.served as f64)
    }

    /// The client's share: process CPU minus the server's, when known.
    pub fn client_cpu_us(&self) -> f64 {
        self.cpu_us() - self.server_cpu_us().unwrap_or(0.0)
    }

    pub fn client_csw(&self) -> f64 {
        self.csw() - self.server_csw().unwrap_or(0.0)
    }

    pub fn connections(&self) -> Option<usize> {
        self.server.map(|t| t.accepted)
    }

    fn latency_us(&self, q: f64) -> Option<f64> {
        let mut sorted = self.sample.latencies_ns.clone();
        sorted.sort_unstable();
        percentile(&sorted, q).map(|ns| ns as f64 / 1e3)
    }
}

/// A case for one client over all its runs.
pub struct Row {
    pub case: Case,
    pub peer: Peer,
    pub runs: Vec<Run>,
    pub failed: usize,
}

impl Row {
    /// The median run by throughput, and (slowest − fastest) / median.
    pub fn median(&self) -> Option<(&Run, f64)> {
        let mut sorted: Vec<&Run> = self.runs.iter().collect();
        sorted.sort_by(|a, b| a.req_per_s().total_cmp(&b.req_per_s()));
        let median = *sorted.get(sorted.len() / 2)?;
        let spread =
            (sorted[sorted.len() - 1].req_per_s() - sorted[0].req_per_s()) / median.req_per_s();
        Some((median, spread))
    }

    fn how(&self) -> &'static str {
        if self.case == Case::InFlightTasks {
            "64 tokio tasks"
        } else if self.case == Case::InFlight {
            self.peer.in_flight_how()
        } else {
            self.peer.blocking_how()
        }
    }

    fn fields(&self) -> Vec<String> {
        let f = |v: f64, prec: usize| format!("{v:.prec$}");
        let opt = |v: Option<f64>, prec: usize| v.map_or("-".to_string(), |v| f(v, prec));
        let mut out = vec![
            self.case.name().to_string(),
            self.peer.name().to_string(),
            self.how().to_string(),
            format!("{}/{}", self.runs.len(), self.runs.len() + self.failed),
        ];
        match self.median() {
            None => out.extend(std::iter::repeat_n("failed".to_string(), COLUMNS.len() - 4)),
            Some((run, spread)) => out.extend([
                f(run.req_per_s(), 0),
                f(spread * 100.0, 1),
                if self.case.is_body() {
                    f(run.mb_per_s(), 1)
                } else {
                    "-".to_string()
                },
                opt(run.latency_us(0.5), 1),
                opt(run.latency_us(0.99), 1),
                f(run.cpu_us(), 2),
                opt(run.server_cpu_us(), 2),
                f(run.client_cpu_us(), 2),
                f(run.client_csw(), 2),
                run.connections().map_or("-".to_string(), |c| c.to_string()),
                // CSV only from here on.
                f(run.csw(), 2),
                opt(run.server_csw(), 2),
                run.sample.requests.to_string(),
                format!("{:.3}", run.sample.span.wall.as_secs_f64()),
            ]),
        }
        out
    }
}

const COLUMNS: [&str; 18] = [
    "case",
    "client",
    "driven",
    "runs",
    "req_per_s",
    "spread_pct",
    "mb_per_s",
    "p50_us",
    "p99_us",
    "cpu_us_per_req",
    "server_cpu_us",
    "client_cpu_us",
    "client_csw_per_req",
    "conns",
    "csw_per_req",
    "server_csw_per_req",
    "requests",
    "wall_s",
];

/// Columns the table shows (the CSV has them all).
const TABLE_COLUMNS: usize = 14;

pub fn table(rows: &[Row]) -> String {
    let cells: Vec<Vec<String>> = rows.iter().map(Row::fields).collect();
    let header: Vec<String> = COLUMNS[..TABLE_COLUMNS]
        .iter()
        .map(|s| s.to_string())
        .collect();
    align(&header, &cells, 3)
}

pub fn csv(rows: &[Row]) -> String {
    to_csv(&COLUMNS, rows.iter().map(Row::fields))
}

/// `header`, then one record per item of `records`, as CSV (by the `csv`
/// crate: RFC 4180, a field with a comma, a quote or a line break quoted so
/// that it stays one field; lines end with `\n`).
fn to_csv(header: &[&str], records: impl Iterator<Item = Vec<String>>) -> String {
    // Into memory: no I/O error; and `flexible`: a record of another
    // length than the header's is written as it is (as the hand-written
    // writer before it did), not refused as the crate's default would.
    const IN_MEMORY: &str = "writing CSV into memory cannot fail";
    let mut writer = csv::WriterBuilder::new()
        .flexible(true)
        .from_writer(Vec::new());
    writer.write_record(header).expect(IN_MEMORY);
    for record in records {
        writer.write_record(&record).expect(IN_MEMORY);
    }
    let bytes = writer.into_inner().expect(IN_MEMORY);
    String::from_utf8(bytes).expect("CSV of UTF-8 fields is UTF-8")
}

/// Aligned columns: the first `left` flush left, the others right.
fn align(header: &[String], cells: &[Vec<String>], left: usize) -> String {
    let n = header.len();
    let widths: Vec<usize> = (0..n)
        .map(|i| {
            cells
                .iter()
                .filter_map(|r| r.get(i))
                .map(|c| c.chars().count())
                .chain([header[i].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |fields: &[String]| {
        let parts: Vec<String> = (0..n)
            .map(|i| {
                let f = fields.get(i).map_or("", String::as_str);
                if i < left {
                    format!("{f:<w$}", w = widths[i])
                } else {
                    format!("{f:>w$}", w = widths[i])
                }
            })
            .collect();
        parts.join("  ").trim_end().to_string() + "\n"
    };
    let mut out = line(header);
    for row in cells {
        out += &line(row);
    }
    out
}

/// The timeout case over the plain one, per client.
pub fn timeout_cost(rows: &[Row]) -> Vec<String> {
    let find = |case: Case, peer: Peer| {
        rows.iter()
            .find(|r| r.case == case && r.peer == peer)
            .and_then(Row::median)
            .map(|(run, _)| run)
    };
    let mut lines = Vec::new();
    let cost = |peer: Peer, timeout: Case, lines: &mut Vec<String>| {
        if let (Some(with), Some(without)) = (find(timeout, peer), find(Case::Small, peer)) {
            lines.push(format!(
                "timeout cost, {peer}: {:.3}x wall per request, {:.3}x client CPU per request, {:.3}x process CPU per request ({} / {})",
                without.req_per_s() / with.req_per_s(),
                with.client_cpu_us() / without.client_cpu_us(),
                with.cpu_us() / without.cpu_us(),
                timeout.name(),
                Case::Small.name(),
                peer = peer.name(),
            ));
        }
    };
    for peer in crate::clients::ALL_PEERS {
        cost(peer, Case::SmallTimeout, &mut lines);
    }
    cost(Peer::Tickless, Case::SmallLoopTimeout, &mut lines);
    if let (Some(tasks), Some(hyper)) = (
        find(Case::InFlightTasks, Peer::Tickless),
        find(Case::InFlight, Peer::Hyper),
    ) {
        lines.push(format!(
            "64 tokio tasks, tickless over hyper: {:.3}x req/s, {:.3}x client CPU per request ({} / {})",
            tasks.req_per_s() / hyper.req_per_s(),
            tasks.client_cpu_us() / hyper.client_cpu_us(),
            Case::InFlightTasks.name(),
            Case::InFlight.name(),
        ));
    }
    lines
}

/// One lateness row: a client (and how its lag was read) at one deadline.
pub struct LagRow {
    pub client: String,
    pub measured_at: &'static str,
    pub deadline: Duration,
    pub burst: Burst,
    /// The lags of this row (the burst's own, or the tickless listener's).
    pub lags_ns: Vec<i64>,
}

impl LagRow {
    fn fields(&self) -> Vec<String> {
        let mut sorted = self.lags_ns.clone();
        sorted.sort_unstable();
        let at = |q: f64| -> String {
            if sorted.is_empty() {
                return "-".to_string();
            }
            let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
            format!("{:.3}", sorted[rank - 1] as f64 / 1e6)
        };
        vec![
            self.client.clone(),
            self.measured_at.to_string(),
            self.deadline.as_millis().to_string(),
            self.burst.armed.to_string(),
            self.burst.timeouts.to_string(),
            (self.burst.others + self.burst.unresolved).to_string(),
            at(0.5),
            at(0.99),
            at(1.0),
        ]
    }
}

const LAG_COLUMNS: [&str; 9] = [
    "client",
    "lag_measured_at",
    "deadline_ms",
    "sent",
    "timed_out",
    "other",
    "p50_ms",
    "p99_ms",
    "max_ms",
];

pub fn lag_table(rows: &[LagRow]) -> String {
    let cells: Vec<Vec<String>> = rows.iter().map(LagRow::fields).collect();
    let header: Vec<String> = LAG_COLUMNS.iter().map(|s| s.to_string()).collect();
    align(&header, &cells, 2)
}

pub fn lag_csv(rows: &[LagRow]) -> String {
    to_csv(&LAG_COLUMNS, rows.iter().map(LagRow::fields))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cases::ALL_CASES;
    use crate::clients::ALL_PEERS;
    use crate::measure::{Span, Usage};

    fn run() -> Run {
        Run {
            sample: Sample {
                span: Span {
                    wall: Duration::from_secs(1),
                    usage: Usage::default(),
                },
                requests: 10,
                body_bytes: 130,
                latencies_ns: vec![1_000; 10],
            },
            server: None,
        }
    }

    /// Every record of the cases' CSV has the header's fields when split at
    /// its commas, as `ab.sh` (`awk -F,`) reads it: no label has a comma.
    #[test]
    fn case_csv_records_split_into_the_header_fields() {
        let rows: Vec<Row> = ALL_CASES
            .iter()
            .flat_map(|&case| {
                ALL_PEERS.iter().map(move |&peer| Row {
                    case,
                    peer,
                    runs: vec![run()],
                    failed: 0,
                })
            })
            .collect();
        for line in csv(&rows).lines() {
            assert_eq!(line.split(',').count(), COLUMNS.len(), "{line}");
        }
    }

    /// Ordinary fields go as they are: the header's names, then each row's
    /// fields, joined with commas, a line each (`\n`), nothing quoted.
    #[test]
    fn case_csv_of_ordinary_rows_is_their_fields_joined_with_commas() {
        let rows = [
            Row {
                case: ALL_CASES[0],
                peer: ALL_PEERS[0],
                runs: vec![run()],
                failed: 1,
            },
            Row {
                case: ALL_CASES[1],
                peer: ALL_PEERS[1],
                runs: vec![],
                failed: 2,
            },
        ];
        let mut expected = COLUMNS.join(",") + "\n";
        for row in &rows {
            expected += &(row.fields().join(",") + "\n");
        }
        assert_eq!(csv(&rows), expected);
    }

    /// A lateness label with a comma stays one field.
    #[test]
    fn lag_csv_quotes_a_label_with_a_comma() {
        let row = LagRow {
            client: "tickless the same, loops on tokio".to_string(),
            measured_at: "future resolved (task)",
            deadline: Duration::from_millis(20),
            burst: Burst {
                armed: 1,
                timeouts: 1,
                ..Burst::default()
            },
            lags_ns: vec![1_500_000],
        };
        assert_eq!(
            lag_csv(&[row]).lines().nth(1),
            Some("\"tickless the same, loops on tokio\",future resolved (task),20,1,1,0,1.500,1.500,1.500")
        );
    }
}
