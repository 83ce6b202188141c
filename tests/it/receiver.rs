//! A real HTTP receiver on 127.0.0.1, scripted per test: it answers with the
//! queued statuses (then 200), records every request, and verifies
//! signatures independently with the `standardwebhooks` crate.

use std::{
    collections::VecDeque,
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc, Mutex,
    },
    time::Duration,
};

use axum::{
    body::Bytes,
    extract::State,
    http::{HeaderMap, StatusCode},
    response::{IntoResponse, Response},
    Router,
};

#[derive(Debug, Clone)]
pub struct Got {
    pub headers: HeaderMap,
    pub body: Bytes,
    pub verified: Option<bool>,
}

/// A status to answer with and extra response headers.
type Answer = (u16, Vec<(&'static str, String)>);

#[derive(Default)]
struct Inner {
    script: Mutex<VecDeque<Answer>>,
    got: Mutex<Vec<Got>>,
    secret: Mutex<Option<String>>,
    /// How long each answer takes, to hold requests open.
    delay: Mutex<Duration>,
    body: Mutex<Option<Vec<u8>>>,
    open: AtomicUsize,
    most_open: AtomicUsize,
}

#[derive(Clone)]
pub struct Receiver {
    pub url: String,
    inner: Arc<Inner>,
}

impl Receiver {
    pub async fn start() -> Receiver {
        let inner = Arc::new(Inner::default());
        let app = Router::new()
            .fallback(answer)
            .with_state(Arc::clone(&inner));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        Receiver { url, inner }
    }

    /// Queues answers; once they run out the receiver answers 200.
    pub fn script(&self, answers: &[u16]) {
        let mut s = self.inner.script.lock().unwrap();
        s.extend(answers.iter().map(|a| (*a, Vec::new())));
    }

    /// Forgets the answers still queued: from now on, 200.
    pub fn clear_script(&self) {
        self.inner.script.lock().unwrap().clear();
    }

    pub fn script_with_headers(&self, status: u16, headers: Vec<(&'static str, String)>) {
        self.inner
            .script
            .lock()
            .unwrap()
            .push_back((status, headers));
    }

    pub fn verify_with(&self, secret: &str) {
        *self.inner.secret.lock().unwrap() = Some(secret.to_string());
    }

    /// Holds every request open this long before answering.
    pub fn delay(&self, d: Duration) {
        *self.inner.delay.lock().unwrap() = d;
    }

    /// Answers with these bytes instead of a short text.
    pub fn answer_body(&self, body: Vec<u8>) {
        *self.inner.body.lock().unwrap() = Some(body);
    }

    /// The most requests that were ever open at the same time.
    pub fn most_concurrent(&self) -> usize {
        self.inner.most_open.load(Ordering::SeqCst)
    }

    /// Requests open right now.
    pub fn open(&self) -> usize {
        self.inner.open.load(Ordering::SeqCst)
    }

    pub fn count(&self) -> usize {
        self.inner.got.lock().unwrap().len()
    }

    /// Waits (real time) until `n` requests have arrived.
    pub async fn wait_for(&self, n: usize) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while self.count() < n {
            assert!(
                tokio::time::Instant::now() < deadline,
                "receiver got {} of {n} requests",
                self.count()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub fn got(&self) -> Vec<Got> {
        self.inner.got.lock().unwrap().clone()
    }
}

struct OpenRequest<'a>(&'a std::sync::atomic::AtomicUsize);

impl Drop for OpenRequest<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

async fn answer(State(inner): State<Arc<Inner>>, headers: HeaderMap, body: Bytes) -> Response {
    let open = inner.open.fetch_add(1, Ordering::SeqCst) + 1;
    inner.most_open.fetch_max(open, Ordering::SeqCst);
    // Counted down however the request ends: a sender killed mid-request
    // drops this handler during its sleep, and a leaked count would show
    // as one request too many open for the rest of the test.
    let counted = OpenRequest(&inner.open);
    let secret = inner.secret.lock().unwrap().clone();
    let verified = secret.map(|s| {
        standardwebhooks::Webhook::new(&s)
            .and_then(|w| w.verify(&body, &headers))
            .is_ok()
    });
    inner.got.lock().unwrap().push(Got {
        headers,
        body,
        verified,
    });
    let delay = *inner.delay.lock().unwrap();
    tokio::time::sleep(delay).await;
    drop(counted);
    let (status, extra) = inner
        .script
        .lock()
        .unwrap()
        .pop_front()
        .unwrap_or((200, Vec::new()));
    let answer_body = inner
        .body
        .lock()
        .unwrap()
        .clone()
        .unwrap_or_else(|| b"receiver says hi".to_vec());
    let mut res = (StatusCode::from_u16(status).unwrap(), answer_body).into_response();
    for (k, v) in extra {
        res.headers_mut().insert(k, v.parse().unwrap());
    }
    res
}
