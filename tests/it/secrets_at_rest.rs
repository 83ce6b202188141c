//! Endpoint secrets in the database are sealed with the secrets key: the
//! column never holds the secret, a plaintext left by an older version is
//! sealed at start-up, and another key is refused rather than misused.

use dakghar::{
    clock::{Clock, Timestamp},
    sealing::{SecretsKey, PREFIX},
    store::{NewEndpoint, Store, StoreError},
};

use crate::helpers::{Raw, TestDb};

on_both_backends_db!(
    secrets_are_sealed_in_the_column_and_opened_for_callers,
    plaintext_secrets_are_sealed_at_start_up_and_a_wrong_key_is_refused,
);

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

async fn stored_columns(db: &TestDb, id: &str) -> (String, Option<String>) {
    let sql = "SELECT secret, previous_secret FROM endpoints WHERE id = $1";
    match &db.raw().await {
        Raw::Sqlite(p) => sqlx::query_as(sql).bind(id).fetch_one(p).await.unwrap(),
        Raw::Postgres(p) => sqlx::query_as(sql).bind(id).fetch_one(p).await.unwrap(),
    }
}

async fn endpoint(store: &Store, now: Timestamp) -> dakghar::store::Endpoint {
    let account = store.create_account("acme", now).await.unwrap();
    store
        .create_endpoint(
            NewEndpoint {
                account_id: account.id,
                url: "https://example.com/hook".into(),
                description: String::new(),
                event_types: vec![],
                secret: SECRET.into(),
                rate_limit_per_sec: None,
                max_in_flight: 10,
                retry_strategy: None,
                retry_statuses: None,
            },
            now,
        )
        .await
        .unwrap()
}

async fn secrets_are_sealed_in_the_column_and_opened_for_callers(db: &TestDb) {
    let store = db.store.clone();
    let now = dakghar::clock::SystemClock.now();
    let ep = endpoint(&store, now).await;
    assert_eq!(ep.secret, SECRET, "callers see the secret");
    let (column, _) = stored_columns(db, &ep.id).await;
    assert!(column.starts_with(PREFIX), "{column}");
    assert!(!column.contains("MfKQ9r8GKYqr"), "{column}");

    let rotated = store
        .rotate_secret(&ep.account_id, &ep.id, "whsec_second", now, now)
        .await
        .unwrap();
    assert_eq!(
        (rotated.secret.as_str(), rotated.previous_secret.as_deref()),
        ("whsec_second", Some(SECRET))
    );
    let (column, previous) = stored_columns(db, &ep.id).await;
    assert!(column.starts_with(PREFIX) && !column.contains("second"));
    assert!(previous.unwrap().starts_with(PREFIX));
    let listed = store.list_endpoints(&ep.account_id).await.unwrap();
    assert_eq!(listed[0].secret, "whsec_second");
    assert_eq!(
        store
            .endpoint_by_id(&ep.id)
            .await
            .unwrap()
            .previous_secret
            .as_deref(),
        Some(SECRET)
    );
}

async fn plaintext_secrets_are_sealed_at_start_up_and_a_wrong_key_is_refused(db: &TestDb) {
    let store = db.store.clone();
    let now = dakghar::clock::SystemClock.now();
    let ep = endpoint(&store, now).await;
    // As an older version left it: plaintext in both columns.
    store
        .execute_script(&format!(
            "UPDATE endpoints SET secret = '{SECRET}', previous_secret = 'whsec_older' WHERE id = '{}'",
            ep.id
        ))
        .await
        .unwrap();
    assert_eq!(store.seal_stored_secrets().await.unwrap(), 1);
    let (column, previous) = stored_columns(db, &ep.id).await;
    assert!(column.starts_with(PREFIX) && previous.unwrap().starts_with(PREFIX));
    let opened = store.endpoint_by_id(&ep.id).await.unwrap();
    assert_eq!(
        (opened.secret.as_str(), opened.previous_secret.as_deref()),
        (SECRET, Some("whsec_older"))
    );
    assert_eq!(
        store.seal_stored_secrets().await.unwrap(),
        0,
        "nothing left to seal"
    );

    let (other, _) = SecretsKey::generate();
    let wrong = store.clone().with_secrets_key(other);
    let err = wrong.seal_stored_secrets().await.unwrap_err();
    assert!(matches!(err, StoreError::Sealing(_)), "{err}");
    assert!(err.to_string().contains("does not open"), "{err}");
    // Shown (alerts name it), never with a secret, and saying why.
    let shown = wrong.endpoint_by_id(&ep.id).await.unwrap();
    assert_eq!(shown.secret, "");
    assert_eq!(shown.previous_secret, None);
    assert!(shown.fault.unwrap_or_default().contains("does not open"));
}
