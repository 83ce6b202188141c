//! The store's behaviour, identical on SQLite and Postgres.

use std::{collections::HashSet, time::Duration};

use dakghar::{
    clock::{Clock, TestClock, Timestamp},
    store::{
        Account, AttemptRecord, Backend, Delivery, DeliveryState, Endpoint, EndpointPatch,
        EndpointState, Ingester, NewEvent, NewIngest, Role, Store, StoreError, Transition,
    },
};

use crate::helpers::{new_endpoint, StateOf};

/// The endpoints the deliveries go to, sorted.
fn endpoints_of<'a>(deliveries: impl IntoIterator<Item = &'a Delivery>) -> Vec<String> {
    let mut ids: Vec<String> = deliveries
        .into_iter()
        .map(|d| d.endpoint_id.clone())
        .collect();
    ids.sort();
    ids
}

/// How many of the deliveries go to the endpoint `id`.
fn how_many_to(deliveries: &[Delivery], id: &str) -> usize {
    deliveries.iter().filter(|d| d.endpoint_id == id).count()
}

/// Pauses the account's endpoint `id`, so claims pass its work over.
async fn pause(store: &Store, account_id: &str, id: &str, now: Timestamp) {
    store
        .set_endpoint_state(account_id, id, EndpointState::Paused, None, now)
        .await
        .unwrap();
}

/// What a claim at `now` under the default rules leases, `limit` at
/// most, for five minutes.
async fn claim_for_five_minutes(store: &Store, now: Timestamp, limit: i64) -> Vec<Delivery> {
    store
        .claim_due(
            now,
            now.plus(Duration::from_secs(300)),
            limit,
            dakghar::store::ClaimRules::default(),
        )
        .await
        .unwrap()
}

/// The answer to an event `new` of `account_id`'s, ingested by a group
/// that leases as `claim_for_five_minutes` claims (100 at most), and
/// what it leased.
async fn ingest_new_leasing(
    store: &Store,
    account_id: &str,
    now: Timestamp,
) -> (
    Vec<Result<dakghar::store::InsertedEvent, StoreError>>,
    dakghar::store::Claim,
) {
    let terms = dakghar::store::LeaseTerms {
        now,
        lease_until: now.plus(Duration::from_secs(300)),
        limit: 100,
        rules: dakghar::store::ClaimRules::default(),
    };
    let new = to_ingest(event(account_id, "new", "t"), now);
    store
        .insert_events_leasing(std::slice::from_ref(&new), Some(terms))
        .await
        .unwrap()
}

/// Event ids as the list gives them back.
fn ids(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// The deliveries' own ids, sorted.
fn ids_of<'a>(deliveries: impl IntoIterator<Item = &'a Delivery>) -> Vec<String> {
    let mut ids: Vec<String> = deliveries.into_iter().map(|d| d.id.clone()).collect();
    ids.sort();
    ids
}

on_both_backends!(
    accounts_users_keys_and_endpoints_round_trip,
    an_event_and_its_deliveries_are_stored_together,
    a_failure_half_way_leaves_nothing_behind,
    a_duplicate_producer_event_id_is_rejected_cleanly,
    a_group_of_events_answers_for_each_and_stores_what_it_answers,
    an_event_that_names_its_key_is_stored_only_while_the_key_is_active,
    each_ingest_fans_out_to_the_endpoints_as_they_are_at_its_write,
    claims_take_due_deliveries_oldest_first,
    claims_leave_no_more_in_flight_than_allowed,
    a_claim_says_whether_it_held_work_back_for_want_of_a_slot,
    an_ingest_group_leases_what_it_made_as_a_claim_would,
    an_ingest_groups_lease_keeps_the_rate_and_host_limits,
    an_ingest_groups_lease_asks_the_longest_waiting_endpoint_first,
    an_ingest_groups_lease_starts_at_its_newest_event_and_keeps_its_length,
    a_claim_whose_limit_leaves_endpoints_unasked_spends_their_rates,
    a_claim_fills_its_limit_past_endpoints_with_less_due,
    a_claimed_batch_comes_with_its_events_and_endpoints,
    concurrent_claimers_never_share_a_delivery,
    deliveries_move_through_their_states,
    a_batch_of_results_answers_for_each_in_its_place,
    a_delivery_that_contradicts_its_state_is_refused,
    expired_leases_are_rescued_without_counting_an_attempt,
    event_pages_carry_their_own_deliveries_and_continue_by_cursor,
    each_filter_form_lists_an_event_once_and_pages_in_order,
    the_list_filters_by_last_answer_type_id_and_time,
    a_type_with_more_events_than_the_list_probes_still_finds_its_older_answers,
    each_state_combines_with_a_type_and_in_flight_work_counts_as_queued,
);

const WINDOW: Duration = Duration::from_secs(72 * 3600);

fn event(account_id: &str, id: &str, event_type: &str) -> NewEvent {
    NewEvent {
        account_id: account_id.to_string(),
        id: id.to_string(),
        event_type: event_type.to_string(),
        payload: br#"{"amount":42}"#.to_vec(),
    }
}

/// `event` ingested at `now` for every endpoint that wants its type, with
/// the usual retry window, no trace and no key.
fn to_ingest(event: NewEvent, now: Timestamp) -> NewIngest {
    NewIngest {
        event,
        only: None,
        now,
        give_up_at: now.plus(WINDOW),
        traceparent: None,
        key_id: None,
    }
}

/// Ingests `batch` leasing under `terms`, every event stored; what the
/// group leased.
async fn lease_at_ingest(
    store: &Store,
    batch: &[NewIngest],
    terms: dakghar::store::LeaseTerms,
) -> dakghar::store::Claim {
    let (inserted, claim) = store
        .insert_events_leasing(batch, Some(terms))
        .await
        .unwrap();
    for i in inserted {
        i.unwrap();
    }
    claim
}

/// The endpoint `new_endpoint` describes, created at `now`.
async fn add_endpoint(
    store: &Store,
    account_id: &str,
    url: &str,
    types: &[&str],
    now: Timestamp,
) -> Endpoint {
    store
        .create_endpoint(new_endpoint(account_id, url, types), now)
        .await
        .unwrap()
}

/// The account "acme" with one endpoint, `https://a.example/`, for the
/// event types given (none: every type).
async fn acme_with_an_endpoint(store: &Store, now: Timestamp, types: &[&str]) -> Account {
    let acc = store.create_account("acme", now).await.unwrap();
    add_endpoint(store, &acc.id, "https://a.example/", types, now).await;
    acc
}

fn record(attempt: i64, status: Option<i64>) -> AttemptRecord {
    AttemptRecord {
        attempt,
        started_at: 0,
        duration_ms: 12,
        request_headers: "{}".into(),
        response_status: status,
        response_headers: Some("{}".into()),
        response_body: Some(vec![0xff, 0x00, b'o', b'k']),
        error: None,
        classification: "test".into(),
    }
}

async fn accounts_users_keys_and_endpoints_round_trip(store: Store) {
    let clock = TestClock::starting_now();
    let now = clock.now();

    let acme = store.create_account("acme", now).await.unwrap();
    assert!(acme.id.starts_with("acc_"));
    assert_eq!(store.account_by_name("acme").await.unwrap(), acme);
    assert_eq!(store.account(&acme.id).await.unwrap(), acme);
    assert!(matches!(
        store.create_account("acme", now).await,
        Err(StoreError::Conflict(_))
    ));
    assert!(matches!(
        store.account("acc_missing").await,
        Err(StoreError::NotFound)
    ));

    let user = store
        .create_user(
            &acme.id,
            "ops@acme.example",
            "$argon2id$hash",
            Role::Admin,
            now,
        )
        .await
        .unwrap();
    let found = store.user_by_email("ops@acme.example").await.unwrap();
    assert_eq!(
        (found.id.as_str(), found.is_admin()),
        (user.id.as_str(), true)
    );
    assert_eq!(found.password_hash, "$argon2id$hash");
    assert_eq!(store.count_users().await.unwrap(), 1);
    assert!(matches!(
        store
            .create_user(&acme.id, "ops@acme.example", "x", Role::Member, now)
            .await,
        Err(StoreError::Conflict(_))
    ));

    let key = store
        .create_api_key(&acme.id, "", "dk_abcdef", "hash-1", false, now)
        .await
        .unwrap();
    assert_eq!(store.active_api_key("hash-1").await.unwrap(), key);
    assert_eq!(
        store.list_api_keys(&acme.id).await.unwrap(),
        vec![key.clone()]
    );
    store.revoke_api_key(&acme.id, &key.id, now).await.unwrap();
    assert!(matches!(
        store.active_api_key("hash-1").await,
        Err(StoreError::NotFound)
    ));
    // Revoking twice, or another account's key, finds nothing.
    assert!(matches!(
        store.revoke_api_key(&acme.id, &key.id, now).await,
        Err(StoreError::NotFound)
    ));

    let mut new = new_endpoint(&acme.id, "https://hooks.acme.example/in", &["invoice.paid"]);
    new.rate_limit_per_sec = Some(5);
    new.max_in_flight = 3;
    let ep = store.create_endpoint(new, now).await.unwrap();
    assert!(ep.id.starts_with("ep_"));
    assert_eq!(store.endpoint(&acme.id, &ep.id).await.unwrap(), ep);
    assert_eq!(ep.event_type_filter(), vec!["invoice.paid".to_string()]);
    assert_eq!((ep.rate_limit_per_sec, ep.max_in_flight), (Some(5), 3));
    assert_eq!(
        (ep.state.as_str(), ep.circuit_state.as_str()),
        ("active", "closed")
    );
    assert_eq!(
        store.list_endpoints(&acme.id).await.unwrap(),
        vec![ep.clone()]
    );

    // Tenancy: another account never sees this endpoint.
    let other = store.create_account("other", now).await.unwrap();
    assert!(matches!(
        store.endpoint(&other.id, &ep.id).await,
        Err(StoreError::NotFound)
    ));
    assert!(store.list_endpoints(&other.id).await.unwrap().is_empty());
    assert!(matches!(
        store.revoke_api_key(&other.id, &key.id, now).await,
        Err(StoreError::NotFound)
    ));
}

