//! A platform onboards its customers (SPEC §10): the accounts API with a
//! platform key, every account route under /api/v1/accounts/{account}/…,
//! invitations, password resets and portal links, each single-use and
//! bounded in time on the test clock.

use std::{ops::Deref, time::Duration};

use dakghar::{
    accounts::platform,
    clock::Clock,
    config::ServeConfig,
    jobs::{
        expired_links,
        mailer::{MailSettings, Mailer},
    },
    store::{AccountRole, Role, Store},
};
use reqwest::{header, Method, StatusCode};
use serde_json::{json, Value};

use crate::{
    api_client::Api,
    helpers::{browser, location, server_fn, signed_in, spawn_app_with, Raw, TestDb, PASSWORD},
    receiver::Receiver,
    smtp_sink::SmtpSink,
};

on_both_backends!(
    a_platform_onboards_a_customer_by_its_external_id,
    account_and_platform_keys_each_keep_to_their_routes,
    a_key_revoked_on_another_node_ingests_nothing_more,
    every_account_route_takes_the_right_key,
    accounts_list_in_pages_and_delete_with_their_counts,
    every_account_route_answers_404_for_another_accounts_ids,
    invitations_work_once_and_for_72_hours,
    portal_links_open_once_until_their_ttl,
);
on_both_backends!(with_smtp_only_the_invitee_sees_the_invitation_link);
on_both_backends_db!(
    a_password_reset_works_once_for_30_minutes_and_ends_every_session,
    ended_links_and_the_mail_that_carried_them_are_forgotten,
);

/// A running server and a platform key for it: the REST client of
/// [`Api`], holding the platform's key instead of an account's.
pub struct Platform(Api);

impl Deref for Platform {
    type Target = Api;

    fn deref(&self) -> &Api {
        &self.0
    }
}

impl Platform {
    pub async fn new(store: Store) -> Platform {
        Self::with_config(store, ServeConfig::for_tests()).await
    }

    pub async fn with_config(store: Store, config: ServeConfig) -> Platform {
        let app = spawn_app_with(store, config).await;
        let key = platform::create_key(&app.store, "platform", app.clock.now())
            .await
            .unwrap()
            .key;
        Platform(Api {
            app,
            key,
            http: reqwest::Client::new(),
        })
    }

