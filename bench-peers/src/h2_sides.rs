//! What `h2-in-flight` and `h2-allocs` share (`#[path]`): the HTTP/2 server
//! run in their child process (`BINARY --serve`, see `child.rs`: the `h2`
//! crate's server on one tokio worker), and each client's side as both
//! binaries drive it — tickless as a window of `ResponseFuture`s kept by
//! one thread, hyper as tasks on one connection.

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Duration;

/// tickless's side: `in_flight` requests over one prior-knowledge HTTP/2
/// connection, each replaced by a new one as it is answered.
pub struct TicklessWindow {
    client: tickless::Client,
    /// Parsed once, as hyper's side does: each request clones it.
    uri: http::Uri,
    window: VecDeque<tickless::ResponseFuture>,
}

impl TicklessWindow {
    /// `bare`: no `User-Agent` nor `Accept-Encoding` (hyper's request).
    pub fn new(addr: SocketAddr, in_flight: usize, bare: bool) -> TicklessWindow {
        let mut builder = tickless::Client::builder()
            .http2_prior_knowledge()
            .request_timeout(Duration::ZERO)
            .read_timeout(Duration::ZERO);
        if bare {
            builder = builder.no_user_agent().no_decompress();
        }
        let client = builder.build().unwrap();
        let uri: http::Uri = format!("http://{addr}/small").parse().unwrap();
        let window = (0..in_flight)
            .map(|_| client.get(uri.clone()).send())
            .collect();
        TicklessWindow {
            client,
            uri,
            window,
        }
    }

    /// Waits for the oldest answer, reads its body, sends one more.
    pub fn one(&mut self) {
        let future = self.window.pop_front().unwrap();
        let body = future.wait().unwrap().bytes().wait().unwrap();
        assert_eq!(body.len(), 13);
        self.window
            .push_back(self.client.get(self.uri.clone()).send());
    }

    /// Waits for the answers still in flight, then closes the client.
    pub fn finish(self) {
        for future in self.window {
            let _ = future.wait().map(|r| r.bytes().wait());
        }
        self.client.close();
    }
}

/// hyper's side: one HTTP/2 connection on `runtime`.
pub fn hyper_sender(
    runtime: &tokio::runtime::Runtime,
    addr: SocketAddr,
) -> hyper::client::conn::http2::SendRequest<Empty<Bytes>> {
    runtime.block_on(async {
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        tcp.set_nodelay(true).unwrap();
        let (sender, conn) = hyper::client::conn::http2::handshake(
            hyper_util::rt::TokioExecutor::new(),
            hyper_util::rt::TokioIo::new(tcp),
        )
        .await
        .unwrap();
        tokio::spawn(conn);
        sender
    })
}

/// One request on hyper's side and its body read; `Err` only as the
/// runtime shuts down.
pub async fn hyper_one(
    sender: &mut hyper::client::conn::http2::SendRequest<Empty<Bytes>>,
    uri: &hyper::Uri,
) -> Result<(), hyper::Error> {
    let request = hyper::Request::get(uri.clone())
        .body(Empty::<Bytes>::new())
        .unwrap();
    let response = sender.send_request(request).await?;
    let body = response.into_body().collect().await?;
    assert_eq!(body.to_bytes().len(), 13);
    Ok(())
}

/// Prints its address, then answers every stream `200` with
/// `Hello, world!`, until killed.
pub fn serve() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        println!("{}", listener.local_addr().unwrap());
        loop {
            let Ok((socket, _)) = listener.accept().await else {
                continue;
            };
            let _ = socket.set_nodelay(true);
            tokio::spawn(async move {
                let Ok(mut conn) = h2::server::handshake(socket).await else {
                    return;
                };
                while let Some(Ok((_request, mut respond))) = conn.accept().await {
                    let response = http::Response::builder().status(200).body(()).unwrap();
                    if let Ok(mut send) = respond.send_response(response, false) {
                        let _ = send.send_data(Bytes::from_static(b"Hello, world!"), true);
                    }
                }
            });
        }
    });
}
