//! Account roles on every server function, a table of function × role;
//! the team page's changes; and what embedding and branding change in
//! the answers.

use dakghar::{
    auth::password,
    clock::Clock,
    config::ServeConfig,
    store::{AccountRole, Role, Store},
};
use reqwest::{header, Method, StatusCode};
use serde_json::json;

use crate::{
    helpers::{browser, location, member, page_html, server_fn, PASSWORD},
    platforms::Platform,
};

on_both_backends!(
    every_server_function_refuses_what_the_role_may_not,
    owners_invite_change_roles_and_remove_members,
    two_owners_demoting_each_other_at_once_leave_one_owner,
    embedding_lets_only_the_named_origins_frame_portal_sessions,
    the_brand_names_and_colours_every_page,
);

/// Who calls, in the matrix.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Who {
    Owner,
    Developer,
    Viewer,
    PortalDeveloper,
    PortalViewer,
}

const EVERYONE: &[Who] = &[
    Who::Owner,
    Who::Developer,
    Who::Viewer,
    Who::PortalDeveloper,
    Who::PortalViewer,
];
const CHANGERS: &[Who] = &[Who::Owner, Who::Developer, Who::PortalDeveloper];
const OWNERS: &[Who] = &[Who::Owner];
const NOBODY: &[Who] = &[];

/// The endpoint form as the page posts it.
fn new_endpoint(url: &str) -> [(&str, &str); 5] {
    [
        ("form[url]", url),
        ("form[description]", ""),
        ("form[event_types]", ""),
        ("form[rate_limit_per_sec]", ""),
        ("form[max_in_flight]", ""),
    ]
}

fn edit_endpoint(url: &str) -> [(&str, &str); 6] {
    let [a, b, c, d, e] = new_endpoint(url);
    [("id", "ep_none"), a, b, c, d, e]
}

/// A browser a portal link signed in with `role`.
async fn portal(p: &Platform, account: &str, role: &str) -> reqwest::Client {
    let link = p.portal_link(account, json!({ "role": role })).await;
    let web = browser();
    let res = web.get(&link).send().await.unwrap();
    assert_eq!(location(&res), "/events");
    web
}

/// A server function, arguments it accepts, and who may call it.
type Call<'a> = (&'a str, &'a [(&'a str, &'a str)], &'a [Who]);

