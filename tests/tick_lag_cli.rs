//! Runs the built `tick-lag` binary: the CSV it prints has the promised
//! shape and sane numbers for every instrument, and bad input exits with 2.
//!
//! Nothing here asserts how small the lags are: the machine is shared.

use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_tick-lag");
const HEADER: &str = "instrument,deadline_ms,count,mean_us,p50_us,p99_us,max_us";
const INSTRUMENTS: [&str; 3] = ["wheel-5ms", "wheel-1ms", "event-loop"];

fn tick_lag(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .output()
        .expect("the tick-lag binary runs")
}

#[test]
fn csv_has_one_sane_row_per_instrument() {
    for instrument in INSTRUMENTS {
        let output = tick_lag(&[
            "--count",
            "50",
            "--deadline-ms",
            "5",
            "--format",
            "csv",
            "--instrument",
            instrument,
        ]);
        let stdout = String::from_utf8(output.stdout).expect("UTF-8 output");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{instrument}: {stderr}");
        // The machine and date lines go to stderr so stdout is pure CSV.
        assert!(stderr.contains("machine:"), "{stderr}");

        let mut lines = stdout.lines();
        assert_eq!(lines.next(), Some(HEADER));
        let rows: Vec<&str> = lines.collect();
        assert_eq!(rows.len(), 1, "{instrument}: {stdout}");
        let fields: Vec<&str> = rows[0].split(',').collect();
        assert_eq!(fields.len(), 7, "{}", rows[0]);
        assert_eq!(fields[0], instrument);
        assert_eq!(fields[1], "5");
        assert_eq!(fields[2], "50", "not every timeout fired: {}", rows[0]);
        let lag = |i: usize| -> f64 {
            fields[i]
                .parse()
                .unwrap_or_else(|_| panic!("column {i} is not a number: {}", rows[0]))
        };
        let (mean, p50, p99, max) = (lag(3), lag(4), lag(5), lag(6));
        for value in [mean, p50, p99, max] {
            assert!(value >= 0.0, "fired early: {}", rows[0]);
        }
        assert!(p50 <= p99 && p99 <= max && mean <= max, "{}", rows[0]);
    }
}

#[test]
fn all_instruments_by_default() {
    let output = tick_lag(&["--count", "50", "--deadline-ms", "5", "--format", "csv"]);
    assert!(output.status.success());
    let stdout = String::from_utf8(output.stdout).expect("UTF-8 output");
    let names: Vec<&str> = stdout
        .lines()
        .skip(1)
        .map(|row| row.split(',').next().unwrap_or_default())
        .collect();
    assert_eq!(names, INSTRUMENTS);
}