async fn an_event_and_its_deliveries_are_stored_together(store: Store) {
    let clock = TestClock::starting_now();
    let now = clock.now();
    let acc = store.create_account("acme", now).await.unwrap();
    let all = add_endpoint(&store, &acc.id, "https://a.example/", &[], now).await;
    let paid = add_endpoint(
        &store,
        &acc.id,
        "https://b.example/",
        &["invoice.paid"],
        now,
    )
    .await;
    let other_type = add_endpoint(
        &store,
        &acc.id,
        "https://c.example/",
        &["user.created"],
        now,
    )
    .await;
    let paused = add_endpoint(&store, &acc.id, "https://d.example/", &[], now).await;
    store
        .set_endpoint_state(
            &acc.id,
            &paused.id,
            EndpointState::Paused,
            Some("maintenance"),
            now,
        )
        .await
        .unwrap();
    let disabled = add_endpoint(&store, &acc.id, "https://e.example/", &[], now).await;
    store
        .set_endpoint_state(&acc.id, &disabled.id, EndpointState::Disabled, None, now)
        .await
        .unwrap();
    // Another account's endpoints never receive this account's events.
    let stranger = store.create_account("stranger", now).await.unwrap();
    add_endpoint(&store, &stranger.id, "https://s.example/", &[], now).await;

    let give_up = now.plus(WINDOW);
    let inserted = store
        .insert_event(event(&acc.id, "evt_1", "invoice.paid"), now, give_up)
        .await
        .unwrap();

    assert_eq!(inserted.event.payload, br#"{"amount":42}"#.to_vec());
    let targets = endpoints_of(&inserted.deliveries);
    let mut expected = vec![all.id.clone(), paid.id.clone(), paused.id.clone()];
    expected.sort();
    assert_eq!(
        targets, expected,
        "matching, paused included, disabled and {} excluded",
        other_type.id
    );
    for d in &inserted.deliveries {
        assert_eq!(d.state(), Some(DeliveryState::Pending));
        assert_eq!((d.attempts, d.attempt_seq), (0, 0));
        assert_eq!(d.next_attempt_at, now.millis());
        assert_eq!(d.give_up_at, give_up.millis());
    }
    assert_eq!(store.event(&acc.id, "evt_1").await.unwrap(), inserted.event);
    assert_eq!(
        store
            .deliveries_of_event(&acc.id, "evt_1")
            .await
            .unwrap()
            .len(),
        3
    );
    assert!(matches!(
        store.event(&stranger.id, "evt_1").await,
        Err(StoreError::NotFound)
    ));
}

async fn a_failure_half_way_leaves_nothing_behind(store: Store) {
    let clock = TestClock::starting_now();
    let now = clock.now();
    let acc = store.create_account("acme", now).await.unwrap();
    add_endpoint(&store, &acc.id, "https://a.example/", &[], now).await;
    let doomed = add_endpoint(&store, &acc.id, "https://b.example/", &[], now).await;

    // A real fault inside the real database: the second delivery insert aborts.
    plant_fault(&store, &doomed.id).await;

    let result = store
        .insert_event(
            event(&acc.id, "evt_doomed", "invoice.paid"),
            now,
            now.plus(WINDOW),
        )
        .await;
    match result {
        Err(e @ (StoreError::Database(_) | StoreError::Direct(_))) => {
            assert!(e.to_string().contains("planted fault"), "{e}")
        }
        other => panic!("expected the planted fault, got {other:?}"),
    }
    assert!(matches!(
        store.event(&acc.id, "evt_doomed").await,
        Err(StoreError::NotFound)
    ));
    assert!(store
        .deliveries_of_event(&acc.id, "evt_doomed")
        .await
        .unwrap()
        .is_empty());
    assert_eq!(
        store
            .count_deliveries(DeliveryState::Pending)
            .await
            .unwrap(),
        0
    );
}

/// On Postgres ingest plans from endpoints the store kept from an earlier
/// ingest; every change that alters a fan-out is seen by the next write
/// all the same (here the same store makes the changes, and its copy is
/// not told of them: as with a change made on another node).
async fn each_ingest_fans_out_to_the_endpoints_as_they_are_at_its_write(store: Store) {
    let clock = TestClock::starting_now();
    let now = clock.now();
    let acme = store.create_account("acme", now).await.unwrap();
    let globex = store.create_account("globex", now).await.unwrap();
    let a = add_endpoint(&store, &acme.id, "https://a.example/", &[], now)
        .await
        .id;
    let theirs = add_endpoint(&store, &globex.id, "https://g.example/", &[], now)
        .await
        .id;
    let n = std::cell::Cell::new(0);
    let send = |account: &str, event_type: &str| {
        n.set(n.get() + 1);
        let (store, new) = (
            store.clone(),
            event(account, &format!("e{}", n.get()), event_type),
        );
        async move {
            let inserted = store
                .insert_event(new, now, now.plus(WINDOW))
                .await
                .unwrap();
            endpoints_of(&inserted.deliveries)
        }
    };
    let sorted = |mut ids: Vec<&String>| {
        ids.sort();
        ids.into_iter().cloned().collect::<Vec<_>>()
    };
    assert_eq!(send(&acme.id, "t").await, vec![a.clone()]);
    assert_eq!(send(&globex.id, "t").await, vec![theirs.clone()]);

    let b = add_endpoint(&store, &acme.id, "https://b.example/", &["t"], now)
        .await
        .id;
    assert_eq!(send(&acme.id, "t").await, sorted(vec![&a, &b]), "created");
    let patch = |types: &[&str]| EndpointPatch {
        event_types: Some(types.iter().map(|t| t.to_string()).collect()),
        ..Default::default()
    };
    store
        .update_endpoint(&acme.id, &b, patch(&["u"]), now)
        .await
        .unwrap();
    assert_eq!(send(&acme.id, "t").await, vec![a.clone()], "refiltered");
    assert_eq!(send(&acme.id, "u").await, sorted(vec![&a, &b]));
    store
        .set_endpoint_state(&acme.id, &a, EndpointState::Disabled, None, now)
        .await
        .unwrap();
    assert_eq!(send(&acme.id, "u").await, vec![b.clone()], "disabled");
    store
        .set_endpoint_state(&acme.id, &a, EndpointState::Paused, Some("by hand"), now)
        .await
        .unwrap();
    assert_eq!(
        send(&acme.id, "u").await,
        sorted(vec![&a, &b]),
        "a paused endpoint still gets its deliveries"
    );
    store.delete_endpoint(&acme.id, &b).await.unwrap();
    assert_eq!(send(&acme.id, "u").await, vec![a.clone()], "deleted");
    assert_eq!(
        send(&globex.id, "u").await,
        vec![theirs.clone()],
        "another account's fan-out is its own"
    );

    // One group, one account's copy stale and the other's not: on Postgres
    // the stale account's events go in a second pass, and every answer
    // still belongs to its own event.
    let c = add_endpoint(&store, &acme.id, "https://c.example/", &[], now)
        .await
        .id;
    let item = |account: &str, id: &str| to_ingest(event(account, id, "u"), now);
    let batch = [
        item(&globex.id, "g1"),
        item(&acme.id, "m1"),
        item(&globex.id, "g2"),
        item(&acme.id, "m2"),
        item(&acme.id, "e1"),
    ];
    let answers = store.insert_events(&batch).await.unwrap();
    for (i, want) in [
        Some(vec![theirs.clone()]),
        Some(sorted(vec![&a, &c])),
        Some(vec![theirs.clone()]),
        Some(sorted(vec![&a, &c])),
        None,
    ]
    .into_iter()
    .enumerate()
    {
        let e = &batch[i].event;
        match (&answers[i], want) {
            (Ok(inserted), Some(want)) => {
                assert_eq!(
                    (&inserted.event.account_id, &inserted.event.id),
                    (&e.account_id, &e.id)
                );
                assert_eq!(endpoints_of(&inserted.deliveries), want, "{}", e.id);
                let stored = store
                    .deliveries_of_event(&e.account_id, &e.id)
                    .await
                    .unwrap();
                assert_eq!(endpoints_of(&stored), want, "{}: stored as answered", e.id);
            }
            (Err(StoreError::Conflict(_)), None) => {}
            (answer, _) => panic!("{}: {answer:?}", e.id),
        }
    }
}

async fn an_event_that_names_its_key_is_stored_only_while_the_key_is_active(store: Store) {
    let clock = TestClock::starting_now();
    let now = clock.now();
    let acme = store.create_account("acme", now).await.unwrap();
    add_endpoint(&store, &acme.id, "https://a.example/", &[], now).await;
    let key = |name: &'static str| {
        let store = store.clone();
        let account = acme.id.clone();
        async move {
            store
                .create_api_key(&account, name, name, &format!("hash-{name}"), false, now)
                .await
                .unwrap()
                .id
        }
    };
    let (active, revoked) = (key("active").await, key("revoked").await);
    store.revoke_api_key(&acme.id, &revoked, now).await.unwrap();
    let platform = |name: &'static str| {
        let store = store.clone();
        async move {
            store
                .create_platform_key(name, name, &format!("hash-p-{name}"), now)
                .await
                .unwrap()
                .id
        }
    };
    let (p_active, p_revoked) = (platform("active").await, platform("revoked").await);
    store.revoke_platform_key(&p_revoked, now).await.unwrap();
    store
        .insert_event(event(&acme.id, "seen", "t"), now, now.plus(WINDOW))
        .await
        .unwrap();

    let item = |id: &str, key: Option<&String>| NewIngest {
        key_id: key.cloned(),
        ..to_ingest(event(&acme.id, id, "t"), now)
    };
    let batch = [
        item("by-active", Some(&active)),
        item("by-revoked", Some(&revoked)),
        item("by-platform", Some(&p_active)),
        item("by-revoked-platform", Some(&p_revoked)),
        item("by-nobody", None),
        item("seen", Some(&revoked)),
        item("by-unknown", Some(&"key_gone".to_string())),
    ];
    let answers = store.insert_events(&batch).await.unwrap();
    for (i, stored) in [true, false, true, false, true, false, false]
        .into_iter()
        .enumerate()
    {
        let id = &batch[i].event.id;
        match (&answers[i], stored) {
            (Ok(inserted), true) => assert_eq!(inserted.deliveries.len(), 1, "{id}"),
            (Err(StoreError::KeyRevoked), false) => {}
            (answer, _) => panic!("{id}: {answer:?}"),
        }
        let in_store = store.event(&acme.id, id).await;
        let deliveries = store.deliveries_of_event(&acme.id, id).await.unwrap();
        match id.as_str() {
            "seen" => assert_eq!(deliveries.len(), 1, "the first ingest's, untouched"),
            _ if stored => assert!(in_store.is_ok() && deliveries.len() == 1, "{id}"),
            _ => assert!(
                matches!(in_store, Err(StoreError::NotFound)) && deliveries.is_empty(),
                "{id}: nothing of a refused event is written"
            ),
        }
    }
}

/// Ingest's group commit: one call, many events of several accounts, each
/// answered on its own; what it answers is exactly what was stored.
async fn a_group_of_events_answers_for_each_and_stores_what_it_answers(store: Store) {
    let clock = TestClock::starting_now();
    let now = clock.now();
    let acme = store.create_account("acme", now).await.unwrap();
    let globex = store.create_account("globex", now).await.unwrap();
    let all = add_endpoint(&store, &acme.id, "https://a.example/", &[], now).await;
    let paid = add_endpoint(
        &store,
        &acme.id,
        "https://b.example/",
        &["invoice.paid"],
        now,
    )
    .await;
    let theirs = add_endpoint(&store, &globex.id, "https://c.example/", &[], now).await;
    store
        .insert_event(
            event(&acme.id, "seen", "invoice.paid"),
            now,
            now.plus(WINDOW),
        )
        .await
        .unwrap();

    let item = |account: &str, id: &str, event_type: &str, only: Option<&str>| NewIngest {
        only: only.map(str::to_owned),
        ..to_ingest(event(account, id, event_type), now)
    };
    let batch = [
        item(&acme.id, "paid", "invoice.paid", None),
        item(&acme.id, "seen", "invoice.paid", None),
        item(&globex.id, "paid", "invoice.paid", None),
        item(&acme.id, "twice", "invoice.created", None),
        item(&acme.id, "twice", "invoice.paid", None),
        item(&acme.id, "test", "invoice.created", Some(&paid.id)),
    ];
    let answers = store.insert_events(&batch).await.unwrap();
    assert_eq!(answers.len(), batch.len());
    let targets = |i: usize| endpoints_of(&answers[i].as_ref().unwrap().deliveries);
    let mut both = vec![all.id.clone(), paid.id.clone()];
    both.sort();
    assert_eq!(targets(0), both, "every endpoint that wants the type");
    assert!(
        matches!(answers[1], Err(StoreError::Conflict(_))),
        "stored before: {:?}",
        answers[1]
    );
    assert_eq!(
        targets(2),
        vec![theirs.id.clone()],
        "the same id, another account"
    );
    assert_eq!(targets(3), vec![all.id.clone()], "the filter holds");
    assert!(
        matches!(answers[4], Err(StoreError::Conflict(_))),
        "the batch's second 'twice': {:?}",
        answers[4]
    );
    assert_eq!(
        targets(5),
        vec![paid.id.clone()],
        "only, whatever the filter"
    );

    for (i, answer) in answers.iter().enumerate() {
        let Ok(inserted) = answer else { continue };
        let e = &batch[i].event;
        assert_eq!(
            store.event(&e.account_id, &e.id).await.unwrap(),
            inserted.event
        );
        for d in &inserted.deliveries {
            assert_eq!(
                &store.delivery(&d.id).await.unwrap(),
                d,
                "stored as answered"
            );
        }
    }
    let twice = store.event(&acme.id, "twice").await.unwrap();
    assert_eq!(
        twice.event_type, "invoice.created",
        "the first of the batch won"
    );
    assert_eq!(
        store
            .count_deliveries(DeliveryState::Pending)
            .await
            .unwrap(),
        2 + 2 + 1 + 1 + 1,
        "the first 'seen' and the batch's new ones, nothing for the conflicts"
    );
}

/// Makes every delivery insert for `endpoint_id` abort, inside the database.
async fn plant_fault(store: &Store, endpoint_id: &str) {
    let trigger = match store.backend() {
        Backend::Sqlite => format!(
            "CREATE TRIGGER planted_fault BEFORE INSERT ON deliveries \
             WHEN NEW.endpoint_id = '{endpoint_id}' BEGIN SELECT RAISE(ABORT, 'planted fault'); END;"
        ),
        Backend::Postgres => format!(
            "CREATE FUNCTION planted_fault() RETURNS trigger AS $$ BEGIN \
               IF NEW.endpoint_id = '{endpoint_id}' THEN RAISE EXCEPTION 'planted fault'; END IF; \
               RETURN NEW; END $$ LANGUAGE plpgsql; \
             CREATE TRIGGER planted_fault BEFORE INSERT ON deliveries \
               FOR EACH ROW EXECUTE FUNCTION planted_fault();"
        ),
    };
    store.execute_script(&trigger).await.unwrap();
}

/// On one thread, so the writer cannot start before all three events of
/// the group are queued.
mod one_bad_event_of_a_group_fails_alone {
    #[tokio::test(flavor = "current_thread")]
    async fn sqlite() {
        let db = crate::helpers::TestDb::sqlite().await;
        super::one_bad_event_of_a_group_fails_alone(db.store.clone()).await;
        db.finish().await;
    }

