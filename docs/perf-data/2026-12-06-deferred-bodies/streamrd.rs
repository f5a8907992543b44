// Cargo.toml: [dependencies] tickless = { path = "<tree>" }, tokio = { version = "1", features = ["rt-multi-thread"] }
// Scratch: blocking streaming reads (read_to_end) of one URL, sequential,
// for a few seconds: req/s and process CPU per request.
use std::io::Read;
use std::time::{Duration, Instant};
fn cpu() -> Duration {
    // SAFETY: `rusage` is plain integers, for which zero is valid.
    let mut u = unsafe { std::mem::zeroed::<libc_rusage>() };
    // SAFETY: `u` is a valid, writable `struct rusage` (RUSAGE_SELF = 0).
    unsafe { getrusage(0, &mut u) };
    Duration::from_micros((u.ru_utime.0 * 1_000_000 + u.ru_utime.1 + u.ru_stime.0 * 1_000_000 + u.ru_stime.1) as u64)
}
#[repr(C)] struct libc_rusage { ru_utime: (i64, i64), ru_stime: (i64, i64), rest: [i64; 14] }
extern "C" { fn getrusage(who: i32, usage: *mut libc_rusage) -> i32; }
thread_local! { static RT: tokio::runtime::Runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap(); }
fn main() {
    let url = std::env::args().nth(1).unwrap();
    let secs: u64 = std::env::args().nth(2).map_or(2, |s| s.parse().unwrap());
    let client = tickless::Client::builder().request_timeout(Duration::ZERO).read_timeout(Duration::ZERO).build().unwrap();
    let mut buf = Vec::with_capacity(1 << 20);
    let run = |n: &mut u64, until: Instant, buf: &mut Vec<u8>| while Instant::now() < until {
        buf.clear();
        if std::env::var_os("ASYNC").is_some() {
            RT.with(|rt| rt.block_on(async {
                let mut r = client.get(&url).send().await.unwrap();
                while let Some(c) = r.chunk().await.unwrap() { buf.extend_from_slice(&c); }
            }));
        } else {
            let mut r = client.get(&url).send().wait().unwrap();
            r.body_mut().read_to_end(buf).unwrap();
        }
        *n += 1;
    };
    let mut n = 0;
    run(&mut n, Instant::now() + Duration::from_millis(300), &mut buf);
    let (t0, c0) = (Instant::now(), cpu());
    let mut n = 0;
    run(&mut n, t0 + Duration::from_secs(secs), &mut buf);
    let (dt, dc) = (t0.elapsed(), cpu() - c0);
    println!("{:.0} req/s {:.2} cpu-us/req len {}", n as f64 / dt.as_secs_f64(), dc.as_micros() as f64 / n as f64, buf.len());
}
