//! Dakghar: webhook delivery in one binary. The server side: storage, the
//! HTTP server, authentication and the command line.
#![forbid(unsafe_code)]

pub mod alerts;
pub mod api;
pub mod auth;
pub mod bootstrap;
pub mod cli;
pub mod clock;
pub mod config;
pub mod context;
pub mod delivery;
pub mod demo;
pub mod endpoint_actions;
pub mod ids;
pub mod mailer;
pub mod metrics;
pub mod replay;
pub mod resend;
pub mod retention;
pub mod sealing;
mod services;
pub mod startup;
pub mod store;
pub mod vacuum;
pub mod web;