    #[tokio::test(flavor = "current_thread")]
    #[cfg_attr(not(test_postgres), ignore = "TEST_DATABASE_URL is not set")]
    async fn postgres() {
        let db = crate::helpers::TestDb::postgres().await;
        super::one_bad_event_of_a_group_fails_alone(db.store.clone()).await;
        db.finish().await;
    }
}

/// Events that arrive together share a transaction; one that cannot be
/// stored fails alone, and the others are stored.
async fn one_bad_event_of_a_group_fails_alone(store: Store) {
    let clock = TestClock::starting_now();
    let now = clock.now();
    let acme = store.create_account("acme", now).await.unwrap();
    let globex = store.create_account("globex", now).await.unwrap();
    add_endpoint(&store, &acme.id, "https://a.example/", &[], now).await;
    let doomed = add_endpoint(&store, &globex.id, "https://b.example/", &[], now).await;
    plant_fault(&store, &doomed.id).await;
    let ingester = Ingester::start(store.clone(), None);
    let item = |account: &str, id: &str| to_ingest(event(account, id, "invoice.paid"), now);
    // Polled together on one thread, all three are queued before the
    // writer runs: they form one group.
    let (a, b, c) = tokio::join!(
        ingester.insert(item(&acme.id, "a")),
        ingester.insert(item(&globex.id, "b")),
        ingester.insert(item(&acme.id, "c")),
    );
    assert_eq!(a.unwrap().deliveries.len(), 1);
    assert!(
        matches!(&b, Err(e @ (StoreError::Database(_) | StoreError::Direct(_)))
            if e.to_string().contains("planted fault")),
        "{b:?}"
    );
    assert_eq!(c.unwrap().deliveries.len(), 1);
    assert!(matches!(
        store.event(&globex.id, "b").await,
        Err(StoreError::NotFound)
    ));
    assert_eq!(
        store
            .count_deliveries(DeliveryState::Pending)
            .await
            .unwrap(),
        2
    );
}

async fn a_duplicate_producer_event_id_is_rejected_cleanly(store: Store) {
    let clock = TestClock::starting_now();
    let now = clock.now();
    let acc = store.create_account("acme", now).await.unwrap();
    add_endpoint(&store, &acc.id, "https://a.example/", &[], now).await;
    let first = store
        .insert_event(
            event(&acc.id, "order-17", "invoice.paid"),
            now,
            now.plus(WINDOW),
        )
        .await
        .unwrap();

    let mut again = event(&acc.id, "order-17", "other.type");
    again.payload = b"{}".to_vec();
    let second = store.insert_event(again, now, now.plus(WINDOW)).await;
    assert!(matches!(second, Err(StoreError::Conflict(_))), "{second:?}");
    assert_eq!(store.event(&acc.id, "order-17").await.unwrap(), first.event);
    assert_eq!(
        store
            .deliveries_of_event(&acc.id, "order-17")
            .await
            .unwrap()
            .len(),
        1
    );

    // Ids are scoped per account: another account may use the same one.
    let other = store.create_account("other", now).await.unwrap();
    store
        .insert_event(
            event(&other.id, "order-17", "invoice.paid"),
            now,
            now.plus(WINDOW),
        )
        .await
        .expect("same producer id in another account");
}

async fn claims_take_due_deliveries_oldest_first(store: Store) {
    let clock = TestClock::at(Timestamp(1_700_000_000_000));
    let acc = acme_with_an_endpoint(&store, clock.now(), &["t"]).await;
    let paused = store
        .create_endpoint(
            new_endpoint(&acc.id, "https://p.example/", &["paused.only"]),
            clock.now(),
        )
        .await
        .unwrap();
    store
        .set_endpoint_state(
            &acc.id,
            &paused.id,
            EndpointState::Paused,
            None,
            clock.now(),
        )
        .await
        .unwrap();

    // Inserted out of order in time; claims must come back by next_attempt_at.
    let mut expected = Vec::new();
    for (i, offset_s) in [30u64, 10, 20, 0].into_iter().enumerate() {
        let at = Timestamp(1_700_000_000_000).plus(Duration::from_secs(offset_s));
        let inserted = store
            .insert_event(event(&acc.id, &format!("e{i}"), "t"), at, at.plus(WINDOW))
            .await
            .unwrap();
        expected.push((offset_s, inserted.deliveries[0].id.clone()));
    }
    expected.sort();
    store
        .insert_event(
            event(&acc.id, "p", "paused.only"),
            clock.now(),
            clock.now().plus(WINDOW),
        )
        .await
        .unwrap();

    clock.advance(Duration::from_secs(15));
    let lease = clock.now().plus(Duration::from_secs(300));
    let first = store
        .claim_due(
            clock.now(),
            lease,
            10,
            dakghar::store::ClaimRules::default(),
        )
        .await
        .unwrap();
    let ids: Vec<_> = first.iter().map(|d| d.id.clone()).collect();
    assert_eq!(
        ids,
        vec![expected[0].1.clone(), expected[1].1.clone()],
        "only the due ones, oldest first"
    );
    for d in &first {
        assert_eq!(d.state(), Some(DeliveryState::InFlight));
        assert_eq!(d.lease_until, Some(lease.millis()));
        assert_eq!(d.claimed_at, Some(clock.now().millis()));
        assert!(d.claim_token.is_some());
    }

    clock.advance(Duration::from_secs(60));
    let lease = clock.now().plus(Duration::from_secs(300));
    let limited = store
        .claim_due(clock.now(), lease, 1, dakghar::store::ClaimRules::default())
        .await
        .unwrap();
    assert_eq!(limited.len(), 1, "the batch limit holds");
    assert_eq!(limited[0].id, expected[2].1);
    let rest = store
        .claim_due(
            clock.now(),
            lease,
            10,
            dakghar::store::ClaimRules::default(),
        )
        .await
        .unwrap();
    assert_eq!(
        rest.iter().map(|d| d.id.clone()).collect::<Vec<_>>(),
        vec![expected[3].1.clone()]
    );
    assert!(
        store
            .claim_due(
                clock.now(),
                lease,
                10,
                dakghar::store::ClaimRules::default()
            )
            .await
            .unwrap()
            .is_empty(),
        "nothing left: in-flight rows and paused endpoints are not claimed"
    );
}

async fn claims_leave_no_more_in_flight_than_allowed(store: Store) {
    let clock = TestClock::starting_now();
    let now = clock.now();
    let lease = now.plus(Duration::from_secs(300));
    let acc = store.create_account("acme", now).await.unwrap();
    let mut narrow = new_endpoint(&acc.id, "https://narrow.example/", &[]);
    narrow.max_in_flight = 3;
    let narrow = store.create_endpoint(narrow, now).await.unwrap();
    let wide = add_endpoint(&store, &acc.id, "https://wide.example/", &[], now).await;
    for i in 0..12 {
        store
            .insert_event(event(&acc.id, &format!("e{i}"), "t"), now, now.plus(WINDOW))
            .await
            .unwrap();
    }
    let per_endpoint = |claimed: &[dakghar::store::Delivery], id: &str| {
        claimed.iter().filter(|d| d.endpoint_id == id).count()
    };

    let first = store
        .claim_due(now, lease, 100, dakghar::store::ClaimRules::default())
        .await
        .unwrap();
    assert_eq!(per_endpoint(&first, &narrow.id), 3, "max_in_flight 3");
    assert_eq!(per_endpoint(&first, &wide.id), 10, "the default 10");
    assert!(
        store
            .claim_due(now, lease, 100, dakghar::store::ClaimRules::default())
            .await
            .unwrap()
            .is_empty(),
        "both endpoints are full"
    );

    store.release_claim(&first[0], now).await.unwrap();
    let freed = &first[0].endpoint_id;
    let again = store
        .claim_due(now, lease, 100, dakghar::store::ClaimRules::default())
        .await
        .unwrap();
    assert_eq!(again.len(), 1, "one slot came free");
    assert_eq!(&again[0].endpoint_id, freed);

    // An open circuit past its cooldown gives exactly one trial slot.
    for d in first
        .iter()
        .chain(&again)
        .filter(|d| d.endpoint_id == wide.id)
    {
        let _ = store.release_claim(d, now).await;
    }
    store
        .open_circuit(&wide.id, now, 30_000, now)
        .await
        .unwrap();
    let trial = store
        .claim_due(now, lease, 100, dakghar::store::ClaimRules::default())
        .await
        .unwrap();
    assert_eq!(
        per_endpoint(&trial, &wide.id),
        1,
        "a single half-open trial"
    );
}

async fn a_claim_says_whether_it_held_work_back_for_want_of_a_slot(store: Store) {
    let clock = TestClock::starting_now();
    let now = clock.now();
    let lease = now.plus(Duration::from_secs(300));
    let acc = store.create_account("acme", now).await.unwrap();
    let mut seq = 0;
    let mut due = |kind: &'static str, n: usize| {
        let (store, acc_id) = (&store, acc.id.clone());
        let first = seq;
        seq += n;
        async move {
            for i in first..first + n {
                store
                    .insert_event(
                        event(&acc_id, &format!("e{i}"), kind),
                        now,
                        now.plus(WINDOW),
                    )
                    .await
                    .unwrap();
            }
        }
    };
    let claim = |limit: i64, rules: dakghar::store::ClaimRules| {
        let store = &store;
        async move {
            let c = store.claim(now, lease, limit, rules).await.unwrap();
            (c.deliveries.len(), c.held_back)
        }
    };
    let rules = dakghar::store::ClaimRules::default();
    let endpoint = |kind: &str, tweak: fn(&mut dakghar::store::NewEndpoint)| {
        let mut e = new_endpoint(&acc.id, &format!("https://{kind}.example/"), &[kind]);
        tweak(&mut e);
        let store = &store;
        async move { store.create_endpoint(e, now).await.unwrap() }
    };

    endpoint("roomy", |_| {}).await;
    due("roomy", 2).await;
    assert_eq!(
        claim(100, rules).await,
        (2, false),
        "all there was, slots to spare"
    );
    due("roomy", 3).await;
    assert_eq!(
        claim(2, rules).await,
        (2, false),
        "slots to spare: a full claim's loop claims again anyway"
    );
    assert_eq!(claim(100, rules).await, (1, false));

    let narrow = endpoint("narrow", |e| e.max_in_flight = 3).await;
    due("narrow", 5).await;
    assert_eq!(
        claim(100, rules).await,
        (3, true),
        "every slot taken, two wait"
    );
    due("roomy", 1).await;
    assert_eq!(
        claim(100, rules).await,
        (1, true),
        "the full endpoint was passed over with work due"
    );
    assert_eq!(
        claim(100, rules).await,
        (0, true),
        "nothing to take, and work held all the same"
    );

    pause(&store, &acc.id, &narrow.id, now).await;
    let rated = endpoint("rated", |e| e.rate_limit_per_sec = Some(2)).await;
    let metered = endpoint("metered", |e| e.rate_limit_per_sec = Some(3)).await;
    due("rated", 5).await;
    due("metered", 5).await;
    assert_eq!(
        claim(100, rules).await,
        (5, false),
        "each held by its own rate limit, which freed slots do not lift"
    );
    assert_eq!(
        claim(100, rules).await,
        (0, false),
        "the rate limits alone: one claim spent both budgets"
    );
    for id in [&rated.id, &metered.id] {
        pause(&store, &acc.id, id, now).await;
    }

    endpoint("hosted", |_| {}).await;
    due("hosted", 3).await;
    let host_cap = dakghar::store::ClaimRules {
        host_cap: 2,
        ..rules
    };
    assert_eq!(
        claim(100, host_cap).await,
        (2, true),
        "the host's slots, not the endpoint's, ran out"
    );
    assert_eq!(
        claim(100, host_cap).await,
        (0, true),
        "the host's attempts in flight count against its cap"
    );
    assert_eq!(claim(100, rules).await, (1, false), "the last one");
}

