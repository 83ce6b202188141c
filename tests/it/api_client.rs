//! A REST client for tests: one account with an API key on a running
//! server, plus shortcuts for the calls most tests make.

use std::time::Duration;

use dakghar::{auth::api_key, clock::Clock, config::ServeConfig, store::Store};
use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::{
    helpers::{spawn_app_with, TestApp},
    receiver::Receiver,
};

pub struct Api {
    pub app: TestApp,
    pub key: String,
    pub http: reqwest::Client,
}

impl Api {
    pub async fn new(store: Store) -> Api {
        Self::with_config(store, ServeConfig::for_tests()).await
    }

    pub async fn with_config(store: Store, config: ServeConfig) -> Api {
        let app = spawn_app_with(store, config).await;
        let key = Self::key_for(&app, "acme").await;
        Api {
            app,
            key,
            http: reqwest::Client::new(),
        }
    }

    pub async fn key_for(app: &TestApp, account: &str) -> String {
        let acc = app
            .store
            .create_account(account, app.clock.now())
            .await
            .unwrap();
        let k = api_key::generate();
        app.store
            .create_api_key(&acc.id, "", &k.prefix, &k.hash, false, app.clock.now())
            .await
            .unwrap();
        k.key
    }

    pub async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        self.call_as(&self.key, method, path, body).await
    }

    pub async fn call_as(
        &self,
        key: &str,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        let mut req = self
            .http
            .request(method, self.app.url(path))
            .bearer_auth(key);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let res = req.send().await.unwrap();
        let status = res.status();
        (status, res.json().await.unwrap_or(Value::Null))
    }

    pub async fn endpoint(&self, receiver: &Receiver) -> Value {
        self.endpoint_with(receiver, json!({})).await
    }

    /// An endpoint for `receiver` with extra fields (limits, filters).
    pub async fn endpoint_with(&self, receiver: &Receiver, extra: Value) -> Value {
        let mut body = json!({ "url": receiver.url });
        if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
            b.extend(e.clone());
        }
        let (s, ep) = self
            .call(reqwest::Method::POST, "/api/v1/endpoints", Some(body))
            .await;
        assert_eq!(s, StatusCode::CREATED, "{ep}");
        receiver.verify_with(ep["secret"].as_str().unwrap());
        ep
    }

    pub async fn send(&self, body: Value) -> Value {
        let (s, out) = self
            .call(reqwest::Method::POST, "/api/v1/events", Some(body))
            .await;
        assert_eq!(s, StatusCode::ACCEPTED, "{out}");
        out
    }

    pub async fn detail(&self, id: &str) -> Value {
        let (s, d) = self
            .call(reqwest::Method::GET, &format!("/api/v1/events/{id}"), None)
            .await;
        assert_eq!(s, StatusCode::OK, "{d}");
        d
    }

    pub async fn tick(&self) -> usize {
        self.app.engine.tick().await.unwrap()
    }

    pub fn advance(&self, d: Duration) {
        self.app.clock.advance(d);
    }

    pub async fn delivery(&self, event: &Value) -> dakghar::store::Delivery {
        let id = event["deliveries"][0]["id"].as_str().unwrap();
        self.app.store.delivery(id).await.unwrap()
    }
}