    /// A new account; returns its id.
    pub async fn account(&self, name: &str, external_id: Option<&str>) -> String {
        let (status, body) = self
            .call(
                Method::POST,
                "/api/v1/accounts",
                Some(json!({ "name": name, "external_id": external_id })),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        body["id"].as_str().unwrap().to_string()
    }

    /// A portal link of `account` for `role`.
    pub async fn portal_link(&self, account: &str, body: Value) -> String {
        let (status, out) = self
            .call(
                Method::POST,
                &format!("/api/v1/accounts/{account}/portal-sessions"),
                Some(body),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{out}");
        out["url"].as_str().unwrap().to_string()
    }
}

/// The path and query of an absolute link this server made.
fn path_of(link: &str) -> String {
    let url = reqwest::Url::parse(link).unwrap();
    match url.query() {
        Some(q) => format!("{}?{q}", url.path()),
        None => url.path().to_string(),
    }
}

async fn a_platform_onboards_a_customer_by_its_external_id(store: Store) {
    let p = Platform::new(store).await;
    let (status, created) = p
        .call(
            Method::POST,
            "/api/v1/accounts",
            Some(json!({ "name": "Customer 42", "external_id": "cus_42" })),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(created["external_id"], "cus_42");
    assert!(created["id"].as_str().unwrap().starts_with("acc_"));
    let id = created["id"].as_str().unwrap().to_string();

    // Found by either name of it.
    for reference in ["cus_42", id.as_str()] {
        let (status, got) = p
            .call(Method::GET, &format!("/api/v1/accounts/{reference}"), None)
            .await;
        assert_eq!(
            (status, got["id"].as_str()),
            (StatusCode::OK, Some(id.as_str()))
        );
    }
    // Taken names and ids, and ids that cannot be one.
    for (body, want) in [
        (
            json!({ "name": "Other", "external_id": "cus_42" }),
            StatusCode::CONFLICT,
        ),
        (json!({ "name": "Customer 42" }), StatusCode::CONFLICT),
        (
            json!({ "name": "Spaced", "external_id": "cus 43" }),
            StatusCode::BAD_REQUEST,
        ),
        (
            json!({ "name": "Slashed", "external_id": "cus/43" }),
            StatusCode::BAD_REQUEST,
        ),
        // It would read as another account's Dakghar id in every path.
        (
            json!({ "name": "Shadow", "external_id": format!("acc_{}", "x".repeat(22)) }),
            StatusCode::BAD_REQUEST,
        ),
        (json!({ "name": " " }), StatusCode::BAD_REQUEST),
        (json!({ "name": "X", "extra": 1 }), StatusCode::BAD_REQUEST),
    ] {
        let (status, err) = p
            .call(Method::POST, "/api/v1/accounts", Some(body.clone()))
            .await;
        assert_eq!(status, want, "{body}: {err}");
        assert!(err["error"]["code"].is_string(), "{err}");
    }

    // One key ingests for the customer, named by the platform's id.
    let rx = Receiver::start().await;
    let (status, ep) = p
        .call(
            Method::POST,
            "/api/v1/accounts/cus_42/endpoints",
            Some(json!({ "url": rx.url })),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{ep}");
    let (status, ev) = p
        .call(
            Method::POST,
            "/api/v1/accounts/cus_42/events",
            Some(json!({ "id": "order-1", "type": "invoice.paid", "payload": { "n": 1 } })),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{ev}");
    assert_eq!(p.app.engine.tick().await.unwrap(), 1);
    assert_eq!(rx.count(), 1);
    let (status, detail) = p
        .call(
            Method::GET,
            &format!("/api/v1/accounts/{id}/events/order-1"),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(detail["deliveries"][0]["state"], "delivered");

    // Renamed, and the external id cleared: only the Dakghar id finds it.
    let (status, patched) = p
        .call(
            Method::PATCH,
            "/api/v1/accounts/cus_42",
            Some(json!({ "name": "Customer Forty-Two", "external_id": null })),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{patched}");
    assert_eq!(patched["name"], "Customer Forty-Two");
    assert_eq!(patched["external_id"], Value::Null);
    let (status, _) = p.call(Method::GET, "/api/v1/accounts/cus_42", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = p
        .call(Method::GET, &format!("/api/v1/accounts/{id}"), None)
        .await;
    assert_eq!(status, StatusCode::OK);
}

async fn account_and_platform_keys_each_keep_to_their_routes(store: Store) {
    let p = Platform::new(store).await;
    let account_key = Api::key_for(&p.app, "acme").await;
    let acme = p.app.store.account_by_name("acme").await.unwrap().id;
    for (path, method) in [
        ("/api/v1/accounts".to_string(), Method::GET),
        (format!("/api/v1/accounts/{acme}"), Method::GET),
        (format!("/api/v1/accounts/{acme}/events"), Method::GET),
        (
            format!("/api/v1/accounts/{acme}/portal-sessions"),
            Method::POST,
        ),
    ] {
        let (status, err) = p.call_as(&account_key, method, &path, None).await;
        assert_eq!(
            status,
            StatusCode::FORBIDDEN,
            "account key on {path}: {err}"
        );
        assert_eq!(err["error"]["code"], "forbidden");
    }
    let (status, err) = p.call(Method::GET, "/api/v1/events", None).await;
    assert_eq!(
        status,
        StatusCode::FORBIDDEN,
        "platform key without an account: {err}"
    );
    let (status, _) = p
        .call(Method::GET, "/api/v1/accounts/nope/events", None)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "an unknown account");
    let (status, _) = p.call(Method::GET, "/api/v1/accounts/nope", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    // The account's own key keeps working exactly as before.
    let (status, _) = p
        .call_as(&account_key, Method::GET, "/api/v1/events", None)
        .await;
    assert_eq!(status, StatusCode::OK);
    // A revoked platform key opens nothing.
    let keys = platform::keys(&p.app.store).await.unwrap();
    assert_eq!(keys[0].name, "platform");
    assert_eq!(
        keys[0].last_used_at,
        Some(p.app.clock.now().millis()),
        "its use is on record"
    );
    platform::revoke_key(&p.app.store, &keys[0].id, p.app.clock.now())
        .await
        .unwrap();
    let (status, _) = p.call(Method::GET, "/api/v1/accounts", None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
}

/// Ingest takes a key it saw before from the node's cache; revoking it
/// on another node (straight in the store: this node hears nothing)
/// still stops the very next event, whose write finds the key revoked.
async fn a_key_revoked_on_another_node_ingests_nothing_more(store: Store) {
    let p = Platform::new(store).await;
    let account_key = Api::key_for(&p.app, "acme").await;
    let acme = p.app.store.account_by_name("acme").await.unwrap().id;
    let by_platform = format!("/api/v1/accounts/{acme}/events");
    let send = |key: Option<&str>, path: &str, id: &str| {
        let body = Some(json!({ "id": id, "type": "t", "payload": {} }));
        let (p, key, path) = (&p, key.map(str::to_owned), path.to_owned());
        async move {
            let (status, out) = match key {
                Some(key) => p.call_as(&key, Method::POST, &path, body).await,
                None => p.call(Method::POST, &path, body).await,
            };
            (status, out["error"]["code"].clone())
        }
    };
    for _ in 0..2 {
        assert_eq!(
            send(Some(&account_key), "/api/v1/events", "a1").await.0,
            StatusCode::ACCEPTED
        );
        assert_eq!(send(None, &by_platform, "p1").await.0, StatusCode::ACCEPTED);
    }

    let now = p.app.clock.now();
    let key = p.app.store.list_api_keys(&acme).await.unwrap()[0].clone();
    let key_id = key.id.clone();
    p.app
        .store
        .revoke_api_key(&acme, &key_id, now)
        .await
        .unwrap();
    let platform_key = platform::keys(&p.app.store).await.unwrap()[0].id.clone();
    p.app
        .store
        .revoke_platform_key(&platform_key, now)
        .await
        .unwrap();
    let refused = (StatusCode::UNAUTHORIZED, json!("unauthorized"));
    // Uses are recorded once a minute: the next one would be.
    p.app.clock.advance(Duration::from_secs(61));
    // "a1" again first: its write finds the key revoked before it finds
    // the id taken.
    for (key, path, id) in [
        (Some(account_key.as_str()), "/api/v1/events", "a1"),
        (None, by_platform.as_str(), "p2"),
        (Some(account_key.as_str()), "/api/v1/events", "a2"),
        (Some(account_key.as_str()), "/api/v1/events", "a3"),
    ] {
        assert_eq!(send(key, path, id).await, refused, "{id}");
    }
    let last_used = p.app.store.list_api_keys(&acme).await.unwrap()[0].last_used_at;
    assert_eq!(
        (key.last_used_at, last_used),
        (Some(now.millis()), Some(now.millis())),
        "a refused key's use is not recorded, though a minute passed"
    );
    for id in ["a2", "p2", "a3"] {
        assert!(
            matches!(
                p.app.store.event(&acme, id).await,
                Err(dakghar::store::StoreError::NotFound)
            ),
            "{id} was not stored"
        );
    }
    let fresh = Api::key_for(&p.app, "globex").await;
    assert_eq!(
        send(Some(&fresh), "/api/v1/events", "g1").await.0,
        StatusCode::ACCEPTED,
        "other keys carry on"
    );
}

async fn accounts_list_in_pages_and_delete_with_their_counts(store: Store) {
    let p = Platform::new(store).await;
    let mut made = Vec::new();
    for i in 0..5 {
        made.push(
            p.account(&format!("Customer {i}"), Some(&format!("cus_{i}")))
                .await,
        );
        p.app.clock.advance(Duration::from_millis(1));
    }
    let mut seen = Vec::new();
    let mut path = "/api/v1/accounts?limit=2".to_string();
    loop {
        let (status, page) = p.call(Method::GET, &path, None).await;
        assert_eq!(status, StatusCode::OK, "{page}");
        let data = page["data"].as_array().unwrap();
        assert!(data.len() <= 2);
        seen.extend(data.iter().map(|a| a["id"].as_str().unwrap().to_string()));
        match page["next_cursor"].as_str() {
            Some(c) => path = format!("/api/v1/accounts?limit=2&cursor={c}"),
            None => break,
        }
    }
    assert_eq!(seen, made, "every account once, oldest first");
    let (status, _) = p.call(Method::GET, "/api/v1/accounts?limit=0", None).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, _) = p
        .call(Method::GET, "/api/v1/accounts?cursor=nonsense", None)
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);

    // The first one gets an endpoint, three events with an attempt each,
    // a member and a key; deleting it says so and leaves the rest alone.
    let rx = Receiver::start().await;
    let (status, _) = p
        .call(
            Method::POST,
            "/api/v1/accounts/cus_0/endpoints",
            Some(json!({ "url": rx.url })),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    for i in 0..3 {
        let (status, _) = p
            .call(
                Method::POST,
                "/api/v1/accounts/cus_0/events",
                Some(json!({ "type": "t", "payload": { "i": i } })),
            )
            .await;
        assert_eq!(status, StatusCode::ACCEPTED);
    }
    assert_eq!(p.app.engine.tick().await.unwrap(), 3);
    let (status, _) = p
        .call(
            Method::POST,
            "/api/v1/accounts/cus_1/events",
            Some(json!({ "type": "t", "payload": {} })),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let (status, _) = p
        .call(
            Method::POST,
            "/api/v1/accounts/cus_0/users",
            Some(json!({ "email": "dev@customer0.example", "role": "developer" })),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, gone) = p.call(Method::DELETE, "/api/v1/accounts/cus_0", None).await;
    assert_eq!(status, StatusCode::OK, "{gone}");
    assert_eq!(gone["id"], made[0].as_str());
    assert_eq!(
        gone["deleted"],
        json!({ "events": 3, "deliveries": 3, "attempts": 3, "endpoints": 1, "users": 0 })
    );
    let (status, _) = p.call(Method::GET, "/api/v1/accounts/cus_0", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = p.call(Method::DELETE, "/api/v1/accounts/cus_0", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "deleted once");
    let (status, others) = p
        .call(Method::GET, "/api/v1/accounts/cus_1/events", None)
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        others["data"].as_array().unwrap().len(),
        1,
        "another account is untouched"
    );
}

async fn every_account_route_answers_404_for_another_accounts_ids(store: Store) {
    let p = Platform::new(store).await;
    p.account("Customer A", Some("cus_a")).await;
    p.account("Customer B", Some("cus_b")).await;
    let rx = Receiver::start().await;
    rx.script(&[422]);
    let (_, ep) = p
        .call(
            Method::POST,
            "/api/v1/accounts/cus_b/endpoints",
            Some(json!({ "url": rx.url })),
        )
        .await;
    let (_, ev) = p
        .call(
            Method::POST,
            "/api/v1/accounts/cus_b/events",
            Some(json!({ "id": "b-1", "type": "t", "payload": {} })),
        )
        .await;
    p.app.engine.tick().await.unwrap();
    let ep = ep["id"].as_str().unwrap();
    let dlv = ev["deliveries"][0]["id"].as_str().unwrap();
    let a = "/api/v1/accounts/cus_a";
    for (method, path, body) in [
        (Method::GET, format!("{a}/endpoints/{ep}"), None),
        (
            Method::PATCH,
            format!("{a}/endpoints/{ep}"),
            Some(json!({ "description": "x" })),
        ),
        (Method::DELETE, format!("{a}/endpoints/{ep}"), None),
        (Method::POST, format!("{a}/endpoints/{ep}/pause"), None),
        (Method::POST, format!("{a}/endpoints/{ep}/resume"), None),
        (
            Method::POST,
            format!("{a}/endpoints/{ep}/rotate-secret"),
            None,
        ),
        (Method::GET, format!("{a}/endpoints/{ep}/health"), None),
        (Method::GET, format!("{a}/events/b-1"), None),
        (Method::POST, format!("{a}/deliveries/{dlv}/resend"), None),
    ] {
        let (status, err) = p.call(method.clone(), &path, body).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{method} {path}: {err}");
        assert_eq!(err["error"]["code"], "not_found");
    }
    let (_, list) = p.call(Method::GET, &format!("{a}/events"), None).await;
    assert_eq!(list["data"], json!([]), "A sees none of B's events");
    // B's own are as they were, and reachable the same way.
    let (status, b) = p
        .call(
            Method::GET,
            &format!("/api/v1/accounts/cus_b/endpoints/{ep}"),
            None,
        )
        .await;
    assert_eq!(
        (status, b["state"].as_str()),
        (StatusCode::OK, Some("active"))
    );
    let (status, _) = p
        .call(
            Method::POST,
            &format!("/api/v1/accounts/cus_b/deliveries/{dlv}/resend"),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED);
}

async fn invitations_work_once_and_for_72_hours(store: Store) {
    let p = Platform::new(store).await;
    let account = p.account("Customer A", Some("cus_a")).await;
    let invite = |email: &str, role: &str| {
        let body = json!({ "email": email, "role": role });
        let p = &p;
        async move {
            p.call(Method::POST, "/api/v1/accounts/cus_a/users", Some(body))
                .await
        }
    };
    let (status, out) = invite("Dev@Customer-A.example", "developer").await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    assert_eq!(out["email"], "dev@customer-a.example");
    assert_eq!(out["emailed"], false, "no SMTP in this test");
    let link = path_of(out["url"].as_str().unwrap());
    assert!(link.starts_with("/invitations/lnk_"), "{link}");

    let web = browser();
    let page = web.get(p.app.url(&link)).send().await.unwrap();
    assert_eq!(page.status(), StatusCode::OK);
    assert!(page.text().await.unwrap().contains("Join your team"));
    let accept = |web: reqwest::Client, link: String, password: &'static str| {
        let url = p.app.url(&link);
        async move {
            web.post(url)
                .form(&[("password", password)])
                .send()
                .await
                .unwrap()
        }
    };
    let short = accept(web.clone(), link.clone(), "short").await;
    assert!(
        location(&short).ends_with("error=short"),
        "{}",
        location(&short)
    );
    // The page puts the code in its own words, and no words of a link's.
    let page = |query: &str| {
        let url = p.app.url(&format!("{link}?{query}"));
        async move {
            browser()
                .get(url)
                .send()
                .await
                .unwrap()
                .text()
                .await
                .unwrap()
        }
    };
    assert!(page("error=short")
        .await
        .contains("too short: use at least 8 characters"));
    assert!(!page("error=Call+support+at+555-0100")
        .await
        .contains("555-0100"));
    let accepted = accept(web.clone(), link.clone(), PASSWORD).await;
    assert_eq!(
        (accepted.status(), location(&accepted)),
        (StatusCode::SEE_OTHER, "/events".to_string())
    );
    let (status, me) = server_fn(&p.app, &web, "me", &[]).await;
    assert_eq!(status, StatusCode::OK, "signed in at once: {me}");
    assert_eq!(me["email"], "dev@customer-a.example");
    assert_eq!(me["role"], "Developer");
    let member = p
        .app
        .store
        .user_by_email("dev@customer-a.example")
        .await
        .unwrap();
    assert_eq!(member.account_id, account);

    // Once only.
    let again = accept(browser(), link.clone(), PASSWORD).await;
    assert!(
        location(&again).ends_with("error=unusable"),
        "{}",
        location(&again)
    );
    // Not after 72 hours.
    let (_, late) = invite("late@customer-a.example", "viewer").await;
    p.app.clock.advance(Duration::from_secs(72 * 3600 + 60));
    let late = accept(browser(), path_of(late["url"].as_str().unwrap()), PASSWORD).await;
    assert!(location(&late).ends_with("error=unusable"));
    assert!(p
        .app
        .store
        .user_by_email("late@customer-a.example")
        .await
        .is_err());
    // Nor altered.
    let (_, fresh) = invite("fresh@customer-a.example", "viewer").await;
    let mut altered = path_of(fresh["url"].as_str().unwrap());
    // Another last character, whatever it was (an 'x' stayed itself once
    // in 64 runs, and the "tampered" link worked).
    let last = altered.pop();
    altered.push(if last == Some('x') { 'y' } else { 'x' });
    let tampered = accept(browser(), altered, PASSWORD).await;
    assert!(location(&tampered).ends_with("error=unusable"));

    // Bad input.
    let (status, _) = invite("dev@customer-a.example", "viewer").await;
    assert_eq!(status, StatusCode::CONFLICT, "already a member");
    let (status, _) = invite("new@customer-a.example", "boss").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, _) = invite("not an email", "viewer").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, _) = p
        .call(
            Method::POST,
            "/api/v1/accounts/nope/users",
            Some(json!({ "email": "a@b.example", "role": "viewer" })),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

async fn a_password_reset_works_once_for_30_minutes_and_ends_every_session(db: &TestDb) {
    let p = Platform::new(db.store.clone()).await;
    let seeded =
        crate::helpers::seed_user(&p.app.store, &p.app.clock, "Customer A", "ana@a.example").await;
    let sign_in = |password: &'static str| {
        let url = p.app.url("/login");
        async move {
            let web = browser();
            let res = web
                .post(url)
                .form(&[
                    ("email", "ana@a.example"),
                    ("password", password),
                    ("next", ""),
                ])
                .send()
                .await
                .unwrap();
            (web, location(&res))
        }
    };
    let (laptop, at) = sign_in(PASSWORD).await;
    assert_eq!(at, "/events");
    let (phone, _) = sign_in(PASSWORD).await;
    for web in [&laptop, &phone] {
        assert_eq!(server_fn(&p.app, web, "me", &[]).await.0, StatusCode::OK);
    }

    // The same answer for an email with an account and one without.
    let ask = |email: &'static str| {
        let url = p.app.url("/forgot-password");
        async move {
            let res = browser()
                .post(url)
                .form(&[("email", email)])
                .send()
                .await
                .unwrap();
            location(&res)
        }
    };
    assert_eq!(ask("ana@a.example").await, "/forgot-password?sent=1");
    assert_eq!(ask("nobody@a.example").await, "/forgot-password?sent=1");
    let link = reset_link(db, "ana@a.example").await;
    assert!(link.starts_with("/reset-password/lnk_"), "{link}");
    assert_eq!(
        reset_link_count(db, "nobody@a.example").await,
        0,
        "nothing sent to nobody"
    );
    // The personal email is not on the account's notifications page.
    let (_, notes) = server_fn(&p.app, &laptop, "notifications", &[]).await;
    assert_eq!(notes, json!([]), "{notes}");
    // Asked twice: either link works, and using one ends the other.
    let earlier = link;
    p.app.clock.advance(Duration::from_secs(1));
    assert_eq!(ask("ana@a.example").await, "/forgot-password?sent=1");
    let link = reset_link(db, "ana@a.example").await;
    assert_ne!(link, earlier);

    let reset = |link: String, password: &'static str| {
        let url = p.app.url(&link);
        async move {
            let res = browser()
                .post(url)
                .form(&[("password", password)])
                .send()
                .await
                .unwrap();
            location(&res)
        }
    };
    assert_eq!(
        reset(link.clone(), "a new long passphrase").await,
        "/login?reset=1"
    );
    for web in [&laptop, &phone] {
        let (status, _) = server_fn(&p.app, web, "me", &[]).await;
        assert_eq!(
            status,
            StatusCode::UNAUTHORIZED,
            "every old session is signed out"
        );
    }
    assert!(
        reset(link, "another passphrase")
            .await
            .ends_with("error=unusable"),
        "once"
    );
    assert!(
        reset(earlier, "another passphrase")
            .await
            .ends_with("error=unusable"),
        "the other link ended with the reset"
    );
    assert_eq!(
        sign_in(PASSWORD).await.1,
        "/login?error=1",
        "the old password is gone"
    );
    let (fresh, at) = sign_in("a new long passphrase").await;
    assert_eq!(at, "/events");
    assert_eq!(server_fn(&p.app, &fresh, "me", &[]).await.0, StatusCode::OK);
    assert_eq!(seeded.user.email, "ana@a.example");

    // Not after 30 minutes.
    assert_eq!(ask("ana@a.example").await, "/forgot-password?sent=1");
    let late = reset_link(db, "ana@a.example").await;
    p.app.clock.advance(Duration::from_secs(31 * 60));
    assert!(reset(late, "yet another passphrase")
        .await
        .ends_with("error=unusable"));

    // Throttled like sign-in, per email, known or not: four are free and
    // the fifth locks the email for a second.
    for email in ["ana@a.example", "nobody@a.example"] {
        p.app.clock.advance(Duration::from_secs(25 * 3600));
        for _ in 0..5 {
            assert_eq!(ask(email).await, "/forgot-password?sent=1", "{email}");
        }
        assert!(ask(email).await.contains("error=throttled"), "{email}");
    }
}

/// The newest reset link emailed to `email`, from the outbox.
async fn reset_link(db: &TestDb, email: &str) -> String {
    let sql = "SELECT body FROM notifications WHERE recipient = $1 AND kind = 'password_reset' \
               ORDER BY created_at DESC LIMIT 1";
    let body: String = match &db.raw().await {
        Raw::Sqlite(p) => sqlx::query_scalar(sql)
            .bind(email)
            .fetch_one(p)
            .await
            .unwrap(),
        Raw::Postgres(p) => sqlx::query_scalar(sql)
            .bind(email)
            .fetch_one(p)
            .await
            .unwrap(),
    };
    let start = body.find("http").expect("a link in the email");
    let link: String = body[start..]
        .chars()
        .take_while(|c| !c.is_whitespace())
        .collect();
    path_of(&link)
}

async fn reset_link_count(db: &TestDb, email: &str) -> i64 {
    let sql = "SELECT count(*) FROM notifications WHERE recipient = $1";
    match &db.raw().await {
        Raw::Sqlite(p) => sqlx::query_scalar(sql)
            .bind(email)
            .fetch_one(p)
            .await
            .unwrap(),
        Raw::Postgres(p) => sqlx::query_scalar(sql)
            .bind(email)
            .fetch_one(p)
            .await
            .unwrap(),
    }
}

async fn portal_links_open_once_until_their_ttl(store: Store) {
    let p = Platform::new(store).await;
    let account = p.account("Customer A", Some("cus_a")).await;
    p.account("Customer B", Some("cus_b")).await;
    let link = p
        .portal_link(
            "cus_a",
            json!({ "role": "viewer", "ttl": "10m", "return_url": "https://app.example.com/settings" }),
        )
        .await;
    assert!(link.starts_with(&p.app.base), "{link}");
    // An altered secret opens nothing, and does not use the link up.
    let mut tampered = link.clone();
    let last = tampered.pop().unwrap();
    tampered.push(if last == 'A' { 'B' } else { 'A' });
    let refused = browser().get(&tampered).send().await.unwrap();
    assert_eq!(refused.status(), StatusCode::GONE);
    assert!(refused.headers().get(header::SET_COOKIE).is_none());
    let web = browser();
    let opened = web.get(&link).send().await.unwrap();
    assert_eq!(
        (opened.status(), location(&opened)),
        (StatusCode::SEE_OTHER, "/events".to_string())
    );
    let cookie = opened.headers()[header::SET_COOKIE]
        .to_str()
        .unwrap()
        .to_string();
    assert!(
        cookie.starts_with("dakghar_portal=") && cookie.contains("HttpOnly"),
        "{cookie}"
    );
    assert!(
        cookie.contains("SameSite=Lax") && cookie.contains("Max-Age=600"),
        "{cookie}"
    );
    let (status, me) = server_fn(&p.app, &web, "me", &[]).await;
    assert_eq!(status, StatusCode::OK, "{me}");
    assert_eq!(
        (me["portal"].as_bool(), me["role"].as_str()),
        (Some(true), Some("Viewer"))
    );
    assert_eq!(me["account_name"], "Customer A");
    assert_eq!(
        me["back"],
        json!(["https://app.example.com/settings", "app.example.com"])
    );
    let page = web.get(p.app.url("/events")).send().await.unwrap();
    assert_eq!(page.status(), StatusCode::OK);
    assert!(page
        .text()
        .await
        .unwrap()
        .contains("Back to app.example.com"));

    // A second open grants nothing, and says the same as any bad link.
    let second = browser().get(&link).send().await.unwrap();
    assert_eq!(second.status(), StatusCode::GONE);
    assert!(
        second.headers().get(header::SET_COOKIE).is_none(),
        "no session"
    );
    let neutral = second.text().await.unwrap();
    assert!(neutral.contains("This link was used or has expired"));
    let bogus = browser()
        .get(p.app.url("/portal/lnk_nothing.at_all"))
        .send()
        .await
        .unwrap();
    assert_eq!(bogus.status(), StatusCode::GONE);
    assert_eq!(
        bogus.text().await.unwrap(),
        neutral,
        "one page for every bad link"
    );

    // The session lasts as long as the link said, not a moment longer.
    p.app.clock.advance(Duration::from_secs(11 * 60));
    let (status, _) = server_fn(&p.app, &web, "me", &[]).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    // A link opened too late grants nothing.
    let late = p.portal_link("cus_a", json!({ "ttl": "1m" })).await;
    p.app.clock.advance(Duration::from_secs(120));
    assert_eq!(
        browser().get(&late).send().await.unwrap().status(),
        StatusCode::GONE
    );

    // A browser a user is signed into keeps its user: someone else's link
    // is refused there, and stays unused for the browser it was meant for.
    let hash = dakghar::auth::password::hash(PASSWORD).unwrap();
    p.app
        .store
        .create_member(
            &account,
            "owner@customer-a.example",
            &hash,
            Role::Member,
            AccountRole::Owner,
            p.app.clock.now(),
        )
        .await
        .unwrap();
    let user = signed_in(&p.app, "owner@customer-a.example").await;
    let foreign = p.portal_link("cus_b", json!({})).await;
    let refused = user.get(&foreign).send().await.unwrap();
    assert_eq!(refused.status(), StatusCode::CONFLICT);
    assert!(refused.headers().get(header::SET_COOKIE).is_none());
    assert!(refused
        .text()
        .await
        .unwrap()
        .contains("signed in to your own account"));
    let (_, me) = server_fn(&p.app, &user, "me", &[]).await;
    assert_eq!(
        (me["portal"].as_bool(), me["account_name"].as_str()),
        (Some(false), Some("Customer A"))
    );
    let meant = browser();
    assert_eq!(
        meant.get(&foreign).send().await.unwrap().status(),
        StatusCode::SEE_OTHER
    );
    // Signing in where a portal session lives: the user's session wins.
    let both = browser();
    both.get(&p.portal_link("cus_b", json!({})).await)
        .send()
        .await
        .unwrap();
    let res = both
        .post(p.app.url("/login"))
        .form(&[
            ("email", "owner@customer-a.example"),
            ("password", PASSWORD),
            ("next", ""),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(location(&res), "/events");
    let (_, me) = server_fn(&p.app, &both, "me", &[]).await;
    assert_eq!(
        (me["portal"].as_bool(), me["account_name"].as_str()),
        (Some(false), Some("Customer A"))
    );

    // Bad input.
    for body in [
        json!({ "role": "owner" }),
        json!({ "role": "admin" }),
        json!({ "ttl": "8d" }),
        json!({ "ttl": "soon" }),
        json!({ "return_url": "javascript:alert(1)" }),
        json!({ "return_url": "/relative" }),
        json!({ "unknown": true }),
    ] {
        let (status, err) = p
            .call(
                Method::POST,
                "/api/v1/accounts/cus_a/portal-sessions",
                Some(body.clone()),
            )
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {err}");
    }
}

/// Every account route × every kind of caller: an account's key at
/// /api/v1/…, a platform key at /api/v1/accounts/{account}/…, and each
/// refused where it does not belong.
async fn every_account_route_takes_the_right_key(store: Store) {
    let p = Platform::new(store).await;
    let account_key = Api::key_for(&p.app, "acme").await;
    let rx = Receiver::start().await;
    let (_, ep) = p
        .call_as(
            &account_key,
            Method::POST,
            "/api/v1/endpoints",
            Some(json!({ "url": rx.url })),
        )
        .await;
    let ep = ep["id"].as_str().unwrap().to_string();
    let (_, ev) = p
        .call_as(
            &account_key,
            Method::POST,
            "/api/v1/events",
            Some(json!({ "id": "e-1", "type": "t", "payload": {} })),
        )
        .await;
    let dlv = ev["deliveries"][0]["id"].as_str().unwrap().to_string();
    p.app.engine.tick().await.unwrap();
    let routes = [
        (Method::GET, "/events".to_string(), None),
        (Method::GET, "/events/e-1".to_string(), None),
        (Method::POST, format!("/deliveries/{dlv}/resend"), None),
        (Method::GET, "/endpoints".to_string(), None),
        (Method::GET, format!("/endpoints/{ep}"), None),
        (
            Method::PATCH,
            format!("/endpoints/{ep}"),
            Some(json!({ "description": "d" })),
        ),
        (Method::POST, format!("/endpoints/{ep}/pause"), None),
        (Method::POST, format!("/endpoints/{ep}/resume"), None),
        (Method::POST, format!("/endpoints/{ep}/rotate-secret"), None),
        (Method::GET, format!("/endpoints/{ep}/health"), None),
        (
            Method::POST,
            "/events".to_string(),
            Some(json!({ "type": "t", "payload": {} })),
        ),
        (
            Method::POST,
            "/endpoints".to_string(),
            Some(json!({ "url": rx.url })),
        ),
        (Method::DELETE, format!("/endpoints/{ep}"), None),
    ];
    let account = p.app.store.account_by_name("acme").await.unwrap().id;
    let anonymous = reqwest::Client::new();
    for (method, path, body) in routes {
        let own = format!("/api/v1{path}");
        let platform = format!("/api/v1/accounts/{account}{path}");
        for (key, at, want) in [
            (p.key.as_str(), own.as_str(), StatusCode::FORBIDDEN),
            (
                account_key.as_str(),
                platform.as_str(),
                StatusCode::FORBIDDEN,
            ),
        ] {
            let (status, err) = p.call_as(key, method.clone(), at, body.clone()).await;
            assert_eq!(status, want, "{method} {at}: {err}");
        }
        let res = anonymous
            .request(method.clone(), p.app.url(&own))
            .send()
            .await
            .unwrap();
        assert_eq!(
            res.status(),
            StatusCode::UNAUTHORIZED,
            "{method} {own} without a key"
        );
        // Resending twice within the budget is fine; a rotated secret is
        // rotated again: each call just has to be accepted.
        let (status, err) = p.call(method.clone(), &platform, body.clone()).await;
        assert!(
            status.is_success(),
            "platform key: {method} {platform}: {status} {err}"
        );
        if method == Method::DELETE {
            continue;
        }
        let (status, err) = p
            .call_as(&account_key, method.clone(), &own, body.clone())
            .await;
        assert!(
            status.is_success() || status == StatusCode::CONFLICT,
            "account key: {method} {own}: {status} {err}"
        );
    }
}

async fn with_smtp_only_the_invitee_sees_the_invitation_link(store: Store) {
    let sink = SmtpSink::start().await;
    let settings = MailSettings {
        smtp_url: sink.url(),
        from: "Dakghar <team@dakghar.test>".into(),
        every: Duration::from_secs(3600),
        // Alerts are copied to support; a personal email never is.
        support: Some("support@platform.example".into()),
    };
    let mut config = ServeConfig::for_tests();
    config.mail = Some(settings.clone());
    let p = Platform::with_config(store, config).await;
    p.account("Customer A", Some("cus_a")).await;
    let (status, out) = p
        .call(
            Method::POST,
            "/api/v1/accounts/cus_a/users",
            Some(json!({ "email": "dev@customer-a.example", "role": "developer" })),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    assert_eq!((&out["emailed"], &out["url"]), (&json!(true), &Value::Null));
    // The mailer (a worker node's job, run here by hand) takes it to the
    // invitee's inbox, and the copy in the outbox loses the link.
    let sent = Mailer::new(&settings)
        .unwrap()
        .send_due(&p.app.store, p.app.clock.now())
        .await
        .unwrap();
    assert_eq!((sent.sent, sent.failed), (1, 0));
    let mail = sink.mails().pop().unwrap();
    assert_eq!(mail.to, vec!["<dev@customer-a.example>".to_string()]);
    let body = mail.data.replace("=\r\n", "");
    assert!(body.contains("/invitations/lnk_"), "{body}");
}

async fn ended_links_and_the_mail_that_carried_them_are_forgotten(db: &TestDb) {
    let p = Platform::new(db.store.clone()).await;
    p.account("Customer A", Some("cus_a")).await;
    let (status, _) = p
        .call(
            Method::POST,
            "/api/v1/accounts/cus_a/users",
            Some(json!({ "email": "dev@customer-a.example", "role": "developer" })),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    p.portal_link("cus_a", json!({ "ttl": "1h" })).await;
    let counts = || async {
        let sql = [
            "SELECT count(*) FROM access_links",
            "SELECT count(*) FROM notifications WHERE recipient IS NOT NULL",
        ];
        let mut out = [0i64; 2];
        for (n, sql) in out.iter_mut().zip(sql) {
            *n = match &db.raw().await {
                Raw::Sqlite(c) => sqlx::query_scalar(sql).fetch_one(c).await.unwrap(),
                Raw::Postgres(c) => sqlx::query_scalar(sql).fetch_one(c).await.unwrap(),
            };
        }
        out
    };
    let run = || expired_links::run_once(&p.app.store, p.app.clock.now());
    assert_eq!(counts().await, [2, 1]);
    assert_eq!(run().await.unwrap(), 0, "nothing has ended yet");
    // A day after the portal link's hour: it goes; the invitation is open.
    p.app.clock.advance(Duration::from_secs(25 * 3600));
    assert_eq!(run().await.unwrap(), 1);
    assert_eq!(counts().await, [1, 1]);
    // The invitation ended at 72 hours: its mail goes, its row a day later.
    p.app.clock.advance(Duration::from_secs(48 * 3600));
    assert_eq!(run().await.unwrap(), 1);
    assert_eq!(counts().await, [1, 0]);
    p.app.clock.advance(Duration::from_secs(24 * 3600));
    assert_eq!(run().await.unwrap(), 1);
    assert_eq!(counts().await, [0, 0]);
}