/// An ingest group leases for this node's workers, in its own
/// transaction, what it made due: within a claim's rules (a full
/// endpoint's slots, a paused endpoint), its limit, and of each endpoint
/// at most one more than it made. Its answers say which of its
/// deliveries are in flight and whether it left anything due that could
/// start now, and the claim carries their events and endpoints.
async fn an_ingest_group_leases_what_it_made_as_a_claim_would(store: Store) {
    let clock = TestClock::starting_now();
    let now = clock.now();
    let lease_until = now.plus(Duration::from_secs(300));
    let rules = dakghar::store::ClaimRules::default();
    let terms = |limit: i64| dakghar::store::LeaseTerms {
        now,
        lease_until,
        limit,
        rules,
    };
    let acc = store.create_account("acme", now).await.unwrap();
    let mut narrow = new_endpoint(&acc.id, "https://narrow.example/", &["narrow"]);
    narrow.max_in_flight = 2;
    let narrow = store.create_endpoint(narrow, now).await.unwrap();
    let paused = add_endpoint(&store, &acc.id, "https://paused.example/", &["narrow"], now).await;
    pause(&store, &acc.id, &paused.id, now).await;
    let roomy = add_endpoint(&store, &acc.id, "https://roomy.example/", &["roomy"], now).await;
    let group = |kind: &str, ids: &[&str]| -> Vec<NewIngest> {
        ids.iter()
            .map(|id| to_ingest(event(&acc.id, id, kind), now))
            .collect()
    };
    let in_flight = |inserted: &[Result<dakghar::store::InsertedEvent, StoreError>]| {
        ids_of(
            inserted
                .iter()
                .flat_map(|r| &r.as_ref().unwrap().deliveries)
                .filter(|d| d.state == DeliveryState::InFlight),
        )
    };

    let (inserted, claim) = store
        .insert_events_leasing(&group("narrow", &["a", "b", "c"]), Some(terms(100)))
        .await
        .unwrap();
    let left_nothing_due = |inserted: &[Result<dakghar::store::InsertedEvent, StoreError>]| {
        inserted
            .iter()
            .all(|r| r.as_ref().unwrap().nothing_left_due)
    };
    assert_eq!(
        endpoints_of(&claim.deliveries),
        [narrow.id.as_str(); 2],
        "narrow's two slots; the paused endpoint's deliveries wait"
    );
    assert!(claim.held_back, "narrow's third waits for a slot");
    assert!(
        claim.drained && left_nothing_due(&inserted),
        "nothing that could start now: narrow is full, the other paused"
    );
    for d in &claim.deliveries {
        assert_eq!(d.state, DeliveryState::InFlight);
        assert_eq!(d.lease_until, Some(lease_until.millis()));
        assert_eq!(claim.read_along.events[&d.id].id, d.event_id);
        assert_eq!(
            &store.delivery(&d.id).await.unwrap(),
            d,
            "the lease as written"
        );
    }
    assert_eq!(in_flight(&inserted), ids_of(&claim.deliveries));
    assert_eq!(
        claim.read_along.endpoints.keys().collect::<Vec<_>>(),
        [&narrow.id],
        "the endpoint it leased for, read along"
    );
    let given = store
        .batch_inputs(&claim.deliveries, claim.read_along)
        .await
        .unwrap();
    let read = store
        .batch_inputs(&claim.deliveries, Default::default())
        .await
        .unwrap();
    assert_eq!(given.endpoints, read.endpoints, "as a read finds it");
    let after = store.claim(now, lease_until, 100, rules).await.unwrap();
    assert_eq!(
        (after.deliveries.len(), after.held_back),
        (0, true),
        "the store agrees: narrow is full, the rest paused"
    );

    let (inserted, claim) = store
        .insert_events_leasing(&group("roomy", &["d", "e", "f"]), Some(terms(2)))
        .await
        .unwrap();
    assert_eq!(claim.deliveries.len(), 2, "its limit");
    assert_eq!(in_flight(&inserted), ids_of(&claim.deliveries));
    assert!(
        !claim.drained && !left_nothing_due(&inserted),
        "its limit left roomy's third due"
    );
    let (inserted, claim) = store
        .insert_events_leasing(&group("roomy", &["g"]), Some(terms(100)))
        .await
        .unwrap();
    assert_eq!(
        endpoints_of(&claim.deliveries),
        [roomy.id.as_str(); 2],
        "one more than it made: roomy's third was due before it"
    );
    assert!(claim.held_back, "narrow is still full");
    assert!(!claim.drained, "it got as many as it asked: more may wait");
    assert_eq!(in_flight(&inserted).len(), 1);
    let rest = store.claim_due(now, lease_until, 100, rules).await.unwrap();
    assert!(rest.is_empty(), "nothing left for the loops");

    let (inserted, claim) = store
        .insert_events_leasing(&group("roomy", &["h"]), Some(terms(100)))
        .await
        .unwrap();
    assert_eq!(in_flight(&inserted), ids_of(&claim.deliveries));
    assert_eq!(claim.deliveries.len(), 1);
    assert!(
        claim.drained && left_nothing_due(&inserted),
        "it asked for one more than it made and got none: nothing else waits"
    );

    let other = add_endpoint(&store, &acc.id, "https://other.example/", &["other"], now).await;
    store.insert_events(&group("other", &["i"])).await.unwrap();
    let (_, claim) = store
        .insert_events_leasing(&group("roomy", &["j"]), Some(terms(100)))
        .await
        .unwrap();
    assert_eq!(
        claim.deliveries.len(),
        1,
        "only of the endpoints it made for"
    );
    assert!(!claim.drained, "another endpoint's due work is the loops'");
    let rest = store.claim_due(now, lease_until, 100, rules).await.unwrap();
    assert_eq!(endpoints_of(&rest), [other.id.as_str()]);
}

/// An ingest group's lease asks its endpoints in the order a claim after
/// its write would, the longest-waiting first: with room for one
/// delivery, one endpoint's older event goes before another's newer one,
/// though that other was created first and has a retry scheduled later
/// (the lease reads the group's endpoints before it writes their rows).
async fn an_ingest_groups_lease_asks_the_longest_waiting_endpoint_first(store: Store) {
    let clock = TestClock::starting_now();
    let now = clock.now();
    let then = now.plus(Duration::from_millis(1));
    let lease_until = now.plus(Duration::from_secs(300));
    let rules = dakghar::store::ClaimRules::default();
    let acc = store.create_account("acme", now).await.unwrap();
    let newer = add_endpoint(&store, &acc.id, "https://newer.example/", &["newer"], now).await;
    let older = add_endpoint(&store, &acc.id, "https://older.example/", &["older"], now).await;
    let later = to_ingest(
        event(&acc.id, "later", "newer"),
        now.plus(Duration::from_secs(60)),
    );
    for i in store.insert_events(&[later]).await.unwrap() {
        i.unwrap();
    }
    let batch = [
        to_ingest(event(&acc.id, "o", "older"), now),
        to_ingest(event(&acc.id, "n", "newer"), then),
    ];
    let terms = dakghar::store::LeaseTerms {
        now: then,
        lease_until,
        limit: 1,
        rules,
    };
    let leased = lease_at_ingest(&store, &batch, terms).await.deliveries;
    assert_eq!(
        endpoints_of(&leased),
        [older.id.as_str()],
        "the older event's endpoint first"
    );
    let rest = store.claim(then, lease_until, 100, rules).await.unwrap();
    assert_eq!(
        endpoints_of(&rest.deliveries),
        [newer.id.as_str()],
        "the newer event waits; the retry is not due"
    );
}

/// A group whose events were stamped after the lease's terms (a wall
/// clock stepped back between the two) leases them all the same, due as
/// of its newest event, and the lease runs its full length from then.
async fn an_ingest_groups_lease_starts_at_its_newest_event_and_keeps_its_length(store: Store) {
    let clock = TestClock::starting_now();
    let now = clock.now();
    let later = now.plus(Duration::from_secs(5));
    let acc = acme_with_an_endpoint(&store, now, &[]).await;
    let batch = [
        to_ingest(event(&acc.id, "early", "paid"), now),
        to_ingest(event(&acc.id, "late", "paid"), later),
    ];
    let terms = dakghar::store::LeaseTerms {
        now,
        lease_until: now.plus(Duration::from_secs(300)),
        limit: 100,
        rules: dakghar::store::ClaimRules::default(),
    };
    let leased = lease_at_ingest(&store, &batch, terms).await.deliveries;
    let until = later.plus(Duration::from_secs(300)).millis();
    assert_eq!(
        leased
            .iter()
            .map(|d| (d.event_id.as_str(), d.lease_until))
            .collect::<Vec<_>>(),
        [("early", Some(until)), ("late", Some(until))],
        "both leased, until 300 s after the newest event"
    );
    for d in &leased {
        let stored = store.delivery(&d.id).await.unwrap();
        assert_eq!(stored.lease_until, Some(until), "as stored");
    }
}

/// A claim whose limit is spoken for before every endpoint is asked
/// (its last round leases nothing) still spends the rate budget of what
/// it leased, so the next claim in the same second sees it.
async fn a_claim_whose_limit_leaves_endpoints_unasked_spends_their_rates(store: Store) {
    let clock = TestClock::starting_now();
    let start = clock.now();
    let now = start.plus(Duration::from_secs(1));
    let lease_until = now.plus(Duration::from_secs(300));
    let rules = dakghar::store::ClaimRules {
        default_rate: 3,
        host_cap: 0,
    };
    let acc = store.create_account("acme", start).await.unwrap();
    let mut ids = Vec::new();
    for (kind, url) in [("a", "https://a.example/"), ("b", "https://b.example/")] {
        let e = store
            .create_endpoint(new_endpoint(&acc.id, url, &[kind]), start)
            .await
            .unwrap();
        ids.push(e.id);
    }
    // a's work waited longest: the first claim goes to it.
    for (kind, at) in [("a", start), ("b", start.plus(Duration::from_millis(500)))] {
        let batch: Vec<NewIngest> = (0..5)
            .map(|i| to_ingest(event(&acc.id, &format!("{kind}{i}"), kind), at))
            .collect();
        for i in store.insert_events(&batch).await.unwrap() {
            i.unwrap();
        }
    }
    let first = store.claim(now, lease_until, 2, rules).await.unwrap();
    assert_eq!(endpoints_of(&first.deliveries), [ids[0].as_str(); 2]);
    assert!(!first.drained, "b was left unasked");
    let next = store.claim(now, lease_until, 100, rules).await.unwrap();
    let of = |id: &str| how_many_to(&next.deliveries, id);
    assert_eq!(
        (of(&ids[0]), of(&ids[1])),
        (1, 3),
        "a spent two of its three starts this second, b none"
    );
}

/// An ingest group's lease keeps the installation-wide limits as a claim
/// does: a default rate limit and a per-host cap, counted and spent in the
/// same transaction, so the next claim in the same second sees both.
async fn an_ingest_groups_lease_keeps_the_rate_and_host_limits(store: Store) {
    let clock = TestClock::starting_now();
    let now = clock.now();
    let lease_until = now.plus(Duration::from_secs(300));
    let rules = dakghar::store::ClaimRules {
        default_rate: 2,
        host_cap: 3,
    };
    let acc = store.create_account("acme", now).await.unwrap();
    let endpoint = |url: &str| {
        let e = new_endpoint(&acc.id, url, &["paid"]);
        let store = &store;
        async move { store.create_endpoint(e, now).await.unwrap() }
    };
    let first = endpoint("https://shared.example/first").await;
    let second = endpoint("https://shared.example/second").await;
    let elsewhere = endpoint("https://elsewhere.example/").await;
    let batch: Vec<NewIngest> = ["a", "b", "c"]
        .iter()
        .map(|id| to_ingest(event(&acc.id, id, "paid"), now))
        .collect();
    let terms = dakghar::store::LeaseTerms {
        now,
        lease_until,
        limit: 100,
        rules,
    };
    let claim = lease_at_ingest(&store, &batch, terms).await;
    let count = |id: &str| how_many_to(&claim.deliveries, id);
    // Either shared endpoint may be asked first.
    let shared = [count(&first.id), count(&second.id)];
    assert_eq!(
        (
            shared.iter().sum::<usize>(),
            shared.iter().max().copied(),
            count(&elsewhere.id),
            claim.held_back
        ),
        (3, Some(2), 2, true),
        "two a second each, and three in flight to the shared host"
    );

    let again = store.claim(now, lease_until, 100, rules).await.unwrap();
    assert_eq!(
        (again.deliveries.len(), again.held_back),
        (0, true),
        "this second's budgets spent, the shared host full"
    );
    clock.advance(Duration::from_secs(1));
    let next = store
        .claim(clock.now(), lease_until, 100, rules)
        .await
        .unwrap();
    assert_eq!(
        endpoints_of(&next.deliveries),
        [elsewhere.id.as_str()],
        "a new second's budget; the shared host still full"
    );
}

