//! The text form of `ClientStats` is stable: these exact lines for this
//! snapshot (fields are only ever added at the end of a line).

use tickless::timer::{LagSnapshot, TimerStats, LAG_BUCKETS};
use tickless::ClientStats;

fn timer(armed: usize, fired: u64, cancelled: u64, lags: &[(usize, u64)]) -> TimerStats {
    let mut counts = [0; LAG_BUCKETS];
    for &(bucket, count) in lags {
        counts[bucket] = count;
    }
    TimerStats {
        armed,
        fired,
        cancelled,
        lag: LagSnapshot { counts },
    }
}

#[test]
fn the_text_form_is_one_key_value_line_per_part() {
    let stats = ClientStats {
        wheel: timer(3, 100, 900, &[(9, 50), (10, 49), (12, 1)]),
        pool_cleaner_armed: 1,
        loops: vec![timer(2, 40, 300, &[(6, 40)]), timer(0, 0, 0, &[])],
        open_connections: 4,
        idle_connections: 2,
        waiting: 0,
        in_flight: 2,
        buffered_body_bytes: 1024,
        http2_streams_open: 3,
        http2_streams_opened: 120,
        retry_budget: Default::default(),
    };
    assert_eq!(
        stats.to_string(),
        "wheel armed=3 fired=100 cancelled=900 lag_count=100 lag_p50_us=512 lag_p99_us=1024 lag_max_us=4096\n\
         loop=0 armed=2 fired=40 cancelled=300 lag_count=40 lag_p50_us=64 lag_p99_us=64 lag_max_us=64\n\
         loop=1 armed=0 fired=0 cancelled=0 lag_count=0 lag_p50_us=- lag_p99_us=- lag_max_us=-\n\
         pool open=4 idle=2 waiting=0 in_flight=2 buffered_body_bytes=1024\n\
         retry_budget requests=0 retries=0 retries_total=0 hedges_total=0 refused_total=0\n\
         http2 streams_open=3 streams_opened=120\n"
    );
}
