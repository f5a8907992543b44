//! Awaits requests on tokio. The response future is a plain
//! `std::future::Future`, woken from the client's own threads, so it needs
//! nothing from the runtime.
//!
//! The example starts its own loopback server, so it runs as is:
//!
//! ```sh
//! cargo run --release --example tokio
//! ```

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let addr = start_server()?;
    let client = tickless::Client::builder()
        .event_loops(1)
        .request_timeout(Duration::from_secs(5))
        .build()?;

    // One request.
    let response = client.get(format!("http://{addr}/hello")).send().await?;
    println!("{} {}", response.status(), response.text().trim_end());

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
        println!("{} {}", response.status(), response.text().trim_end());
    }

    // Deadlines compose with tokio's: dropping the future (here, when
    // tokio's timeout wins) cancels the request and closes its connection.
    let slow = client.get(format!("http://{addr}/slow")).send();
    match tokio::time::timeout(Duration::from_millis(50), slow).await {
        Ok(result) => println!("slow: {}", result?.status()),
        Err(_) => println!("slow: gave up after 50 ms (request cancelled)"),
    }

    client.close();
    Ok(())
}

/// A tiny keep-alive HTTP/1.1 server on 127.0.0.1: answers every request
/// with its path, except `/slow`, which it answers after a second. Requests
/// are assumed to have no body (this example sends only GETs).
fn start_server() -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || serve(stream));
        }
    });
    Ok(addr)
}

fn serve(stream: TcpStream) {
    let Ok(mut writer) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let path = line.split(' ').nth(1).unwrap_or("/").to_owned();
        // Skip the headers up to the blank line.
        loop {
            line.clear();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            if line == "\r\n" || line == "\n" {
                break;
            }
        }
        if path == "/slow" {
            std::thread::sleep(Duration::from_secs(1));
        }
        let body = format!("you asked for {path}\n");
        let response = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        if writer.write_all(response.as_bytes()).is_err() {
            return;
        }
    }
}
