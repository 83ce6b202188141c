//! Sign-in under attack, through the real server on both backends: failed
//! logins throttled per email, password limits, rehashing, session
//! timeouts on the code's clock, cross-site posts and security headers.

use std::time::Duration;

use dakghar::{
    clock::Clock,
    config::{ServeConfig, SessionSettings},
    dashboard::session::SECURE_COOKIE_NAME,
    store::Store,
};
use reqwest::{header, StatusCode};

use crate::helpers::{
    browser, location, page_html, seed_user, spawn_app, spawn_app_with, Raw, TestApp, TestDb,
    PASSWORD,
};

on_both_backends_db!(failed_sign_ins_are_forgotten_and_overlong_emails_never_kept);
on_both_backends!(
    failed_logins_lock_the_email_for_longer_each_time_and_no_one_else,
    a_megabyte_password_is_a_fast_400_and_long_passphrases_work,
    signing_in_rehashes_a_password_stored_with_old_parameters,
    sessions_end_after_the_idle_and_the_absolute_timeout,
    cross_site_posts_to_sign_in_out_and_server_functions_are_refused,
    pages_carry_a_nonce_csp_and_every_response_the_security_headers,
    the_secure_cookie_uses_the_host_prefix,
    forty_concurrent_wrong_passwords_for_one_email_check_at_most_five,
);

async fn sign_in(client: &reqwest::Client, app: &TestApp, email: &str, password: &str) -> String {
    let res = client
        .post(app.url("/login"))
        .form(&[("email", email), ("password", password), ("next", "")])
        .send()
        .await
        .expect("POST /login");
    location(&res)
}

async fn signed_in(client: &reqwest::Client, app: &TestApp) -> bool {
    let res = client.get(app.url("/events")).send().await.unwrap();
    res.status() == StatusCode::OK
}

async fn failed_logins_lock_the_email_for_longer_each_time_and_no_one_else(store: Store) {
    let app = spawn_app(store).await;
    seed_user(&app.store, &app.clock, "acme", "ana@acme.example").await;
    seed_user(&app.store, &app.clock, "globex", "bob@globex.example").await;
    let attacker = browser();

    for _ in 0..4 {
        assert_eq!(
            sign_in(&attacker, &app, "ana@acme.example", "guess").await,
            "/login?error=1"
        );
    }
    // The fifth failure locks the email for a second.
    assert_eq!(
        sign_in(&attacker, &app, "ana@acme.example", "guess").await,
        "/login?error=1"
    );
    let ana = browser();
    assert_eq!(
        sign_in(&ana, &app, "ana@acme.example", PASSWORD).await,
        "/login?error=throttled&wait=1",
        "even the right password waits out the lock"
    );
    assert!(!signed_in(&ana, &app).await);

    // Another account is not slowed down at all.
    let bob = browser();
    assert_eq!(
        sign_in(&bob, &app, "bob@globex.example", PASSWORD).await,
        "/events"
    );

    // Each further failure doubles the lock.
    app.clock.advance(Duration::from_millis(1001));
    sign_in(&attacker, &app, "ana@acme.example", "guess").await;
    assert_eq!(
        sign_in(&attacker, &app, "ana@acme.example", "guess").await,
        "/login?error=throttled&wait=2"
    );
    app.clock.advance(Duration::from_millis(2001));
    sign_in(&attacker, &app, "ana@acme.example", "guess").await;
    assert_eq!(
        sign_in(&attacker, &app, "ana@acme.example", "guess").await,
        "/login?error=throttled&wait=4"
    );

    // After the lock, the right password signs in and the count starts over.
    app.clock.advance(Duration::from_millis(4001));
    assert_eq!(
        sign_in(&ana, &app, "ana@acme.example", PASSWORD).await,
        "/events"
    );
    assert!(signed_in(&ana, &app).await);
    for _ in 0..4 {
        assert_eq!(
            sign_in(&attacker, &app, "ana@acme.example", "guess").await,
            "/login?error=1",
            "four free mistakes again"
        );
    }

    // An email nobody has is throttled just the same: no hint it is unknown.
    for _ in 0..5 {
        sign_in(&attacker, &app, "nobody@acme.example", "guess").await;
    }
    assert_eq!(
        sign_in(&attacker, &app, "nobody@acme.example", "guess").await,
        "/login?error=throttled&wait=1"
    );

    let page = page_html(&browser(), &app.url("/login?error=throttled&wait=4")).await;
    assert!(page.contains("Too many failed sign-ins"), "{page}");
}