/// An endpoint with fewer due than it may take leaves the rest of the
/// claim to the endpoints after it, and so does a host's cap that an
/// endpoint of the same host did not use up.
async fn a_claim_fills_its_limit_past_endpoints_with_less_due(store: Store) {
    let clock = TestClock::starting_now();
    let start = clock.now();
    let acc = store.create_account("acme", start).await.unwrap();
    let endpoint = |url: &str, kind: &str| {
        let e = new_endpoint(&acc.id, url, &[kind]);
        let store = &store;
        async move { store.create_endpoint(e, start).await.unwrap() }
    };
    let due = |kind: &'static str, n: usize, at: Timestamp| {
        let (store, acc_id) = (&store, acc.id.clone());
        async move {
            for i in 0..n {
                store
                    .insert_event(
                        event(&acc_id, &format!("{kind}{i}"), kind),
                        at,
                        at.plus(WINDOW),
                    )
                    .await
                    .unwrap();
            }
        }
    };
    let short = endpoint("https://short.example/", "short").await;
    let long = endpoint("https://long.example/", "long").await;
    // The short queue has waited longest, so it is asked first.
    due("short", 2, start).await;
    due("long", 8, start.plus(Duration::from_secs(1))).await;
    clock.advance(Duration::from_secs(10));
    let now = clock.now();
    let lease = now.plus(Duration::from_secs(300));
    let rules = dakghar::store::ClaimRules::default();
    let claim = store.claim(now, lease, 6, rules).await.unwrap();
    let count = |id: &str| how_many_to(&claim.deliveries, id);
    assert_eq!(
        (count(&short.id), count(&long.id)),
        (2, 4),
        "all the short queue had, the rest of the limit from the long one"
    );

    for id in [&short.id, &long.id] {
        pause(&store, &acc.id, id, now).await;
    }
    let few = endpoint("https://shared.example/few", "few").await;
    let many = endpoint("https://shared.example/many", "many").await;
    due("few", 2, now.plus(Duration::from_secs(1))).await;
    due("many", 8, now.plus(Duration::from_secs(2))).await;
    clock.advance(Duration::from_secs(10));
    let now = clock.now();
    let host_cap = dakghar::store::ClaimRules {
        host_cap: 5,
        ..rules
    };
    let claim = store.claim(now, lease, 100, host_cap).await.unwrap();
    let count = |id: &str| how_many_to(&claim.deliveries, id);
    assert_eq!(
        (count(&few.id), count(&many.id), claim.held_back),
        (2, 3, true),
        "the host's five slots: two to the first endpoint, what it left to the second"
    );
}

