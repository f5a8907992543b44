//! Awaits requests on tokio. The response future is a plain
//! `std::future::Future`, so it needs nothing from the runtime; with the
//! cargo feature `tokio`, the client's event loops are driven by this
//! runtime's reactor (`Executor::tokio`), so the answers are read on the
//! workers that run the tasks awaiting them.
//!
//! The example starts its own loopback server, so it runs as is:
//!
//! ```sh
//! cargo run --release --example tokio
//! ```

#[path = "common/echo_server.rs"]
mod echo_server;

use std::sync::atomic::Ordering;
use std::time::Duration;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let server = echo_server::start()?;
    let addr = server.addr;
    let runtime = tokio::runtime::Handle::current();
    let client = tickless::Client::builder()
        .event_loops(1)
        .executor(tickless::event_loop::Executor::tokio(runtime))
        .request_timeout(Duration::from_secs(5))
        .build()?;

    // One request.
    let response = client.get(format!("http://{addr}/hello")).send().await?;
    let status = response.status();
    println!("{status} {}", response.text().await?.trim_end());

    // A few at once, each on its own task.
    let tasks: Vec<_> = (0..5)
        .map(|i| {
            let client = client.clone();
            let url = format!("http://{addr}/task/{i}");
            tokio::spawn(async move { client.get(url).send().await })
        })
        .collect();
    for task in tasks {
        let response = task.await??;
        let status = response.status();
        println!("{status} {}", response.text().await?.trim_end());
    }

    // Deadlines compose with tokio's: dropping the future (here, when
    // tokio's timeout wins) cancels the request and closes its connection.
    let slow = client.get(format!("http://{addr}/slow")).send();
    match tokio::time::timeout(Duration::from_millis(50), slow).await {
        Ok(result) => println!("slow: {}", result?.status()),
        Err(_) => println!("slow: gave up after 50 ms (request cancelled)"),
    }

    client.close();
    // Tasks that found no idle connection opened their own.
    println!(
        "connections opened: {}",
        server.opened.load(Ordering::Relaxed)
    );
    Ok(())
}