async fn every_server_function_refuses_what_the_role_may_not(store: Store) {
    let p = Platform::new(store).await;
    let account = p.account("Customer A", Some("cus_a")).await;
    let app = &p.app;
    let callers = [
        (
            Who::Owner,
            member(app, &account, "owner@a.example", AccountRole::Owner).await,
        ),
        (
            Who::Developer,
            member(app, &account, "dev@a.example", AccountRole::Developer).await,
        ),
        (
            Who::Viewer,
            member(app, &account, "viewer@a.example", AccountRole::Viewer).await,
        ),
        (Who::PortalDeveloper, portal(&p, "cus_a", "developer").await),
        (Who::PortalViewer, portal(&p, "cus_a", "viewer").await),
    ];
    let url = "https://hooks.example.com/in";
    let table: &[Call] = &[
        ("me", &[], EVERYONE),
        ("events", &[], EVERYONE),
        ("event", &[("id", "evt_none")], EVERYONE),
        ("endpoints", &[], EVERYONE),
        ("endpoint", &[("id", "ep_none")], EVERYONE),
        ("notifications", &[], EVERYONE),
        ("contract", &[], EVERYONE),
        ("resend", &[("delivery_id", "dlv_none")], CHANGERS),
        ("signed_curl", &[("delivery_id", "dlv_none")], CHANGERS),
        ("endpoint_create", &new_endpoint(url), CHANGERS),
        ("endpoint_delete", &[("id", "ep_none")], CHANGERS),
        ("endpoint_form", &[("id", "ep_none")], CHANGERS),
        ("endpoint_update", &edit_endpoint(url), CHANGERS),
        (
            "endpoint_recover_preview",
            &[("id", "ep_none"), ("form[since]", "2026-01-01T00:00")],
            CHANGERS,
        ),
        (
            "endpoint_recover",
            &[("id", "ep_none"), ("since", "0")],
            CHANGERS,
        ),
        ("endpoint_pause", &[("id", "ep_none")], CHANGERS),
        ("endpoint_resume", &[("id", "ep_none")], CHANGERS),
        ("endpoint_test", &[("id", "ep_none")], CHANGERS),
        ("endpoint_rotate", &[("id", "ep_none")], CHANGERS),
        ("endpoint_secret", &[("id", "ep_none")], CHANGERS),
        ("api_keys", &[], OWNERS),
        ("api_key_create", &[("name", "ci")], OWNERS),
        ("api_key_revoke", &[("id", "key_none")], OWNERS),
        ("team", &[], OWNERS),
        (
            "team_invite",
            &[("form[email]", "new@a.example"), ("form[role]", "viewer")],
            OWNERS,
        ),
        (
            "team_role",
            &[("user_id", "usr_none"), ("role", "viewer")],
            OWNERS,
        ),
        ("team_remove", &[("user_id", "usr_none")], OWNERS),
        ("team_withdraw", &[("id", "lnk_none")], OWNERS),
        ("admin_overview", &[], NOBODY),
        ("admin_replay_preview", &[("form[failed]", "on")], NOBODY),
        ("admin_replay_start", &[("form[failed]", "on")], NOBODY),
        ("admin_replay", &[("id", "rpl_none")], NOBODY),
        ("admin_replay_cancel", &[("id", "rpl_none")], NOBODY),
        ("admin_audit", &[], NOBODY),
        ("admin_platform_keys", &[], NOBODY),
        ("admin_platform_key_create", &[("name", "ci")], NOBODY),
        ("admin_platform_key_revoke", &[("id", "pk_none")], NOBODY),
    ];
    for (f, form, allowed) in table {
        for (who, web) in &callers {
            let (status, body) = server_fn(app, web, f, form).await;
            if allowed.contains(who) {
                // Allowed: answered, or a miss on an id that does not
                // exist; never refused, and never lost before the port.
                assert!(
                    !matches!(status, StatusCode::FORBIDDEN | StatusCode::UNAUTHORIZED)
                        && !body.to_string().contains("Transport"),
                    "{who:?} may call {f}: {status} {body}"
                );
            } else {
                assert_eq!(
                    status,
                    StatusCode::FORBIDDEN,
                    "{who:?} may not call {f}: {body}"
                );
            }
        }
    }
    // Nothing a refusal touched changed: no endpoint or key beyond the
    // ones the allowed calls made.
    let endpoints = app.store.list_endpoints(&account).await.unwrap();
    assert_eq!(
        endpoints.len(),
        CHANGERS.len(),
        "one endpoint per allowed create"
    );
    assert_eq!(app.store.list_api_keys(&account).await.unwrap().len(), 1);
    // The pages leave out what the role may not do.
    let viewer = &callers[2].1;
    let html = page_html(viewer, &app.url("/endpoints")).await;
    assert!(!html.contains("Add an endpoint"), "no form for a viewer");
    assert!(!html.contains(r#"href="/api-keys""#) && !html.contains(r#"href="/team""#));
    let owner = &callers[0].1;
    let html = page_html(owner, &app.url("/endpoints")).await;
    assert!(html.contains("Add an endpoint") && html.contains(r#"href="/team""#));
    let portal_dev = &callers[3].1;
    let res = portal_dev.get(app.url("/api-keys")).send().await.unwrap();
    assert_eq!(
        res.status(),
        StatusCode::FORBIDDEN,
        "portal sessions never see API keys"
    );
    let res = portal_dev.get(app.url("/admin")).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::FORBIDDEN, "nor admin pages");
}

async fn owners_invite_change_roles_and_remove_members(store: Store) {
    let p = Platform::new(store).await;
    let account = p.account("Customer A", Some("cus_a")).await;
    let app = &p.app;
    let owner = member(app, &account, "owner@a.example", AccountRole::Owner).await;
    let dev = member(app, &account, "dev@a.example", AccountRole::Developer).await;

    let (status, invited) = server_fn(
        app,
        &owner,
        "team_invite",
        &[("form[email]", "new@a.example"), ("form[role]", "viewer")],
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{invited}");
    assert!(invited["link"]
        .as_str()
        .unwrap()
        .contains("/invitations/lnk_"));
    let (_, team) = server_fn(app, &owner, "team", &[]).await;
    let emails: Vec<&str> = team["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["email"].as_str().unwrap())
        .collect();
    assert_eq!(emails, ["dev@a.example", "owner@a.example"]);
    assert_eq!(team["invitations"][0]["email"], "new@a.example");
    let invitation = team["invitations"][0]["id"].as_str().unwrap().to_string();
    let (status, _) = server_fn(app, &owner, "team_withdraw", &[("id", &invitation)]).await;
    assert_eq!(status, StatusCode::OK);
    let (_, team) = server_fn(app, &owner, "team", &[]).await;
    assert_eq!(team["invitations"], json!([]));

    // A role change holds at once: the developer becomes a viewer.
    let dev_id = app.store.user_by_email("dev@a.example").await.unwrap().id;
    let (status, body) = server_fn(
        app,
        &dev,
        "endpoint_create",
        &new_endpoint("https://x.example/"),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, _) = server_fn(
        app,
        &owner,
        "team_role",
        &[("user_id", &dev_id), ("role", "viewer")],
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = server_fn(
        app,
        &dev,
        "endpoint_create",
        &new_endpoint("https://y.example/"),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "a viewer now");
    // The last owner stays an owner, and stays.
    let owner_id = app.store.user_by_email("owner@a.example").await.unwrap().id;
    let (status, body) = server_fn(
        app,
        &owner,
        "team_role",
        &[("user_id", &owner_id), ("role", "viewer")],
    )
    .await;
    assert!(
        body.to_string().contains("must keep an owner"),
        "{status} {body}"
    );
    let (_, body) = server_fn(app, &owner, "team_remove", &[("user_id", &owner_id)]).await;
    assert!(body.to_string().contains("must keep an owner"), "{body}");
    // Another account's member is not found.
    let other = p.account("Customer B", None).await;
    let hash = password::hash(PASSWORD).unwrap();
    let stranger = app
        .store
        .create_member(
            &other,
            "x@b.example",
            &hash,
            Role::Member,
            AccountRole::Viewer,
            app.clock.now(),
        )
        .await
        .unwrap();
    let (_, body) = server_fn(app, &owner, "team_remove", &[("user_id", &stranger.id)]).await;
    assert!(body.to_string().contains("NotFound"), "{body}");
    assert!(app.store.user(&stranger.id).await.is_ok());
    // Removing a member ends their sessions.
    let (status, _) = server_fn(app, &owner, "team_remove", &[("user_id", &dev_id)]).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = server_fn(app, &dev, "me", &[]).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
}

async fn two_owners_demoting_each_other_at_once_leave_one_owner(store: Store) {
    let p = Platform::new(store).await;
    let account = p.account("Customer A", Some("cus_a")).await;
    let app = &p.app;
    let ana = member(app, &account, "ana@a.example", AccountRole::Owner).await;
    let bo = member(app, &account, "bo@a.example", AccountRole::Owner).await;
    let id = |email: &'static str| async move { app.store.user_by_email(email).await.unwrap().id };
    let (ana_id, bo_id) = (id("ana@a.example").await, id("bo@a.example").await);
    for round in 0..8 {
        let demote_bo = [("user_id", bo_id.as_str()), ("role", "developer")];
        let demote_ana = [("user_id", ana_id.as_str()), ("role", "developer")];
        let (a, b) = tokio::join!(
            server_fn(app, &ana, "team_role", &demote_bo),
            server_fn(app, &bo, "team_role", &demote_ana),
        );
        let owners: Vec<_> = app
            .store
            .account_users(&account)
            .await
            .unwrap()
            .into_iter()
            .filter(|u| u.account_role == AccountRole::Owner)
            .collect();
        assert_eq!(owners.len(), 1, "round {round}: {a:?} {b:?}");
        let won = [a.0, b.0].iter().filter(|s| s.is_success()).count();
        assert_eq!(won, 1, "round {round}: {a:?} {b:?}");
        // The one still owner makes the other owner again for the next round.
        let (winner, loser) = if owners[0].id == ana_id {
            (&ana, &bo_id)
        } else {
            (&bo, &ana_id)
        };
        let (status, body) = server_fn(
            app,
            winner,
            "team_role",
            &[("user_id", loser), ("role", "owner")],
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
}

fn header_of(res: &reqwest::Response, name: header::HeaderName) -> String {
    res.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string()
}

async fn embedding_lets_only_the_named_origins_frame_portal_sessions(store: Store) {
    let config = ServeConfig {
        embed_origins: vec![
            "http://localhost:5173".into(),
            "https://app.example.com".into(),
        ],
        ..ServeConfig::for_tests()
    };
    let p = Platform::with_config(store, config).await;
    p.account("Customer A", Some("cus_a")).await;
    let link = p.portal_link("cus_a", json!({})).await;
    let opened = browser().get(&link).send().await.unwrap();
    let csp = header_of(&opened, header::CONTENT_SECURITY_POLICY);
    assert!(
        csp.contains("frame-ancestors http://localhost:5173 https://app.example.com"),
        "{csp}"
    );
    assert!(opened.headers().get(header::X_FRAME_OPTIONS).is_none());
    let cookie = header_of(&opened, header::SET_COOKIE);
    assert!(
        cookie.contains("SameSite=None")
            && cookie.contains("Secure")
            && cookie.contains("Partitioned"),
        "{cookie}"
    );
    // The portal session's pages may be framed by them; a used link's answer too.
    let secret = cookie.split(';').next().unwrap().to_string();
    let page = reqwest::Client::new()
        .get(p.app.url("/events"))
        .header(header::COOKIE, &secret)
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), StatusCode::OK);
    let csp = header_of(&page, header::CONTENT_SECURITY_POLICY);
    assert!(
        csp.contains("frame-ancestors http://localhost:5173 https://app.example.com"),
        "{csp}"
    );
    assert!(csp.contains("'nonce-"), "the page keeps its nonce: {csp}");
    let again = browser().get(&link).send().await.unwrap();
    assert_eq!(again.status(), StatusCode::GONE);
    assert!(header_of(&again, header::CONTENT_SECURITY_POLICY)
        .contains("frame-ancestors http://localhost:5173"));
    // Everyone else's pages keep refusing every frame.
    let login = browser().get(p.app.url("/login")).send().await.unwrap();
    assert!(header_of(&login, header::CONTENT_SECURITY_POLICY).contains("frame-ancestors 'none'"));
    assert_eq!(header_of(&login, header::X_FRAME_OPTIONS), "DENY");
    let api = reqwest::Client::new()
        .request(Method::GET, p.app.url("/api/v1/accounts"))
        .bearer_auth(&p.key)
        .send()
        .await
        .unwrap();
    assert_eq!(header_of(&api, header::X_FRAME_OPTIONS), "DENY");

    // Without --embed-origins a portal session frames nowhere.
    let plain = Platform::new(p.app.store.clone()).await;
    let link = plain.portal_link("cus_a", json!({})).await;
    let opened = browser().get(&link).send().await.unwrap();
    assert!(header_of(&opened, header::CONTENT_SECURITY_POLICY).contains("frame-ancestors 'none'"));
    assert_eq!(header_of(&opened, header::X_FRAME_OPTIONS), "DENY");
    assert!(header_of(&opened, header::SET_COOKIE).contains("SameSite=Lax"));
}

async fn the_brand_names_and_colours_every_page(store: Store) {
    let mut config = ServeConfig::for_tests();
    config.brand.name = "Acme Hooks".into();
    config.brand.accent = Some("#ff6600".into());
    let p = Platform::with_config(store, config).await;
    let html = page_html(&browser(), &p.app.url("/login")).await;
    assert!(html.contains("Sign in to Acme Hooks"), "{html}");
    assert!(html.contains("· Acme Hooks</title>"), "{html}");
    assert!(html.contains(r#"style="--accent: #ff6600;""#), "{html}");
    assert!(html.contains(r#"data-brand-name="Acme Hooks""#));
    assert!(!html.contains("Dakghar</title>"));
}
