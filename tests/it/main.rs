//! Behavioural tests against real parts: a real SQLite file, a real Postgres
//! (when TEST_DATABASE_URL is set), the real HTTP server on 127.0.0.1 and the
//! real binary. One test binary keeps link times down.

#[macro_use]
mod helpers;

mod admin_pages;
mod admin_replay;
mod alerts;
mod api_client;
mod api_contract;
mod auth_hardening;
mod bad_input;
mod cli;
mod dashboard_account;
mod dashboard_endpoints;
mod dashboard_events;
mod delivery;
mod demo;
mod egress_proxy;
mod engine;
mod faults;
mod hostile_receivers;
mod internal_faults;
mod layers;
mod login;
mod metrics;
mod openapi;
mod operations;
mod partitions;
mod pg_leases;
mod pg_warm;
mod platforms;
mod quotas;
mod receiver;
mod receiver_respect;
mod retention;
mod roles;
mod secrets_at_rest;
mod serve_logs;
mod served;
mod sign_in_flood;
mod signing;
mod smtp_sink;
mod ssrf;
mod store;
mod tcp_proxy;
mod telemetry;
mod vacuum;
