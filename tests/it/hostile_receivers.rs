//! Receivers that misbehave on the wire, served by hand over raw TCP on
//! 127.0.0.1: a body sent at one byte a second, a 1 GiB body, a gzip bomb,
//! and a receiver that resets and refuses before it recovers.

use std::{
    io::Write,
    net::SocketAddr,
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use dakghar::{
    clock::Clock,
    config::ServeConfig,
    store::{DeliveryState, Store},
};
use serde_json::json;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
};

use crate::{api_client::Api, helpers::StateOf};

on_both_backends!(
    a_body_sent_at_one_byte_a_second_times_out_and_is_retried,
    a_one_gib_body_is_read_only_up_to_the_cap,
    a_gzip_bomb_is_stored_compressed_and_capped,
    a_receiver_that_resets_then_refuses_is_retried_until_delivered,
    ninety_headers_of_four_kib_are_kept_to_sixteen_kib_and_marked,
);

/// Reads one request's head and body (by Content-Length) and returns the head.
async fn read_request(stream: &mut TcpStream) -> String {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        let n = stream.read(&mut chunk).await.unwrap_or(0);
        if n == 0 {
            return String::from_utf8_lossy(&buf).into_owned();
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_lowercase();
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    while buf.len() < head_end + length {
        let n = stream.read(&mut chunk).await.unwrap_or(0);
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    head
}

/// An endpoint on a raw TCP address (the API wants a URL, not a Receiver).
async fn endpoint_at(api: &Api, addr: SocketAddr) {
    let (s, ep) = api
        .call(
            reqwest::Method::POST,
            "/api/v1/endpoints",
            Some(json!({ "url": format!("http://{addr}/hook") })),
        )
        .await;
    assert_eq!(s, reqwest::StatusCode::CREATED, "{ep}");
}

async fn one_event(api: &Api) -> serde_json::Value {
    api.send(json!({ "type": "t", "payload": { "n": 1 } }))
        .await
}

fn with_timeout(timeout: Duration) -> ServeConfig {
    let mut config = ServeConfig::for_tests();
    config.delivery.request_timeout = timeout;
    config
}

async fn a_body_sent_at_one_byte_a_second_times_out_and_is_retried(store: Store) {
    let api = Api::with_config(store, with_timeout(Duration::from_millis(1500))).await;
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    endpoint_at(&api, listener.local_addr().unwrap()).await;
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                read_request(&mut stream).await;
                let head = "HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n";
                if stream.write_all(head.as_bytes()).await.is_err() {
                    return;
                }
                for _ in 0..100 {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    if stream.write_all(b"x").await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    let ev = one_event(&api).await;

    let started = Instant::now();
    assert_eq!(api.tick().await, 1);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the worker is free after the timeout, not after 100 s"
    );
    let d = api.delivery(&ev).await;
    assert_eq!(
        d.state(),
        Some(DeliveryState::Pending),
        "a 200 whose body never finished is not a delivery"
    );
    assert_eq!((d.attempts, d.last_status), (1, Some(200)));
    assert!(
        d.next_attempt_at > api.app.clock.now().millis(),
        "retry scheduled"
    );
    let attempts = api.app.store.attempts_of_delivery(&d.id).await.unwrap();
    let error = attempts[0].error.as_deref().unwrap_or_default();
    assert!(error.contains("timed out"), "{error}");
    assert_eq!(attempts[0].classification, "transient");
    let detail = api.detail(ev["id"].as_str().unwrap()).await;
    let explained = detail["deliveries"][0]["attempts"][0]["explanation"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(explained.contains("did not finish"), "{explained}");
}

async fn a_one_gib_body_is_read_only_up_to_the_cap(store: Store) {
    let api = Api::new(store).await;
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    endpoint_at(&api, listener.local_addr().unwrap()).await;
    let written = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&written);
    let writer = tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.unwrap();
        read_request(&mut stream).await;
        let gib = 1usize << 30;
        let head = format!("HTTP/1.1 200 OK\r\ncontent-length: {gib}\r\n\r\n");
        stream.write_all(head.as_bytes()).await.unwrap();
        let chunk = vec![b'a'; 64 * 1024];
        while counter.load(Ordering::Relaxed) < gib {
            match stream.write(&chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => counter.fetch_add(n, Ordering::Relaxed),
            };
        }
    });
    let ev = one_event(&api).await;

    let started = Instant::now();
    assert_eq!(api.tick().await, 1);
    assert!(started.elapsed() < Duration::from_secs(10));
    let d = api.delivery(&ev).await;
    assert_eq!(d.state(), Some(DeliveryState::Delivered));
    let attempts = api.app.store.attempts_of_delivery(&d.id).await.unwrap();
    assert_eq!(attempts[0].response_body.as_deref(), Some(&[b'a'; 512][..]));
    // The writer stops when it finds the socket closed; then only the cap
    // plus socket buffers can ever have left the receiver.
    tokio::time::timeout(Duration::from_secs(10), writer)
        .await
        .expect("the client closed the connection")
        .unwrap();
    let sent = written.load(Ordering::Relaxed);
    assert!(
        sent < 32 << 20,
        "read {sent} bytes of a 1 GiB body; the cap is 16 KiB"
    );
}

/// 1 GiB of zeros as 1 024 concatenated gzip members of 1 MiB each: about
/// 1 MB on the wire, built in milliseconds.
fn gzip_bomb() -> Vec<u8> {
    let mut member = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    member.write_all(&vec![0u8; 1 << 20]).unwrap();
    let member = member.finish().unwrap();
    member.repeat(1024)
}

