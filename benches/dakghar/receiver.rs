//! The receiver every figure is measured against: answers 204 on
//! 127.0.0.1, counts requests, and notes when each webhook arrived so
//! latency is measured on the same clock as the send schedule.

use std::{
    collections::HashMap,
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc, Mutex,
    },
    time::{Duration, Instant},
};

use axum::{
    extract::State,
    http::{HeaderMap, StatusCode},
    serve::ListenerExt,
    Router,
};

#[derive(Default)]
struct Inner {
    count: AtomicUsize,
    open: AtomicUsize,
    most_open: AtomicUsize,
    /// Arrivals by `webhook-id`, only while `note_arrivals` is on.
    arrivals: Mutex<Option<HashMap<String, Vec<Instant>>>>,
}

#[derive(Clone)]
pub struct Receiver {
    /// Answers at once.
    pub fast_url: String,
    /// Holds each request open for two seconds first.
    pub slow_url: String,
    inner: Arc<Inner>,
}

const SLOW: Duration = Duration::from_secs(2);

impl Receiver {
    pub async fn start() -> Receiver {
        let inner = Arc::new(Inner::default());
        let app = Router::new()
            .fallback(answer)
            .with_state(Arc::clone(&inner));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the receiver");
        let addr = listener.local_addr().expect("receiver address");
        let listener = listener.tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
        tokio::spawn(async move { axum::serve(listener, app).await });
        Receiver {
            fast_url: format!("http://{addr}/hook"),
            slow_url: format!("http://{addr}/slow"),
            inner,
        }
    }

    pub fn count(&self) -> usize {
        self.inner.count.load(Ordering::Relaxed)
    }

    pub fn open(&self) -> usize {
        self.inner.open.load(Ordering::Relaxed)
    }

    pub fn reset_most_open(&self) -> usize {
        self.inner.most_open.swap(0, Ordering::Relaxed)
    }

    pub fn note_arrivals(&self, on: bool) {
        *self.inner.arrivals.lock().unwrap() = on.then(HashMap::new);
    }

    pub fn with_arrivals<T>(&self, f: impl FnOnce(&HashMap<String, Vec<Instant>>) -> T) -> T {
        let guard = self.inner.arrivals.lock().unwrap();
        f(guard.as_ref().unwrap_or(&HashMap::new()))
    }

    pub fn take_arrivals(&self) -> HashMap<String, Vec<Instant>> {
        self.inner
            .arrivals
            .lock()
            .unwrap()
            .take()
            .unwrap_or_default()
    }
}

async fn answer(
    State(inner): State<Arc<Inner>>,
    uri: axum::http::Uri,
    headers: HeaderMap,
    _body: axum::body::Bytes,
) -> StatusCode {
    let at = Instant::now();
    if let Some(arrivals) = inner.arrivals.lock().unwrap().as_mut() {
        if let Some(id) = headers.get("webhook-id").and_then(|v| v.to_str().ok()) {
            arrivals.entry(id.to_string()).or_default().push(at);
        }
    }
    let open = inner.open.fetch_add(1, Ordering::Relaxed) + 1;
    inner.most_open.fetch_max(open, Ordering::Relaxed);
    if uri.path() == "/slow" {
        tokio::time::sleep(SLOW).await;
    }
    inner.open.fetch_sub(1, Ordering::Relaxed);
    inner.count.fetch_add(1, Ordering::Relaxed);
    StatusCode::NO_CONTENT
}