async fn a_claimed_batch_comes_with_its_events_and_endpoints(store: Store) {
    let clock = TestClock::starting_now();
    let now = clock.now();
    let acc = store.create_account("acme", now).await.unwrap();
    let mut endpoints = Vec::new();
    for host in ["a", "b"] {
        let url = format!("https://{host}.example/");
        endpoints.push(add_endpoint(&store, &acc.id, &url, &[], now).await);
    }
    let batch: Vec<NewIngest> = (0..3)
        .map(|i| NewIngest {
            traceparent: (i == 0)
                .then(|| "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".to_string()),
            ..to_ingest(event(&acc.id, &format!("e{i}"), "invoice.paid"), now)
        })
        .collect();
    for inserted in store.insert_events(&batch).await.unwrap() {
        inserted.unwrap();
    }

    let claim = store
        .claim(
            now,
            now.plus(Duration::from_secs(300)),
            100,
            dakghar::store::ClaimRules::default(),
        )
        .await
        .unwrap();
    assert_eq!(claim.deliveries.len(), 6, "three events to two endpoints");
    let along = &claim.read_along;
    match store.backend() {
        // Each delivery's event and its endpoint, read by the claim's own
        // round trip.
        Backend::Postgres => {
            assert_eq!(along.events.len(), 6);
            assert_eq!(along.endpoints.len(), 2, "both endpoints");
        }
        // Read by the round, off the one write connection, which a
        // claim holds for the rows alone (an ingest group's lease, whose
        // attempts wait on it, reads their endpoints along).
        Backend::Sqlite => {
            assert!(along.events.is_empty() && along.endpoints.is_empty());
        }
    }
    let claimed = claim.deliveries;
    let given = store
        .batch_inputs(&claimed, claim.read_along)
        .await
        .unwrap();
    let read = store
        .batch_inputs(&claimed, Default::default())
        .await
        .unwrap();
    assert_eq!(
        given.events, read.events,
        "as a read of the events finds them"
    );
    assert_eq!(
        given.endpoints, read.endpoints,
        "as a read of the endpoints finds them"
    );
    assert!(given.broken_endpoints.is_empty() && given.broken_events.is_empty());
    for d in &claimed {
        let e = &given.events[&d.id];
        assert_eq!((&e.account_id, &e.id), (&d.account_id, &d.event_id));
        assert_eq!(e.payload, br#"{"amount":42}"#.to_vec());
        assert_eq!(e.traceparent.is_some(), d.event_id == "e0");
        let ep = &given.endpoints[&d.endpoint_id];
        assert_eq!(
            ep.secret, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
            "opened to sign"
        );
    }
}

async fn concurrent_claimers_never_share_a_delivery(store: Store) {
    let clock = TestClock::starting_now();
    let now = clock.now();
    let acc = store.create_account("acme", now).await.unwrap();
    for n in 0..4 {
        // Room for every delivery at once: this test is about sharing.
        let mut roomy = new_endpoint(&acc.id, &format!("https://{n}.example/"), &[]);
        roomy.max_in_flight = 1000;
        store.create_endpoint(roomy, now).await.unwrap();
    }
    for i in 0..60 {
        store
            .insert_event(event(&acc.id, &format!("e{i}"), "t"), now, now.plus(WINDOW))
            .await
            .unwrap();
    }
    let total = 240;

    let mut claimers = Vec::new();
    for _ in 0..8 {
        let store = store.clone();
        claimers.push(tokio::spawn(async move {
            let mut mine = Vec::new();
            loop {
                let batch = store
                    .claim_due(
                        now,
                        now.plus(Duration::from_secs(300)),
                        7,
                        dakghar::store::ClaimRules::default(),
                    )
                    .await
                    .expect("claim");
                if batch.is_empty() {
                    return mine;
                }
                mine.extend(batch.into_iter().map(|d| d.id));
                tokio::task::yield_now().await;
            }
        }));
    }
    let mut seen = HashSet::new();
    let mut count = 0;
    for c in claimers {
        for id in c.await.unwrap() {
            count += 1;
            assert!(seen.insert(id.clone()), "delivery {id} was claimed twice");
        }
    }
    assert_eq!((count, seen.len()), (total, total));
    assert_eq!(
        store
            .count_deliveries(DeliveryState::InFlight)
            .await
            .unwrap(),
        total as i64
    );
}

async fn deliveries_move_through_their_states(store: Store) {
    let clock = TestClock::starting_now();
    let acc = acme_with_an_endpoint(&store, clock.now(), &[]).await;
    for id in ["ok", "bad", "late"] {
        store
            .insert_event(
                event(&acc.id, id, "t"),
                clock.now(),
                clock.now().plus(WINDOW),
            )
            .await
            .unwrap();
    }
    let lease = |c: &TestClock| c.now().plus(Duration::from_secs(300));
    let by_event = |claimed: &[dakghar::store::Delivery], ev: &str| {
        claimed
            .iter()
            .find(|d| d.event_id == ev)
            .cloned()
            .expect("claimed")
    };

    let claimed = store
        .claim_due(
            clock.now(),
            lease(&clock),
            10,
            dakghar::store::ClaimRules::default(),
        )
        .await
        .unwrap();
    assert_eq!(claimed.len(), 3);

    // pending → in_flight → pending (retry): one attempt counted, new schedule.
    let ok = by_event(&claimed, "ok");
    let retry_at = clock.now().plus(Duration::from_secs(60));
    let after = store
        .complete_attempt(
            &ok,
            &record(1, Some(500)),
            Transition::Retry {
                next_attempt_at: retry_at,
            },
            clock.now(),
        )
        .await
        .unwrap();
    assert_eq!(after.state(), Some(DeliveryState::Pending));
    assert_eq!((after.attempts, after.attempt_seq), (1, 1));
    assert_eq!(after.next_attempt_at, retry_at.millis());
    assert_eq!((after.lease_until, after.claim_token.clone()), (None, None));
    assert_eq!(after.last_status, Some(500));
    assert_eq!(after.finished_at, None);
    // The store builds the row it answers with instead of reading it back.
    assert_eq!(store.delivery(&after.id).await.unwrap(), after, "as stored");

    // The stale claim can no longer finish it.
    let stale = store
        .complete_attempt(
            &ok,
            &record(2, Some(200)),
            Transition::Delivered,
            clock.now(),
        )
        .await;
    assert!(matches!(stale, Err(StoreError::LostClaim(_))), "{stale:?}");

    // Not due before its time; due after.
    assert!(store
        .claim_due(
            clock.now(),
            lease(&clock),
            10,
            dakghar::store::ClaimRules::default()
        )
        .await
        .unwrap()
        .is_empty());
    clock.advance(Duration::from_secs(61));
    let again = store
        .claim_due(
            clock.now(),
            lease(&clock),
            10,
            dakghar::store::ClaimRules::default(),
        )
        .await
        .unwrap();
    assert_eq!(again.len(), 1);
    let done = store
        .complete_attempt(
            &again[0],
            &record(2, Some(200)),
            Transition::Delivered,
            clock.now(),
        )
        .await
        .unwrap();
    assert_eq!(done.state(), Some(DeliveryState::Delivered));
    assert_eq!(done.finished_at, Some(clock.now().millis()));
    assert_eq!((done.attempts, done.attempt_seq), (1, 2));
    let attempts = store.attempts_of_delivery(&done.id).await.unwrap();
    assert_eq!(
        attempts.iter().map(|a| a.attempt).collect::<Vec<_>>(),
        vec![1, 2]
    );
    assert_eq!(attempts[0].response_status, Some(500));
    assert_eq!(
        attempts[0].response_body,
        Some(vec![0xff, 0x00, b'o', b'k']),
        "binary bodies survive"
    );

    // in_flight → failed and in_flight → expired are terminal.
    let bad = store
        .complete_attempt(
            &by_event(&claimed, "bad"),
            &record(1, Some(410)),
            Transition::Failed,
            clock.now(),
        )
        .await
        .unwrap();
    assert_eq!(bad.state(), Some(DeliveryState::Failed));
    assert!(bad.finished_at.is_some());
    let late = store
        .complete_attempt(
            &by_event(&claimed, "late"),
            &record(1, None),
            Transition::Expired,
            clock.now(),
        )
        .await
        .unwrap();
    assert_eq!(late.state(), Some(DeliveryState::Expired));
    for answered in [&done, &bad, &late] {
        assert_eq!(
            &store.delivery(&answered.id).await.unwrap(),
            answered,
            "as stored"
        );
    }
    assert!(
        store
            .claim_due(
                clock.now().plus(WINDOW),
                lease(&clock),
                10,
                dakghar::store::ClaimRules::default()
            )
            .await
            .unwrap()
            .is_empty(),
        "terminal deliveries are never claimed again"
    );
}

/// A batch of results larger than one statement's rows, with two stale
/// claims among them (one a second result for a delivery the batch also
/// finishes rightly): each answers in its place, and only what still held
/// its claim is written, each with its own attempt.
async fn a_batch_of_results_answers_for_each_in_its_place(store: Store) {
    let clock = TestClock::starting_now();
    let now = clock.now();
    let acc = store.create_account("acme", now).await.unwrap();
    let mut roomy = new_endpoint(&acc.id, "https://a.example/", &[]);
    roomy.max_in_flight = 1000;
    let roomy = store.create_endpoint(roomy, now).await.unwrap();
    let events: Vec<NewIngest> = (0..120)
        .map(|i| to_ingest(event(&acc.id, &format!("e{i}"), "t"), now))
        .collect();
    for inserted in store.insert_events(&events).await.unwrap() {
        inserted.unwrap();
    }
    let claimed = claim_for_five_minutes(&store, now, 120).await;
    assert_eq!(claimed.len(), 120);

    let later = now.plus(Duration::from_secs(1));
    let retry_at = later.plus(Duration::from_secs(60));
    let result = |d: &Delivery, i: usize| {
        let (status, transition) = match i % 3 {
            0 => (200, Transition::Delivered),
            1 => (
                500,
                Transition::Retry {
                    next_attempt_at: retry_at,
                },
            ),
            _ => (410, Transition::Failed),
        };
        dakghar::store::Completion {
            claimed: d.clone(),
            record: AttemptRecord {
                response_body: Some(format!("answer {i}").into_bytes()),
                ..record(1, Some(status))
            },
            transition,
            now: later,
        }
    };
    let mut batch: Vec<_> = claimed
        .iter()
        .enumerate()
        .map(|(i, d)| result(d, i))
        .collect();
    let stale = |d: &Delivery| Delivery {
        claim_token: Some("a claim since lost".into()),
        ..d.clone()
    };
    // Before the delivery's own result, and one whose delivery is
    // finished by no other.
    batch.insert(7, result(&stale(&claimed[70]), 1));
    let lost = claimed[100].id.clone();
    batch[101].claimed = stale(&claimed[100]);

    let answers = store.complete_attempts(&batch).await.unwrap();
    assert_eq!(answers.len(), batch.len());
    for (i, (c, answer)) in batch.iter().zip(&answers).enumerate() {
        let id = &c.claimed.id;
        if i == 7 || *id == lost {
            assert!(
                matches!(answer, Err(StoreError::LostClaim(l)) if l == id),
                "result {i}: {answer:?}"
            );
            continue;
        }
        let row = answer
            .as_ref()
            .unwrap_or_else(|e| panic!("result {i}: {e}"));
        assert_eq!(&row.id, id);
        assert_eq!(
            row,
            &store.delivery(id).await.unwrap(),
            "result {i} as stored"
        );
        let want = match c.transition {
            Transition::Delivered => DeliveryState::Delivered,
            Transition::Retry { .. } => DeliveryState::Pending,
            _ => DeliveryState::Failed,
        };
        assert_eq!(row.state(), Some(want), "result {i}");
        let attempts = store.attempts_of_delivery(id).await.unwrap();
        assert_eq!(attempts.len(), 1, "result {i}: one attempt");
        assert_eq!(
            attempts[0].response_body, c.record.response_body,
            "result {i}"
        );
    }
    let untouched = store.delivery(&lost).await.unwrap();
    assert_eq!(untouched.state(), Some(DeliveryState::InFlight));
    assert!(store.attempts_of_delivery(&lost).await.unwrap().is_empty());
    let roomy = store.endpoint_by_id(&roomy.id).await.unwrap();
    assert_eq!(
        roomy.last_success_at,
        Some(later.millis()),
        "its successes mark it healthy"
    );

    // A success whose claim was lost marks nothing.
    let acc = store.create_account("beta", now).await.unwrap();
    let mut other = new_endpoint(&acc.id, "https://b.example/", &["other"]);
    other.max_in_flight = 1;
    let other = store.create_endpoint(other, now).await.unwrap();
    store
        .insert_events(&[to_ingest(event(&acc.id, "o", "other"), now)])
        .await
        .unwrap()
        .pop()
        .unwrap()
        .unwrap();
    let claimed = claim_for_five_minutes(&store, now, 1).await;
    assert_eq!(endpoints_of(&claimed), [other.id.as_str()]);
    let mut success = result(&stale(&claimed[0]), 0);
    success.transition = Transition::Delivered;
    let answers = store.complete_attempts(&[success]).await.unwrap();
    assert!(matches!(answers[0], Err(StoreError::LostClaim(_))));
    let other = store.endpoint_by_id(&other.id).await.unwrap();
    assert_eq!(other.last_success_at, None, "a lost claim's success");
}

/// The schema keeps what a state says of the lease and the finish time
/// (on Postgres, each partition keeps its own: migration 0036), so a bug
/// that writes a contradiction fails where it writes it.
async fn a_delivery_that_contradicts_its_state_is_refused(store: Store) {
    let clock = TestClock::starting_now();
    let acc = acme_with_an_endpoint(&store, clock.now(), &[]).await;
    let inserted = store
        .insert_event(
            event(&acc.id, "e", "t"),
            clock.now(),
            clock.now().plus(WINDOW),
        )
        .await
        .unwrap();
    let id = &inserted.deliveries[0].id;
    let update = |set: &str| format!("UPDATE deliveries SET {set} WHERE id = '{id}'");
    for (contradiction, set) in [
        ("a pending delivery with a lease", "lease_until = 5"),
        ("a pending delivery with a finish time", "finished_at = 5"),
        (
            "a delivery in flight without a lease",
            "state = 'in_flight'",
        ),
        (
            "a delivery in flight with a finish time",
            "state = 'in_flight', lease_until = 5, finished_at = 5",
        ),
        (
            "a finished delivery without a finish time",
            "state = 'delivered'",
        ),
        (
            "a finished delivery with a lease",
            "state = 'failed', finished_at = 5, lease_until = 5",
        ),
        ("a state there is none of", "state = 'lost'"),
    ] {
        let written = store.execute_script(&update(set)).await;
        let refused = written.expect_err(&format!("{contradiction} was stored"));
        // Refused by the schema's rules, not for some other fault.
        let why = refused.to_string();
        assert!(
            why.contains("constraint") || why.contains("partition"),
            "{contradiction}: {why}"
        );
    }
    let untouched = store.delivery(id).await.unwrap();
    assert_eq!(
        untouched, inserted.deliveries[0],
        "a refused write changed nothing"
    );

    // What agrees with its state is stored, by the same statements.
    for set in [
        "state = 'in_flight', lease_until = 5",
        "state = 'expired', lease_until = NULL, finished_at = 6",
    ] {
        store.execute_script(&update(set)).await.unwrap();
    }
    let finished = store.delivery(id).await.unwrap();
    assert_eq!(
        (finished.state, finished.lease_until, finished.finished_at),
        (DeliveryState::Expired, None, Some(6))
    );
}

async fn expired_leases_are_rescued_without_counting_an_attempt(store: Store) {
    let clock = TestClock::starting_now();
    let acc = acme_with_an_endpoint(&store, clock.now(), &[]).await;
    for id in ["crashed", "released"] {
        store
            .insert_event(
                event(&acc.id, id, "t"),
                clock.now(),
                clock.now().plus(WINDOW),
            )
            .await
            .unwrap();
    }
    let claimed = store
        .claim_due(
            clock.now(),
            clock.now().plus(Duration::from_secs(300)),
            10,
            dakghar::store::ClaimRules::default(),
        )
        .await
        .unwrap();
    let crashed = claimed.iter().find(|d| d.event_id == "crashed").unwrap();
    let released = claimed.iter().find(|d| d.event_id == "released").unwrap();

    // A worker fault hands the delivery back as it was.
    store.release_claim(released, clock.now()).await.unwrap();
    let back = store.delivery(&released.id).await.unwrap();
    assert_eq!(back.state(), Some(DeliveryState::Pending));
    assert_eq!(
        (back.attempts, back.next_attempt_at),
        (0, released.next_attempt_at)
    );

    // The crashed worker's lease is honoured until it runs out.
    assert_eq!(store.rescue_expired_leases(clock.now()).await.unwrap(), 0);
    clock.advance(Duration::from_secs(301));
    assert_eq!(store.rescue_expired_leases(clock.now()).await.unwrap(), 1);
    let rescued = store.delivery(&crashed.id).await.unwrap();
    assert_eq!(rescued.state(), Some(DeliveryState::Pending));
    assert_eq!((rescued.attempts, rescued.attempt_seq), (0, 0));
    assert!(store
        .attempts_of_delivery(&crashed.id)
        .await
        .unwrap()
        .is_empty());

    // The crashed worker cannot finish what was taken from it.
    let late = store
        .complete_attempt(
            crashed,
            &record(1, Some(200)),
            Transition::Delivered,
            clock.now(),
        )
        .await;
    assert!(matches!(late, Err(StoreError::LostClaim(_))));
}

/// An account with endpoint `a` (every type) and `b` (type `two` only),
/// and events `e0`, `e1`, … of `types`, a second apart unless the same
/// index is in `same_ms_as_previous`.
async fn two_endpoints_and_events(
    store: &Store,
    types: &[&str],
    same_ms_as_previous: &[usize],
) -> (
    dakghar::store::Account,
    dakghar::store::Endpoint,
    dakghar::store::Endpoint,
) {
    let clock = TestClock::at(Timestamp(1_700_000_000_000));
    let acc = store.create_account("acme", clock.now()).await.unwrap();
    let a = store
        .create_endpoint(
            new_endpoint(&acc.id, "https://a.example/", &[]),
            clock.now(),
        )
        .await
        .unwrap();
    let b = store
        .create_endpoint(
            new_endpoint(&acc.id, "https://b.example/", &["two"]),
            clock.now(),
        )
        .await
        .unwrap();
    for (i, ty) in types.iter().enumerate() {
        if !same_ms_as_previous.contains(&i) {
            clock.advance(Duration::from_secs(1));
        }
        store
            .insert_event(
                event(&acc.id, &format!("e{i}"), ty),
                clock.now(),
                clock.now().plus(WINDOW),
            )
            .await
            .unwrap();
    }
    (acc, a, b)
}

async fn event_pages_carry_their_own_deliveries_and_continue_by_cursor(store: Store) {
    let (acc, a, b) =
        two_endpoints_and_events(&store, &["one", "two", "one", "two", "one"], &[]).await;

    let mut seen = Vec::new();
    let mut filter = dakghar::store::EventFilter::default();
    loop {
        let page = store.list_events(&acc.id, &filter, 2).await.unwrap();
        for (ev, ds) in &page.events {
            let targets = endpoints_of(ds);
            let mut expected = vec![a.id.clone()];
            if ev.event_type == "two" {
                expected.push(b.id.clone());
                expected.sort();
            }
            assert_eq!(
                targets, expected,
                "{} carries exactly its own deliveries",
                ev.id
            );
            assert!(ds.iter().all(|d| d.event_id == ev.id));
            seen.push(ev.id.clone());
        }
        match page.next {
            Some(after) => filter.after = Some(after),
            None => break,
        }
    }
    assert_eq!(
        seen,
        vec!["e4", "e3", "e2", "e1", "e0"],
        "newest first, each once"
    );

    let only_b = dakghar::store::EventFilter {
        endpoint_id: Some(b.id.clone()),
        ..Default::default()
    };
    let page = store.list_events(&acc.id, &only_b, 10).await.unwrap();
    let ids: Vec<_> = page.events.iter().map(|(e, _)| e.id.as_str()).collect();
    assert_eq!(ids, vec!["e3", "e1"]);
}

/// Every page of `filter`, two at a time, as event ids.
async fn all_pages(
    store: &Store,
    account_id: &str,
    mut filter: dakghar::store::EventFilter,
) -> Vec<String> {
    let mut ids = Vec::new();
    loop {
        let page = store.list_events(account_id, &filter, 2).await.unwrap();
        ids.extend(page.events.iter().map(|(e, _)| e.id.clone()));
        match page.next {
            Some(next) => filter.after = Some(next),
            None => return ids,
        }
    }
}

/// The list has three query forms (by events; by deliveries in a state; by
/// an endpoint's deliveries); each must page newest first through the same
/// cursor, and an event with several deliveries in the state shows once.
async fn each_filter_form_lists_an_event_once_and_pages_in_order(store: Store) {
    use dakghar::store::EventFilter;
    // e1 and e2 share a millisecond, so the id breaks the tie.
    let (acc, a, b) =
        two_endpoints_and_events(&store, &["one", "two", "two", "one", "two"], &[2]).await;
    let newest_first = |ids: &[&str]| ids.iter().map(|s| s.to_string()).collect::<Vec<_>>();

    let everything = all_pages(&store, &acc.id, EventFilter::default()).await;
    assert_eq!(everything, newest_first(&["e4", "e3", "e2", "e1", "e0"]));

    // Every delivery is pending; events of type two have two pending ones.
    let pending = EventFilter {
        state: Some("pending".into()),
        ..EventFilter::default()
    };
    assert_eq!(
        all_pages(&store, &acc.id, pending.clone()).await,
        everything
    );
    let failed = EventFilter {
        state: Some("failed".into()),
        ..EventFilter::default()
    };
    assert!(all_pages(&store, &acc.id, failed).await.is_empty());

    let to_b = EventFilter {
        endpoint_id: Some(b.id.clone()),
        ..EventFilter::default()
    };
    assert_eq!(
        all_pages(&store, &acc.id, to_b).await,
        newest_first(&["e4", "e2", "e1"])
    );
    let pending_to_a_of_type_two = EventFilter {
        endpoint_id: Some(a.id.clone()),
        event_type: Some("two".into()),
        ..pending
    };
    assert_eq!(
        all_pages(&store, &acc.id, pending_to_a_of_type_two).await,
        newest_first(&["e4", "e2", "e1"])
    );
    let someone_elses = EventFilter {
        endpoint_id: Some("ep_not_ours".into()),
        ..EventFilter::default()
    };
    assert!(all_pages(&store, &acc.id, someone_elses).await.is_empty());
}

/// The list probes only the newest thousand events of a type for a
/// delivery filter, then walks the filter's deliveries: the answers of
/// older events are found all the same, in order, on every page.
async fn a_type_with_more_events_than_the_list_probes_still_finds_its_older_answers(store: Store) {
    use dakghar::store::{AnswerFilter, EventFilter};
    let (acc, a, b) =
        two_endpoints_and_events(&store, &["one", "two", "one", "two", "one"], &[]).await;
    let now = Timestamp(1_700_000_100_000);
    for d in claim_for_five_minutes(&store, now, 100).await {
        let (answer, to) = match (d.event_id.as_str(), d.endpoint_id == a.id) {
            ("e1", false) => (
                record(1, Some(429)),
                Transition::Retry {
                    next_attempt_at: now.plus(Duration::from_secs(600)),
                },
            ),
            ("e3", true) => (record(1, Some(404)), Transition::Failed),
            _ => {
                store.release_claim(&d, now).await.unwrap();
                continue;
            }
        };
        store.complete_attempt(&d, &answer, to, now).await.unwrap();
    }
    // A thousand newer events of the same type, none with a delivery.
    let payload = match store.backend() {
        Backend::Sqlite => "CAST('{}' AS BLOB)",
        Backend::Postgres => "convert_to('{}', 'UTF8')",
    };
    store
        .execute_script(&format!(
            "WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < 1000) \
             INSERT INTO events (account_id, id, event_type, payload, created_at) \
             SELECT '{}', 'evt_newer_' || n, 'two', {payload}, 1700000010000 + n FROM s",
            acc.id
        ))
        .await
        .unwrap();
    let two = |f: EventFilter| EventFilter {
        event_type: Some("two".into()),
        ..f
    };
    let answer = |x| EventFilter {
        answer: Some(x),
        ..EventFilter::default()
    };
    let page = |f: EventFilter| {
        let store = store.clone();
        let acc = acc.id.clone();
        async move { all_pages(&store, &acc, f).await }
    };
    assert_eq!(
        page(two(answer(AnswerFilter::Class(4)))).await,
        ids(&["e3", "e1"])
    );
    assert_eq!(
        page(two(answer(AnswerFilter::Status(429)))).await,
        ids(&["e1"])
    );
    let failed = EventFilter {
        state: Some("failed".into()),
        ..EventFilter::default()
    };
    assert_eq!(page(two(failed.clone())).await, ids(&["e3"]));
    let to_b = EventFilter {
        endpoint_id: Some(b.id.clone()),
        ..answer(AnswerFilter::Class(4))
    };
    assert_eq!(page(two(to_b)).await, ids(&["e1"]));
    assert!(page(two(answer(AnswerFilter::Class(5)))).await.is_empty());
    // A page at a time, on and back, past the events probed.
    let class_4 = two(answer(AnswerFilter::Class(4)));
    let one = |f: EventFilter| {
        let store = store.clone();
        let acc = acc.id.clone();
        async move { store.list_events(&acc, &f, 1).await.unwrap() }
    };
    let first = one(class_4.clone()).await;
    assert_eq!(first.events[0].0.id, "e3");
    let second = one(EventFilter {
        after: first.next.clone(),
        ..class_4.clone()
    })
    .await;
    assert_eq!(second.events[0].0.id, "e1");
    assert!(second.next.is_none());
    let back = one(EventFilter {
        before: second.prev.clone(),
        ..class_4
    })
    .await;
    assert_eq!(back.events[0].0.id, "e3");
}

/// The debugger's filters: the last answer (exact, class, timeout), the
/// delivery filters holding for one and the same delivery, type alone,
/// an exact id, a time window, and the types the account has sent.
async fn the_list_filters_by_last_answer_type_id_and_time(store: Store) {
    use dakghar::store::{AnswerFilter, EventFilter};
    let (acc, a, b) =
        two_endpoints_and_events(&store, &["one", "two", "one", "two", "one"], &[]).await;
    let now = Timestamp(1_700_000_100_000);
    let claimed = claim_for_five_minutes(&store, now, 100).await;
    assert_eq!(claimed.len(), 7);
    let later = Transition::Retry {
        next_attempt_at: now.plus(Duration::from_secs(600)),
    };
    let timed_out = AttemptRecord {
        error: Some("timed out: operation timed out".into()),
        ..record(1, None)
    };
    // What each delivery's one attempt answered; e4 to a is never tried.
    for d in &claimed {
        let (answer, to) = match (d.event_id.as_str(), d.endpoint_id == a.id) {
            ("e0", true) => (record(1, Some(500)), later),
            ("e1", true) => (record(1, Some(200)), Transition::Delivered),
            ("e1", false) => (record(1, Some(429)), later),
            ("e2", true) => (timed_out.clone(), later),
            ("e3", true) => (record(1, Some(404)), Transition::Failed),
            ("e3", false) => (record(1, Some(200)), Transition::Delivered),
            _ => {
                store.release_claim(d, now).await.unwrap();
                continue;
            }
        };
        store.complete_attempt(d, &answer, to, now).await.unwrap();
    }
    let list = |f: EventFilter| {
        let store = store.clone();
        let acc = acc.id.clone();
        async move { all_pages(&store, &acc, f).await }
    };
    let answer = |x| EventFilter {
        answer: Some(x),
        ..EventFilter::default()
    };
    assert_eq!(list(answer(AnswerFilter::Status(500))).await, ids(&["e0"]));
    assert_eq!(list(answer(AnswerFilter::Class(5))).await, ids(&["e0"]));
    assert_eq!(
        list(answer(AnswerFilter::Class(4))).await,
        ids(&["e3", "e1"])
    );
    assert_eq!(list(answer(AnswerFilter::Status(429))).await, ids(&["e1"]));
    assert_eq!(list(answer(AnswerFilter::Timeout)).await, ids(&["e2"]));
    assert_eq!(
        list(answer(AnswerFilter::Status(200))).await,
        ids(&["e3", "e1"])
    );
    assert!(list(answer(AnswerFilter::Status(503))).await.is_empty());
    assert!(list(answer(AnswerFilter::Class(3))).await.is_empty());

    // Every delivery filter holds for the same delivery.
    let on = |endpoint: &str, f: EventFilter| EventFilter {
        endpoint_id: Some(endpoint.to_string()),
        ..f
    };
    assert!(list(on(&a.id, answer(AnswerFilter::Status(429))))
        .await
        .is_empty());
    assert_eq!(
        list(on(&b.id, answer(AnswerFilter::Status(429)))).await,
        ids(&["e1"])
    );
    assert_eq!(
        list(on(&b.id, answer(AnswerFilter::Status(200)))).await,
        ids(&["e3"])
    );
    let failed = EventFilter {
        state: Some("failed".into()),
        ..EventFilter::default()
    };
    assert_eq!(list(failed.clone()).await, ids(&["e3"]));
    assert_eq!(list(on(&a.id, failed.clone())).await, ids(&["e3"]));
    assert!(
        list(on(&b.id, failed)).await.is_empty(),
        "e3 failed at a, not at b"
    );
    let retrying_5xx = EventFilter {
        state: Some("pending".into()),
        ..answer(AnswerFilter::Class(5))
    };
    assert_eq!(list(retrying_5xx).await, ids(&["e0"]));

    // Type alone, exact ids, and ids with a filter they do not meet.
    let of_type = |t: &str| EventFilter {
        event_type: Some(t.into()),
        ..EventFilter::default()
    };
    assert_eq!(list(of_type("two")).await, ids(&["e3", "e1"]));
    assert!(list(of_type("three")).await.is_empty());
    let by_id = |id: &str, f: EventFilter| EventFilter {
        id: Some(id.into()),
        ..f
    };
    assert_eq!(
        list(by_id("e2", EventFilter::default())).await,
        ids(&["e2"])
    );
    assert!(list(by_id("nope", EventFilter::default())).await.is_empty());
    assert_eq!(
        list(by_id("e2", answer(AnswerFilter::Timeout))).await,
        ids(&["e2"])
    );
    assert!(list(by_id("e2", answer(AnswerFilter::Class(4))))
        .await
        .is_empty());
    assert!(list(by_id("e2", of_type("two"))).await.is_empty());

    // A last answer with a type: each event's own deliveries, probed.
    let typed = |t: &str, f: EventFilter| EventFilter {
        event_type: Some(t.into()),
        ..f
    };
    assert_eq!(
        list(typed("two", answer(AnswerFilter::Class(4)))).await,
        ids(&["e3", "e1"])
    );
    assert!(list(typed("one", answer(AnswerFilter::Class(4))))
        .await
        .is_empty());
    assert_eq!(
        list(typed("one", answer(AnswerFilter::Timeout))).await,
        ids(&["e2"])
    );
    assert_eq!(
        list(typed("two", answer(AnswerFilter::Status(200)))).await,
        ids(&["e3", "e1"])
    );
    assert!(list(typed("two", answer(AnswerFilter::Class(5))))
        .await
        .is_empty());

    // A window of time: e0 to e4 were made at +1 s to +5 s.
    let start = 1_700_000_000_000;
    let window = EventFilter {
        since: Some(Timestamp(start + 3_000)),
        until: Some(Timestamp(start + 5_000)),
        ..EventFilter::default()
    };
    assert_eq!(list(window.clone()).await, ids(&["e3", "e2"]));
    assert_eq!(
        list(EventFilter {
            answer: Some(AnswerFilter::Class(4)),
            ..window
        })
        .await,
        ids(&["e3"])
    );

    // Paging back from the oldest page by `prev` gives every page again,
    // the same rows in the same order, none twice.
    for f in [
        EventFilter::default(),
        answer(AnswerFilter::Class(4)),
        of_type("one"),
    ] {
        let mut forward = Vec::new();
        let mut g = f.clone();
        loop {
            let page = store.list_events(&acc.id, &g, 2).await.unwrap();
            forward.push(
                page.events
                    .iter()
                    .map(|(e, _)| e.id.clone())
                    .collect::<Vec<_>>(),
            );
            match page.next {
                Some(n) => g.after = Some(n),
                None => break,
            }
        }
        let mut back = vec![forward.last().unwrap().clone()];
        let mut g = f.clone();
        g.after = None;
        // The last page's newest row is where paging back starts.
        let last_first = forward.last().unwrap()[0].clone();
        let first_row = store.event(&acc.id, &last_first).await.unwrap();
        g.before = Some((first_row.created_at, first_row.id));
        loop {
            let page = store.list_events(&acc.id, &g, 2).await.unwrap();
            back.push(
                page.events
                    .iter()
                    .map(|(e, _)| e.id.clone())
                    .collect::<Vec<_>>(),
            );
            match page.prev {
                Some(p) => g.before = Some(p),
                None => break,
            }
        }
        back.reverse();
        if forward.len() > 1 {
            assert_eq!(back, forward, "{f:?}");
        }
    }

    assert_eq!(
        store.event_types(&acc.id, 10).await.unwrap(),
        ["one", "two"]
    );
    assert_eq!(store.event_types(&acc.id, 1).await.unwrap(), ["one"]);
    assert!(store
        .event_types("acc_nobody", 10)
        .await
        .unwrap()
        .is_empty());
}

/// A state holds with a type or an endpoint for one and the same delivery,
/// in flight as much as any other (a state with a type probes each
/// event's own deliveries); the installation overview counts what is in
/// flight as queued, each account its own.
async fn each_state_combines_with_a_type_and_in_flight_work_counts_as_queued(store: Store) {
    use dakghar::store::EventFilter;
    // e1 (two) and e2 (two) share a millisecond; "two" goes to a and b.
    let (acc, a, b) =
        two_endpoints_and_events(&store, &["one", "two", "two", "one", "two"], &[2]).await;
    let now = Timestamp(1_700_000_100_000);
    let beta = store.create_account("beta", now).await.unwrap();
    add_endpoint(&store, &beta.id, "https://c.example/", &[], now).await;
    store
        .insert_event(event(&beta.id, "b0", "one"), now, now.plus(WINDOW))
        .await
        .unwrap();
    let claimed = claim_for_five_minutes(&store, now, 100).await;
    assert_eq!(claimed.len(), 9);
    // Left in flight: e1 at b, e2 at a, e4 at a and at b, and b0.
    for d in &claimed {
        match (d.event_id.as_str(), d.endpoint_id == a.id) {
            ("e0", _) | ("e3", _) => {
                store
                    .complete_attempt(d, &record(1, Some(200)), Transition::Delivered, now)
                    .await
                    .unwrap();
            }
            ("e1", true) => {
                store
                    .complete_attempt(d, &record(1, Some(400)), Transition::Failed, now)
                    .await
                    .unwrap();
            }
            ("e2", false) => store.release_claim(d, now).await.unwrap(),
            _ => {}
        }
    }
    let list = |state: &str, event_type: Option<&str>, endpoint: Option<&str>| {
        let filter = EventFilter {
            state: Some(state.into()),
            event_type: event_type.map(Into::into),
            endpoint_id: endpoint.map(Into::into),
            ..EventFilter::default()
        };
        let store = store.clone();
        let acc = acc.id.clone();
        async move { all_pages(&store, &acc, filter).await }
    };
    assert_eq!(
        list("in_flight", None, None).await,
        ids(&["e4", "e2", "e1"]),
        "newest first, e4 once for its two, not beta's b0"
    );
    assert_eq!(
        list("in_flight", Some("two"), None).await,
        ids(&["e4", "e2", "e1"])
    );
    assert!(list("in_flight", Some("one"), None).await.is_empty());
    assert_eq!(
        list("in_flight", None, Some(&b.id)).await,
        ids(&["e4", "e1"])
    );
    assert_eq!(list("failed", Some("two"), None).await, ids(&["e1"]));
    assert!(list("failed", Some("one"), None).await.is_empty());
    assert_eq!(
        list("delivered", Some("one"), None).await,
        ids(&["e3", "e0"])
    );
    assert!(list("delivered", Some("two"), None).await.is_empty());
    assert_eq!(list("pending", None, None).await, ids(&["e2"]));
    assert_eq!(
        list("pending", Some("two"), Some(&b.id)).await,
        ids(&["e2"])
    );
    assert!(list("pending", None, Some(&a.id)).await.is_empty());

    let overview = store.accounts_overview().await.unwrap();
    let of = |id: &str| {
        let o = overview.iter().find(|o| o.id == id).unwrap();
        (o.queued, o.dead_letters)
    };
    assert_eq!(
        of(&acc.id),
        (5, 1),
        "four in flight and one pending; e1 at a"
    );
    assert_eq!(of(&beta.id), (1, 0), "b0 in flight");
}

/// A Postgres claim sends each endpoint's row along once, however many of
/// its deliveries it took (the rest of its rows carry none), and every
/// delivery's event.
#[tokio::test]
#[cfg_attr(not(test_postgres), ignore = "TEST_DATABASE_URL is not set")]
async fn a_claim_sends_each_endpoint_along_once() {
    let db = crate::helpers::TestDb::postgres().await;
    let store = &db.store;
    let now = TestClock::starting_now().now();
    let acc = store.create_account("acme", now).await.unwrap();
    for host in ["a", "b"] {
        let url = format!("https://{host}.example/");
        add_endpoint(store, &acc.id, &url, &[], now).await;
    }
    for i in 0..3 {
        store
            .insert_event(event(&acc.id, &format!("e{i}"), "t"), now, now.plus(WINDOW))
            .await
            .unwrap();
    }
    let (at, lease) = (now.millis(), now.plus(Duration::from_secs(300)).millis());
    store
        .execute_script(&format!(
            "DO $$ DECLARE n BIGINT; e BIGINT; ev BIGINT; BEGIN \
               SELECT count(*), count(endpoint), count((event).id) INTO n, e, ev \
               FROM dakghar_claim_with_inputs({at}, {lease}, 100, 'test.claim', 0, 0); \
               IF n <> 6 OR e <> 2 OR ev <> 6 THEN \
                 RAISE EXCEPTION '% rows, % endpoint copies, % events', n, e, ev; \
               END IF; \
             END $$"
        ))
        .await
        .expect("six deliveries, two endpoint copies, six events");
    db.finish().await;
}

/// An account with one endpoint and one event, its delivery claimed at
/// `now`.
async fn one_claimed_delivery(store: &Store, now: Timestamp) -> (Account, Delivery) {
    let acc = store.create_account("acme", now).await.unwrap();
    add_endpoint(store, &acc.id, "https://a.example/", &[], now).await;
    store
        .insert_event(event(&acc.id, "e1", "t"), now, now.plus(WINDOW))
        .await
        .unwrap();
    let lease = now.plus(Duration::from_secs(300));
    let mut claimed = store
        .claim_due(now, lease, 10, dakghar::store::ClaimRules::default())
        .await
        .unwrap();
    assert_eq!(claimed.len(), 1, "the claim took the delivery");
    (acc, claimed.remove(0))
}

/// A claim commits without waiting for the WAL flush (a claim lost to a
/// database crash hands its delivery back, as a lapsed lease does), and
/// that setting ends with the claim: the pooled connection it leaves
/// behind waits for the flush again, as the next ingest on it must.
#[tokio::test]
#[cfg_attr(not(test_postgres), ignore = "TEST_DATABASE_URL is not set")]
async fn a_claim_leaves_its_connection_committing_durably() {
    let db = crate::helpers::TestDb::postgres().await;
    let store = db.postgres_store_of_one_connection().await.unwrap();
    let now = TestClock::starting_now().now();
    one_claimed_delivery(&store, now).await;
    store
        .execute_script(
            "DO $$ BEGIN \
               IF current_setting('synchronous_commit') <> 'on' THEN \
                 RAISE EXCEPTION 'synchronous_commit is %', current_setting('synchronous_commit'); \
               END IF; \
             END $$",
        )
        .await
        .expect("the connection the claim used commits durably again");
    store.close().await;
    db.finish().await;
}

/// Another process holds the SQLite file's write lock and commits while a
/// batch of results waits for it: the batch is written once the lock is
/// free (its transaction must take the lock before it reads anything, or
/// the read's snapshot goes stale under it).
#[tokio::test]
async fn results_wait_out_another_process_writing_the_file() {
    let db = crate::helpers::TestDb::sqlite().await;
    let store = db.store.clone();
    let now = TestClock::starting_now().now();
    let (acc, claimed) = one_claimed_delivery(&store, now).await;

    let mut other = db.another_process_locking("BEGIN IMMEDIATE").await;
    sqlx::query("UPDATE accounts SET name = 'acme, renamed' WHERE id = $1")
        .bind(&acc.id)
        .execute(&mut other)
        .await
        .unwrap();
    let completion = dakghar::store::Completion {
        claimed,
        record: record(1, Some(200)),
        transition: Transition::Delivered,
        now,
    };
    let writing = tokio::spawn({
        let store = store.clone();
        async move { store.complete_attempts(&[completion]).await }
    });
    // Long enough for the batch to reach the lock (it waits up to the
    // busy timeout, 3 s); the commit then lands while it waits.
    tokio::time::sleep(Duration::from_millis(300)).await;
    sqlx::query("COMMIT").execute(&mut other).await.unwrap();
    let answers = writing.await.unwrap().expect("the batch was written");
    let delivered = answers.into_iter().next().unwrap().unwrap();
    assert_eq!(delivered.state(), Some(DeliveryState::Delivered));
    assert_eq!(
        store.deliveries_of_events(&acc.id, &["e1"]).await.unwrap()[0].state(),
        Some(DeliveryState::Delivered)
    );
}

/// A lease whose rows will not decode hands every row it leased back in
/// its own transaction, which commits: the ingest group's events stay
/// written and answered, nothing is left leased under a token no one
/// holds, and a claim that meets the same rows hands them back the same
/// way. Here
/// an older due delivery's `attempts` is text that no `i64` decodes, and
/// the group's lease takes it (one more than the group made).
#[tokio::test]
async fn a_lease_whose_rows_will_not_decode_hands_them_back() {
    let db = crate::helpers::TestDb::sqlite().await;
    let store = db.store.clone();
    let now = TestClock::starting_now().now();
    let acc = acme_with_an_endpoint(&store, now, &[]).await;
    let old = to_ingest(event(&acc.id, "old", "t"), now);
    store.insert_events(&[old]).await.unwrap();
    store
        .execute_script("UPDATE deliveries SET attempts = 'not a number'")
        .await
        .unwrap();
    let (inserted, claim) = ingest_new_leasing(&store, &acc.id, now).await;
    assert!(inserted[0].is_ok(), "the event is answered: {inserted:?}");
    assert!(claim.deliveries.is_empty(), "nothing to attempt");
    assert!(
        store.event(&acc.id, "new").await.is_ok(),
        "the event is stored"
    );
    assert!(
        claim_for_five_minutes(&store, now, 100).await.is_empty(),
        "a claim hands them back too"
    );

    store
        .execute_script("UPDATE deliveries SET attempts = 0")
        .await
        .unwrap();
    for id in ["old", "new"] {
        let rows = store.deliveries_of_event(&acc.id, id).await.unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(
            rows[0].state,
            DeliveryState::Pending,
            "{id} not left leased"
        );
        assert_eq!(rows[0].claim_token, None);
        assert!(
            store
                .attempts_of_delivery(&rows[0].id)
                .await
                .unwrap()
                .is_empty(),
            "{id}: no attempt written"
        );
    }
    let claimed = claim_for_five_minutes(&store, now, 100).await;
    assert_eq!(claimed.len(), 2, "both are claimed once the fault is gone");
    db.finish().await;
}

/// An endpoint row that will not decode (its `failure_streak` text no
/// `i64` decodes) leaves an ingest group's lease as it was: the event is
/// answered and its delivery leased, the endpoint not read along, and
/// the attempts' batch, reading it, says it is broken.
#[tokio::test]
async fn an_ingest_leasing_for_an_endpoint_that_will_not_decode_leaves_it_to_the_batch() {
    let db = crate::helpers::TestDb::sqlite().await;
    let store = db.store.clone();
    let now = TestClock::starting_now().now();
    let acc = acme_with_an_endpoint(&store, now, &[]).await;
    store
        .execute_script("UPDATE endpoints SET failure_streak = 'not a number'")
        .await
        .unwrap();
    let (inserted, claim) = ingest_new_leasing(&store, &acc.id, now).await;
    assert!(inserted[0].is_ok(), "the event is answered: {inserted:?}");
    assert_eq!(claim.deliveries.len(), 1, "leased");
    assert!(claim.read_along.endpoints.is_empty(), "not read along");
    let endpoint_id = claim.deliveries[0].endpoint_id.clone();
    let inputs = store
        .batch_inputs(&claim.deliveries, claim.read_along)
        .await
        .unwrap();
    assert!(
        inputs.broken_endpoints.contains_key(&endpoint_id),
        "{:?}",
        inputs.broken_endpoints
    );
    db.finish().await;
}

/// A claim's rows as a read of them finds them, with an earlier
/// attempt's answer on them (its body once stored as text, which sqlx
/// reads as its bytes).
#[tokio::test]
async fn a_claims_rows_are_as_stored() {
    let db = crate::helpers::TestDb::sqlite().await;
    let store = db.store.clone();
    let now = TestClock::starting_now().now();
    let acc = acme_with_an_endpoint(&store, now, &[]).await;
    for id in ["blob", "text"] {
        store
            .insert_events(&[to_ingest(event(&acc.id, id, "t"), now)])
            .await
            .unwrap();
    }
    store
        .execute_script(
            "UPDATE deliveries SET attempts = 1, attempt_seq = 1, last_status = 500, \
               last_error = 'HTTP 500', \
               last_response = CASE WHEN event_id = 'blob' THEN X'00FF' ELSE 'down' END",
        )
        .await
        .unwrap();
    let claimed = claim_for_five_minutes(&store, now, 100).await;
    assert_eq!(claimed.len(), 2);
    for d in &claimed {
        assert_eq!(d.state, DeliveryState::InFlight);
        assert_eq!(&store.delivery(&d.id).await.unwrap(), d);
        let body = if d.event_id == "blob" {
            &b"\x00\xff"[..]
        } else {
            b"down"
        };
        assert_eq!(d.last_response.as_deref(), Some(body));
        assert_eq!(
            (d.last_status, d.last_error.as_deref()),
            (Some(500), Some("HTTP 500"))
        );
    }
    db.finish().await;
}

/// The same when the rows are met in a round before a claim's last (here
/// two endpoints on one host under a per-host cap, asked in turn): the
/// claim hands back what it leased and commits, instead of failing.
#[tokio::test]
async fn a_claim_whose_first_round_will_not_decode_hands_back_and_commits() {
    let db = crate::helpers::TestDb::sqlite().await;
    let store = db.store.clone();
    let now = TestClock::starting_now().now();
    let acc = store.create_account("acme", now).await.unwrap();
    for url in ["https://a.example/1", "https://a.example/2"] {
        add_endpoint(&store, &acc.id, url, &[], now).await;
    }
    let e = to_ingest(event(&acc.id, "e", "t"), now);
    store.insert_events(&[e]).await.unwrap();
    store
        .execute_script("UPDATE deliveries SET attempts = 'not a number'")
        .await
        .unwrap();
    let rules = dakghar::store::ClaimRules {
        default_rate: 0,
        host_cap: 10,
    };
    let lease_until = now.plus(Duration::from_secs(300));
    let claim = store.claim(now, lease_until, 100, rules).await.unwrap();
    assert!(claim.deliveries.is_empty(), "nothing to attempt");
    store
        .execute_script("UPDATE deliveries SET attempts = 0")
        .await
        .unwrap();
    let rows = store.deliveries_of_event(&acc.id, "e").await.unwrap();
    assert_eq!(rows.len(), 2);
    for row in &rows {
        assert_eq!(row.state, DeliveryState::Pending, "not left leased");
        assert_eq!(row.claim_token, None);
    }
    let claimed = store.claim_due(now, lease_until, 100, rules).await.unwrap();
    assert_eq!(claimed.len(), 2, "both are claimed once the fault is gone");
    db.finish().await;
}
