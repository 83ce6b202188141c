//! Signing in and out through the real HTTP server, on both backends.

use std::time::{Duration, Instant};

use dakghar::{auth::throttle, dashboard::session::COOKIE_NAME, store::Store};
use reqwest::{header, StatusCode};

use crate::helpers::{browser, location, seed_user, spawn_app, PASSWORD};

on_both_backends!(
    pages_redirect_to_login_without_a_session,
    a_wrong_password_or_unknown_email_gets_the_same_answer_and_no_session,
    the_right_password_opens_events_with_the_users_email_and_account,
    signing_in_cycles_the_session_id_and_logout_destroys_it,
    server_functions_refuse_anonymous_callers,
);

fn session_cookie(res: &reqwest::Response) -> Option<String> {
    res.headers()
        .get_all(header::SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|c| c.starts_with(&format!("{COOKIE_NAME}=")))
        .map(str::to_string)
}

async fn sign_in(
    client: &reqwest::Client,
    base: &str,
    email: &str,
    password: &str,
) -> reqwest::Response {
    client
        .post(format!("{base}/login"))
        .form(&[("email", email), ("password", password), ("next", "")])
        .send()
        .await
        .expect("POST /login")
}

async fn pages_redirect_to_login_without_a_session(store: Store) {
    let app = spawn_app(store).await;
    let client = browser();

    let res = client
        .get(app.url("/events?state=failed"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&res), "/login?next=%2Fevents%3Fstate%3Dfailed");

    for path in ["/", "/endpoints", "/no-such-page"] {
        let res = client.get(app.url(path)).send().await.unwrap();
        assert!(res.status().is_redirection(), "{path}: {}", res.status());
        assert!(
            location(&res).starts_with("/login") || location(&res) == "/events",
            "{path}"
        );
    }

    let login = client.get(app.url("/login")).send().await.unwrap();
    assert_eq!(login.status(), StatusCode::OK);
    let html = login.text().await.unwrap();
    assert!(
        html.contains(r#"<form method="post" action="/login""#),
        "{html}"
    );
    assert!(html.contains("Sign in to Dakghar"));

    let health = client.get(app.url("/healthz")).send().await.unwrap();
    assert_eq!(health.status(), StatusCode::OK);
}

async fn a_wrong_password_or_unknown_email_gets_the_same_answer_and_no_session(store: Store) {
    let app = spawn_app(store).await;
    seed_user(&app.store, &app.clock, "acme", "ana@acme.example").await;

    let timed = |email: &'static str, password: &'static str| {
        let base = app.base.clone();
        async move {
            let client = browser();
            let started = Instant::now();
            let res = sign_in(&client, &base, email, password).await;
            let took = started.elapsed();
            let answer = (res.status(), location(&res), session_cookie(&res).is_some());
            let events = client.get(format!("{base}/events")).send().await.unwrap();
            (answer, took, events.status())
        }
    };

    // Noise from the other tests on the machine only ever adds time, so the
    // fastest of several interleaved tries is each path's own cost. A day
    // between rounds lets the email's failure count start again, so no try
    // meets a throttle lock.
    let mut wrong_fastest = Duration::MAX;
    let mut unknown_fastest = Duration::MAX;
    for _ in 0..7 {
        app.clock
            .advance(throttle::FORGET_AFTER + Duration::from_secs(60));
        let (wrong, t1, after_wrong) = timed("ana@acme.example", "not the password").await;
        let (unknown, t2, after_unknown) = timed("nobody@acme.example", "not the password").await;
        assert_eq!(
            wrong,
            (StatusCode::SEE_OTHER, "/login?error=1".to_string(), false)
        );
        assert_eq!(
            unknown, wrong,
            "unknown email and wrong password look the same"
        );
        assert_eq!(
            after_wrong,
            StatusCode::SEE_OTHER,
            "no session after a failed login"
        );
        assert_eq!(after_unknown, StatusCode::SEE_OTHER);
        wrong_fastest = wrong_fastest.min(t1);
        unknown_fastest = unknown_fastest.min(t2);
    }
    // Both paths run a full argon2 verification: neither is an order of magnitude faster.
    let (w, u) = (wrong_fastest, unknown_fastest);
    assert!(
        u * 4 > w && w * 4 > u,
        "fastest wrong {w:?} vs unknown {u:?}"
    );
    assert!(
        u > Duration::from_millis(5),
        "an unknown email is still hashed: {u:?}"
    );

    let page = browser()
        .get(app.url("/login?error=1"))
        .send()
        .await
        .unwrap();
    assert!(page
        .text()
        .await
        .unwrap()
        .contains("Invalid email or password."));
}

async fn the_right_password_opens_events_with_the_users_email_and_account(store: Store) {
    let app = spawn_app(store).await;
    seed_user(&app.store, &app.clock, "Acme Payments", "ana@acme.example").await;
    let client = browser();

    let res = sign_in(&client, &app.base, "Ana@Acme.example ", PASSWORD).await;
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&res), "/events");
    let cookie = session_cookie(&res).expect("a session cookie");
    assert!(cookie.contains("HttpOnly"), "{cookie}");
    assert!(cookie.contains("SameSite=Lax"), "{cookie}");
    assert!(!cookie.contains("Secure"), "plain http: {cookie}");

    let events = client.get(app.url("/events")).send().await.unwrap();
    assert_eq!(events.status(), StatusCode::OK);
    let html = events.text().await.unwrap();
    assert!(html.contains("ana@acme.example"), "server-rendered email");
    assert!(
        html.contains("Acme Payments"),
        "server-rendered account name"
    );
    assert!(html.contains("<h1>Events</h1>"));

    // `next` brings the user back to where they were going, but only on this site.
    let client = browser();
    let res = client
        .post(app.url("/login"))
        .form(&[
            ("email", "ana@acme.example"),
            ("password", PASSWORD),
            ("next", "/events?type=a"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(location(&res), "/events?type=a");
    let res = browser()
        .post(app.url("/login"))
        .form(&[
            ("email", "ana@acme.example"),
            ("password", PASSWORD),
            ("next", "//evil.example/"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(location(&res), "/events");
    // A tab or a newline: browsers strip them (a tab made `//evil.example`),
    // and a newline answered 500.
    for next in ["/\t/evil.example", "/\n/evil.example", "/\\/evil.example"] {
        let res = browser()
            .post(app.url("/login"))
            .form(&[
                ("email", "ana@acme.example"),
                ("password", PASSWORD),
                ("next", next),
            ])
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 303, "{next:?}");
        assert_eq!(location(&res), "/events", "{next:?}");
    }
}

async fn signing_in_cycles_the_session_id_and_logout_destroys_it(store: Store) {
    let app = spawn_app(store).await;
    seed_user(&app.store, &app.clock, "acme", "ana@acme.example").await;
    let plain = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let with_cookie = |cookie: &str| {
        let pair = cookie.split(';').next().unwrap_or_default().to_string();
        plain
            .get(app.url("/events"))
            .header(header::COOKIE, pair)
            .send()
    };

    let client = browser();
    let first =
        session_cookie(&sign_in(&client, &app.base, "ana@acme.example", PASSWORD).await).unwrap();
    assert_eq!(with_cookie(&first).await.unwrap().status(), StatusCode::OK);

    // Signing in again while holding a session issues a new id; the old one dies.
    let second =
        session_cookie(&sign_in(&client, &app.base, "ana@acme.example", PASSWORD).await).unwrap();
    assert_ne!(first.split(';').next(), second.split(';').next());
    assert_eq!(
        with_cookie(&first).await.unwrap().status(),
        StatusCode::SEE_OTHER
    );
    assert_eq!(with_cookie(&second).await.unwrap().status(), StatusCode::OK);

    // Logout deletes the session on the server: a copied cookie opens nothing.
    let res = client.post(app.url("/logout")).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&res), "/login");
    assert_eq!(
        with_cookie(&second).await.unwrap().status(),
        StatusCode::SEE_OTHER
    );
    let res = client.get(app.url("/events")).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
}

async fn server_functions_refuse_anonymous_callers(store: Store) {
    let app = spawn_app(store).await;
    let seeded = seed_user(&app.store, &app.clock, "Acme", "ana@acme.example").await;

    let anonymous = browser().post(app.url("/_fn/me")).send().await.unwrap();
    assert_eq!(anonymous.status(), StatusCode::UNAUTHORIZED);
    let body = anonymous.text().await.unwrap();
    assert!(body.contains("Unauthorized"), "{body}");

    let client = browser();
    sign_in(&client, &app.base, "ana@acme.example", PASSWORD).await;
    let me = client.post(app.url("/_fn/me")).send().await.unwrap();
    assert_eq!(me.status(), StatusCode::OK);
    let me: serde_json::Value = me.json().await.unwrap();
    assert_eq!(me["email"], "ana@acme.example");
    assert_eq!(me["account_name"], seeded.account.name);
    assert_eq!(me["email"], seeded.user.email);
}