async fn a_megabyte_password_is_a_fast_400_and_long_passphrases_work(store: Store) {
    let app = spawn_app(store).await;
    let seeded = seed_user(&app.store, &app.clock, "acme", "ana@acme.example").await;
    let huge = "p".repeat(1 << 20);
    let res = browser()
        .post(app.url("/login"))
        .form(&[("email", "ana@acme.example"), ("password", huge.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::BAD_REQUEST);
    assert!(res.text().await.unwrap().contains("at most 1024 bytes"));
    assert!(
        app.store
            .login_locked_until("ana@acme.example", app.clock.now())
            .await
            .unwrap()
            .is_none(),
        "refused before it counted as an attempt"
    );

    let passphrase = "a sixty-four character passphrase, typed by a careful person!!!!";
    assert_eq!(passphrase.chars().count(), 64);
    let hash = dakghar::auth::password::hash(passphrase).unwrap();
    app.store
        .set_password(&seeded.user.id, &hash)
        .await
        .unwrap();
    let client = browser();
    assert_eq!(
        sign_in(&client, &app, "ana@acme.example", passphrase).await,
        "/events"
    );
}

async fn signing_in_rehashes_a_password_stored_with_old_parameters(store: Store) {
    use argon2::{password_hash::SaltString, Algorithm, Argon2, Params, PasswordHasher, Version};

    let app = spawn_app(store).await;
    let seeded = seed_user(&app.store, &app.clock, "acme", "ana@acme.example").await;
    let salt = SaltString::encode_b64(b"sixteen byte sal").unwrap();
    let old = Argon2::new(
        Algorithm::Argon2id,
        Version::V0x13,
        Params::new(4096, 3, 1, None).unwrap(),
    )
    .hash_password(PASSWORD.as_bytes(), &salt)
    .unwrap()
    .to_string();
    app.store.set_password(&seeded.user.id, &old).await.unwrap();

    let client = browser();
    assert_eq!(
        sign_in(&client, &app, "ana@acme.example", PASSWORD).await,
        "/events"
    );
    let now = app.store.user(&seeded.user.id).await.unwrap().password_hash;
    assert_ne!(now, old);
    assert!(now.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"), "{now}");
    assert_eq!(
        sign_in(&browser(), &app, "ana@acme.example", PASSWORD).await,
        "/events",
        "the new hash verifies"
    );
}

async fn sessions_end_after_the_idle_and_the_absolute_timeout(store: Store) {
    let config = ServeConfig {
        sessions: SessionSettings {
            idle: Duration::from_secs(3600),
            max_age: Duration::from_secs(3 * 3600),
        },
        ..ServeConfig::for_tests()
    };
    let app = spawn_app_with(store, config).await;
    seed_user(&app.store, &app.clock, "acme", "ana@acme.example").await;

    // Busy: a request every 50 minutes keeps it alive until the 3 h mark.
    let busy = browser();
    sign_in(&busy, &app, "ana@acme.example", PASSWORD).await;
    let idle = browser();
    sign_in(&idle, &app, "ana@acme.example", PASSWORD).await;
    for _ in 0..3 {
        app.clock.advance(Duration::from_secs(50 * 60));
        assert!(signed_in(&busy, &app).await);
    }
    assert!(!signed_in(&idle, &app).await, "idle for 2.5 h");
    app.clock.advance(Duration::from_secs(40 * 60));
    assert!(
        !signed_in(&busy, &app).await,
        "3 h 10 min after signing in, however busy"
    );
    assert!(!signed_in(&busy, &app).await, "and it stays signed out");
    assert_eq!(
        sign_in(&busy, &app, "ana@acme.example", PASSWORD).await,
        "/events"
    );
    assert!(
        signed_in(&busy, &app).await,
        "signing in again starts afresh"
    );
}

async fn cross_site_posts_to_sign_in_out_and_server_functions_are_refused(store: Store) {
    let app = spawn_app(store).await;
    seed_user(&app.store, &app.clock, "acme", "ana@acme.example").await;
    let forged = |client: &reqwest::Client, path: &str| {
        client
            .post(app.url(path))
            .header("sec-fetch-site", "cross-site")
            .form(&[("email", "ana@acme.example"), ("password", PASSWORD)])
            .send()
    };

    // Login CSRF: another site cannot sign a victim into the attacker's account.
    let victim = browser();
    let res = forged(&victim, "/login").await.unwrap();
    assert_eq!(res.status(), StatusCode::FORBIDDEN);
    assert!(!signed_in(&victim, &app).await);

    let ana = browser();
    sign_in(&ana, &app, "ana@acme.example", PASSWORD).await;
    for path in ["/logout", "/_fn/me"] {
        let res = forged(&ana, path).await.unwrap();
        assert_eq!(res.status(), StatusCode::FORBIDDEN, "{path}");
    }
    assert!(signed_in(&ana, &app).await, "the forged logout did nothing");
    let res = ana
        .post(app.url("/_fn/me"))
        .header(header::ORIGIN, "http://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::FORBIDDEN, "Origin alone");
    let res = ana
        .post(app.url("/_fn/me"))
        .header("sec-fetch-site", "same-origin")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK, "the app's own call");
}

async fn pages_carry_a_nonce_csp_and_every_response_the_security_headers(store: Store) {
    let app = spawn_app(store).await;
    let page = browser().get(app.url("/login")).send().await.unwrap();
    let csp = page.headers()[header::CONTENT_SECURITY_POLICY]
        .to_str()
        .unwrap()
        .to_string();
    let nonce = csp
        .split("'nonce-")
        .nth(1)
        .and_then(|rest| rest.split('\'').next())
        .unwrap_or_else(|| panic!("a nonce in {csp}"))
        .to_string();
    assert!(nonce.len() >= 16, "{nonce}");
    for directive in [
        "default-src 'self'",
        "'wasm-unsafe-eval'",
        "frame-ancestors 'none'",
        "object-src 'none'",
    ] {
        assert!(csp.contains(directive), "{directive} in {csp}");
    }
    let script_src = csp
        .split(';')
        .find(|d| d.trim().starts_with("script-src"))
        .unwrap();
    assert!(!script_src.contains("unsafe-inline"), "{script_src}");
    let html = page.text().await.unwrap();
    assert!(
        html.contains(&format!("nonce=\"{nonce}\"")),
        "the hydration script carries the header's nonce"
    );
    let again = browser().get(app.url("/login")).send().await.unwrap();
    assert_ne!(
        again.headers()[header::CONTENT_SECURITY_POLICY]
            .to_str()
            .unwrap(),
        csp,
        "a fresh nonce per response"
    );

    for path in ["/login", "/api/v1/events", "/healthz", "/no-such-page"] {
        let res = browser().get(app.url(path)).send().await.unwrap();
        let h = res.headers();
        assert_eq!(h[header::X_CONTENT_TYPE_OPTIONS], "nosniff", "{path}");
        assert_eq!(h[header::X_FRAME_OPTIONS], "DENY", "{path}");
        assert!(
            h[header::CONTENT_SECURITY_POLICY]
                .to_str()
                .unwrap()
                .contains("frame-ancestors 'none'"),
            "{path}"
        );
    }
}

async fn the_secure_cookie_uses_the_host_prefix(store: Store) {
    let config = ServeConfig {
        secure_cookies: true,
        ..ServeConfig::for_tests()
    };
    let app = spawn_app_with(store, config).await;
    seed_user(&app.store, &app.clock, "acme", "ana@acme.example").await;
    let res = browser()
        .post(app.url("/login"))
        .form(&[("email", "ana@acme.example"), ("password", PASSWORD)])
        .send()
        .await
        .unwrap();
    let cookie = res
        .headers()
        .get_all(header::SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|c| c.starts_with(&format!("{SECURE_COOKIE_NAME}=")))
        .expect("a __Host- cookie")
        .to_string();
    for part in ["Secure", "HttpOnly", "SameSite=Lax", "Path=/"] {
        assert!(cookie.contains(part), "{part} in {cookie}");
    }
    assert!(!cookie.contains("Domain"), "{cookie}");
}

/// The lock used to be read before hashing and written after, so a burst
/// all passed the check before any failure was counted: each of 40 at once
/// checked its password. Now each attempt is counted, and locked out,
/// before its password is checked, in one statement. (Attempts turned away
/// because every core is hashing are answered 503 and checked nothing.)
async fn forty_concurrent_wrong_passwords_for_one_email_check_at_most_five(store: Store) {
    let app = spawn_app(store).await;
    seed_user(&app.store, &app.clock, "acme", "ana@acme.example").await;
    let attempts: Vec<_> = (0..40)
        .map(|_| {
            let url = app.url("/login");
            tokio::spawn(async move {
                let res = browser()
                    .post(url)
                    .form(&[
                        ("email", "ana@acme.example"),
                        ("password", "a wrong guess"),
                        ("next", ""),
                    ])
                    .send()
                    .await
                    .unwrap();
                (res.status(), location(&res))
            })
        })
        .collect();
    let mut answers = Vec::new();
    for a in attempts {
        answers.push(a.await.unwrap());
    }
    let checked = answers
        .iter()
        .filter(|(_, l)| l == "/login?error=1")
        .count();
    let locked = answers
        .iter()
        .filter(|(_, l)| l.starts_with("/login?error=throttled"))
        .count();
    let busy = answers
        .iter()
        .filter(|(s, _)| *s == StatusCode::SERVICE_UNAVAILABLE)
        .count();
    assert_eq!(checked + locked + busy, 40, "{answers:?}");
    assert_eq!(
        checked, 5,
        "four free mistakes and the one that locked: {answers:?}"
    );
    assert!(locked >= 1, "{answers:?}");
}

/// Every email ever tried left a row in login_failures; a day after its
/// last failure (and its lock) the row is forgotten. An email longer than
/// any address can be is refused before anything is written.
async fn failed_sign_ins_are_forgotten_and_overlong_emails_never_kept(db: &TestDb) {
    let app = spawn_app(db.store.clone()).await;
    let rows = || async {
        let sql = "SELECT count(*) FROM login_failures";
        match &db.raw().await {
            Raw::Sqlite(c) => sqlx::query_scalar::<_, i64>(sql)
                .fetch_one(c)
                .await
                .unwrap(),
            Raw::Postgres(c) => sqlx::query_scalar::<_, i64>(sql)
                .fetch_one(c)
                .await
                .unwrap(),
        }
    };
    let client = browser();
    let long = format!("{}@example.com", "a".repeat(300));
    assert_eq!(
        sign_in(&client, &app, &long, "guess").await,
        "/login?error=1"
    );
    assert_eq!(rows().await, 0, "an overlong email is never written");
    for _ in 0..6 {
        sign_in(&client, &app, "nobody@acme.example", "guess").await;
    }
    assert_eq!(rows().await, 1);
    let run = || dakghar::jobs::expired_links::run_once(&app.store, app.clock.now());
    assert_eq!(run().await.unwrap(), 0, "still counting and locked");
    app.clock.advance(Duration::from_secs(25 * 3600));
    assert_eq!(run().await.unwrap(), 1);
    assert_eq!(rows().await, 0);
}