async fn a_gzip_bomb_is_stored_compressed_and_capped(store: Store) {
    let api = Api::new(store).await;
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    endpoint_at(&api, listener.local_addr().unwrap()).await;
    let bomb = gzip_bomb();
    let (head_tx, head_rx) = tokio::sync::oneshot::channel();
    let body = bomb.clone();
    tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.unwrap();
        let _ = head_tx.send(read_request(&mut stream).await);
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-encoding: gzip\r\ncontent-type: text/plain\r\ncontent-length: {}\r\n\r\n",
            body.len()
        );
        let _ = stream.write_all(head.as_bytes()).await;
        let _ = stream.write_all(&body).await;
    });
    let ev = one_event(&api).await;

    assert_eq!(api.tick().await, 1);
    let request_head = head_rx.await.unwrap();
    assert!(
        !request_head.contains("accept-encoding"),
        "Dakghar asks for no compression: {request_head}"
    );
    let d = api.delivery(&ev).await;
    assert_eq!(d.state(), Some(DeliveryState::Delivered));
    let attempts = api.app.store.attempts_of_delivery(&d.id).await.unwrap();
    assert_eq!(
        attempts[0].response_body.as_deref(),
        Some(&bomb[..512]),
        "the first bytes as sent, never inflated"
    );
}

async fn a_receiver_that_resets_then_refuses_is_retried_until_delivered(store: Store) {
    let api = Api::new(store).await;
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    endpoint_at(&api, addr).await;
    let ev = one_event(&api).await;

    // First attempt: the connection is accepted and reset mid-request.
    let reset = tokio::spawn(async move {
        let (stream, _) = listener.accept().await.unwrap();
        stream.set_zero_linger().unwrap();
        drop(stream);
    });
    assert_eq!(api.tick().await, 1);
    reset.await.unwrap();
    let first = api.delivery(&ev).await;
    assert_eq!(
        (first.state(), first.attempts),
        (Some(DeliveryState::Pending), 1)
    );
    let wait1 = first.next_attempt_at - api.app.clock.now().millis();

    // Second attempt: nothing listens on the port any more.
    api.advance(Duration::from_millis(wait1 as u64));
    assert_eq!(api.tick().await, 1);
    let second = api.delivery(&ev).await;
    assert_eq!(
        (second.state(), second.attempts),
        (Some(DeliveryState::Pending), 2)
    );
    let wait2 = second.next_attempt_at - api.app.clock.now().millis();
    assert!(wait2 > wait1, "backoff grows: {wait1} ms, then {wait2} ms");

    // Third attempt: the receiver is back on the same port and answers.
    let listener = TcpListener::bind(addr).await.unwrap();
    tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.unwrap();
        read_request(&mut stream).await;
        let _ = stream
            .write_all(b"HTTP/1.1 204 No Content\r\nconnection: close\r\n\r\n")
            .await;
    });
    api.advance(Duration::from_millis(wait2 as u64));
    assert_eq!(api.tick().await, 1);
    let done = api.delivery(&ev).await;
    assert_eq!(
        (done.state(), done.attempt_seq),
        (Some(DeliveryState::Delivered), 3)
    );
    let attempts = api.app.store.attempts_of_delivery(&done.id).await.unwrap();
    let errors: Vec<_> = attempts.iter().map(|a| a.error.clone()).collect();
    assert_eq!(attempts.len(), 3, "{errors:?}");
    assert_eq!(attempts[0].response_status, None);
    assert!(
        attempts[1]
            .error
            .as_deref()
            .unwrap_or_default()
            .contains("connect"),
        "{errors:?}"
    );
    assert_eq!(attempts[2].response_status, Some(204));
}

/// 90 headers of 4 KiB each (360 KiB, stored as escaped JSON it was about
/// three times that per attempt): at most 16 KiB is kept, with a line that
/// says how many were not.
async fn ninety_headers_of_four_kib_are_kept_to_sixteen_kib_and_marked(store: Store) {
    let api = Api::new(store).await;
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    endpoint_at(&api, listener.local_addr().unwrap()).await;
    tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.unwrap();
        read_request(&mut stream).await;
        let mut head = String::from("HTTP/1.1 200 OK\r\ncontent-length: 2\r\n");
        for i in 0..90 {
            head.push_str(&format!("x-big-{i:02}: {}\r\n", "v".repeat(4096)));
        }
        head.push_str("\r\nok");
        stream.write_all(head.as_bytes()).await.unwrap();
    });
    let ev = one_event(&api).await;
    assert_eq!(api.tick().await, 1);
    let d = api.delivery(&ev).await;
    assert_eq!(d.state(), Some(DeliveryState::Delivered));
    let attempts = api.app.store.attempts_of_delivery(&d.id).await.unwrap();
    let stored = attempts[0].response_headers.clone().unwrap_or_default();
    assert!(stored.len() < 20 * 1024, "{} bytes stored", stored.len());
    let pairs: Vec<(String, String)> = serde_json::from_str(&stored).unwrap();
    let (name, said) = pairs.last().unwrap();
    assert_eq!(name, "(truncated)");
    assert!(said.contains("more headers"), "{said}");
    let big = &pairs.iter().find(|(k, _)| k == "x-big-00").unwrap().1;
    assert!(big.ends_with("… (4096 bytes)"), "{big}");
}