#[test]
fn unknown_instrument_exits_2_listing_the_valid_ones() {
    let output = tick_lag(&["--instrument", "nope"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(output.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&output.stderr);
    for name in INSTRUMENTS {
        assert!(stderr.contains(name), "{stderr}");
    }
}

#[test]
fn bad_numbers_exit_2() {
    for args in [
        &["--count", "0"][..],
        &["--deadline-ms", "x"],
        &["--format"],
    ] {
        assert_eq!(tick_lag(args).status.code(), Some(2), "{args:?}");
    }
}

/// An argument that is not UTF-8 (a Latin-1 byte) is a bad command line,
/// exit 2 saying so, not a panic's 101.
#[test]
fn an_argument_that_is_not_utf8_is_a_bad_command_line_not_a_panic() {
    use std::os::unix::ffi::OsStrExt;
    let latin1 = std::ffi::OsStr::from_bytes(b"--format=caf\xe9");
    let output = Command::new(BIN).arg(latin1).output().expect("runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("not UTF-8"), "{stderr}");
    assert!(output.stdout.is_empty());
}

/// With the reader of standard error gone (`tick-lag 2>&1 | head -c 0`),
/// what tick-lag has to say there is lost, and its exit status still says
/// what happened: 2 for a bad command line, 0 for a run — not a panic's
/// 101 for the write that failed.
#[test]
fn a_reader_gone_from_standard_error_changes_no_exit_status() {
    // Standard error closed before tick-lag starts (`2>&-`): its first
    // write there fails, whenever it comes.
    let without_stderr = |args: &[&str]| {
        Command::new("sh")
            .args(["-c", r#"exec "$0" "$@" 2>&-"#, BIN])
            .args(args)
            .output()
            .expect("sh runs")
    };
    assert_eq!(without_stderr(&["--count", "0"]).status.code(), Some(2));
    // In CSV mode the machine and date lines go to standard error.
    let args = ["--count", "10", "--deadline-ms", "1", "--format", "csv"];
    let output = without_stderr(&[&args[..], &["--instrument", "wheel-1ms"]].concat());
    assert_eq!(output.status.code(), Some(0));
    let stdout = String::from_utf8(output.stdout).expect("UTF-8 output");
    assert!(stdout.starts_with(HEADER), "{stdout}");
}

/// A flag that would change nothing in the run asked for is refused, not
/// ignored: `--unpinned` acts on client-event-loop alone (the client pins
/// its loops in event-loop mode only), `--loop-spin-us` on the event loops,
/// `--end-to-end` on the client instruments.
#[test]
fn flags_no_chosen_instrument_acts_on_exit_2() {
    for args in [
        &["--unpinned"][..],
        &[
            "--end-to-end",
            "--unpinned",
            "--instrument",
            "client-wheel-1ms",
        ],
        &["--loop-spin-us", "500", "--instrument", "wheel-5ms"],
        &["--end-to-end", "--instrument", "wheel-5ms"],
    ] {
        let output = tick_lag(args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(output.stdout.is_empty(), "{args:?}");
        assert!(stderr.contains(" is for "), "{args:?}: {stderr}");
    }
}

#[test]
fn end_to_end_sends_requests_through_the_client_in_each_mode() {
    let output = tick_lag(&[
        "--end-to-end",
        "--count",
        "20",
        "--deadline-ms",
        "50",
        "--loop-spin-us",
        "1000",
        "--format",
        "csv",
    ]);
    let stdout = String::from_utf8(output.stdout).expect("UTF-8 output");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let mut lines = stdout.lines();
    assert_eq!(lines.next(), Some(HEADER));
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    let names: Vec<&str> = rows.iter().map(|r| r[0]).collect();
    assert_eq!(
        names,
        ["client-wheel-5ms", "client-wheel-1ms", "client-event-loop"]
    );
    for row in rows {
        assert_eq!(
            row[2], "20",
            "every request timed out and was counted: {row:?}"
        );
        let p50: f64 = row[4].parse().unwrap();
        assert!(p50 >= 0.0, "a request ended before its deadline: {row:?}");
    }
    // In CSV mode the notes go to stderr: the kernel's share of a burst,
    // then where the event-loop mode's timeouts expired.
    let stderr = String::from_utf8_lossy(&output.stderr);
    let notes: Vec<&str> = stderr.lines().filter(|l| l.starts_with("note: ")).collect();
    assert_eq!(notes.len(), 2, "{stderr}");
    assert!(
        notes[0].starts_with("note: kernel floor: 20 loopback connects"),
        "{}",
        notes[0]
    );
    let on_wheel: usize = notes[1]
        .strip_prefix("note: client-event-loop at 50 ms: ")
        .and_then(|rest| rest.split(" expired on the wheel").next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("unexpected note: {}", notes[1]));
    // Twenty connects take well under the 50 ms deadline, so most of
    // them expire on their loop, listed with their lags.
    assert!(on_wheel < 20, "{}", notes[1]);
    let on_loops = format!("the {} on their loop: p50 +", 20 - on_wheel);
    assert!(notes[1].contains(&on_loops), "{}", notes[1]);
}

/// A request of an end-to-end burst that fails otherwise than by its
/// timeout — here its connect, the process out of descriptors — is told
/// with its cause and exit 1, not waited for until the burst's ceiling and
/// then reported as a timeout that never fired.
#[test]
fn end_to_end_requests_failing_otherwise_are_told_with_their_cause() {
    let output = Command::new("sh")
        .args(["-c", r#"ulimit -n 200 && exec "$0" "$@""#, BIN])
        .args(["--end-to-end", "--count", "300", "--deadline-ms", "1000"])
        .args(["--instrument", "client-wheel-5ms", "--format", "csv"])
        .output()
        .expect("sh runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    // That line's own cause (the connect floor's line, before it, fails
    // for want of descriptors too).
    let told = stderr
        .lines()
        .find(|line| line.contains("failed otherwise than by their timeout"))
        .unwrap_or_else(|| panic!("no failure told: {stderr}"));
    assert!(
        told.contains("requests failed otherwise than by their timeout, the first: connect to")
            && told.contains("Too many open files"),
        "{stderr}"
    );
    assert!(!stderr.contains("timeouts fired within"), "{stderr}");
}

/// Runs tick-lag with `args` and `--format csv`, which must succeed: the
/// CSV rows (header skipped), split into cells, and standard error.
fn csv_rows(args: &[&str]) -> (Vec<Vec<String>>, String) {
    let output = tick_lag(&[args, &["--format", "csv"]].concat());
    let stdout = String::from_utf8(output.stdout).expect("UTF-8 output");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "{stderr}");
    let rows = stdout
        .lines()
        .skip(1)
        .map(|l| l.split(',').map(str::to_owned).collect())
        .collect();
    (rows, stderr)
}

#[test]
fn end_to_end_http2_sends_streams_over_a_few_connections_in_each_mode() {
    let (rows, stderr) = csv_rows(&[
        "--end-to-end",
        "--http2",
        "--count",
        "40",
        "--deadline-ms",
        "100",
    ]);
    let names: Vec<&str> = rows.iter().map(|r| r[0].as_str()).collect();
    assert_eq!(
        names,
        ["client-wheel-5ms", "client-wheel-1ms", "client-event-loop"]
    );
    for row in rows {
        assert_eq!(
            row[2], "40",
            "every stream timed out and was counted: {row:?}"
        );
        let p50: f64 = row[4].parse().unwrap();
        assert!(p50 >= 0.0, "a stream ended before its deadline: {row:?}");
    }
    let notes: Vec<&str> = stderr.lines().filter(|l| l.starts_with("note: ")).collect();
    assert!(
        notes[0].starts_with("note: http2: 40 requests as HTTP/2 streams"),
        "{stderr}"
    );
}

#[test]
fn end_to_end_warm_sends_the_burst_on_pooled_connections() {
    let (rows, stderr) = csv_rows(&[
        "--end-to-end",
        "--warm",
        "--count",
        "30",
        "--deadline-ms",
        "50",
    ]);
    assert_eq!(rows.len(), 3, "{rows:?}");
    for row in &rows {
        assert_eq!(
            row[2], "30",
            "every request timed out and was counted: {row:?}"
        );
    }
    assert!(
        stderr.contains("warm: 30 connections opened and pooled"),
        "{stderr}"
    );
    // On pooled connections, no event-loop timeout waits on the wheel for
    // a connect.
    assert!(
        stderr.contains("client-event-loop at 50 ms: 0 expired on the wheel"),
        "{stderr}"
    );
    assert!(
        !tick_lag(&["--warm"]).status.success(),
        "--warm needs --end-to-end"
    );
}

#[test]
fn end_to_end_under_load_runs_each_burst_beside_a_throughput_load() {
    let (rows, stderr) = csv_rows(&[
        "--end-to-end",
        "--warm",
        "--under-load",
        "--count",
        "30",
        "--deadline-ms",
        "50",
        "--instrument",
        "client-event-loop",
    ]);
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0][2], "30", "every request timed out: {rows:?}");
    let p50: f64 = rows[0][4].parse().unwrap();
    assert!(p50 >= 0.0, "a request ended before its deadline: {rows:?}");
    // The load's own requests, answered at once, neither time out nor
    // count in the burst; the note says the load ran.
    let load = stderr
        .lines()
        .find(|l| l.contains("under load, 64 requests in flight"))
        .unwrap_or_else(|| panic!("no load note: {stderr}"));
    let rate: f64 = load
        .split(", ")
        .nth(2)
        .and_then(|part| part.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no rate in {load:?}"));
    assert!(rate > 0.0, "the load answered nothing: {load}");
    assert!(
        !tick_lag(&["--under-load"]).status.success(),
        "--under-load needs --end-to-end"
    );
}
