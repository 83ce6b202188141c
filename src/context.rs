//! The shared context at the bottom of the server: what every request
//! handler, server function and domain action works with. It knows the
//! store, the clock, the configuration and the engine, and nothing above.

use std::sync::Arc;

use axum::extract::FromRef;
use leptos::prelude::LeptosOptions;

use crate::{clock::SharedClock, config::ServeConfig, delivery::engine::Engine, store::Store};

/// The services every request handler and server function shares.
#[derive(Debug)]
pub struct Ctx {
    pub store: Store,
    pub clock: SharedClock,
    pub config: ServeConfig,
    pub engine: Arc<Engine>,
}

#[derive(Clone, FromRef)]
pub struct AppState {
    pub leptos_options: LeptosOptions,
    pub ctx: Arc<Ctx>,
}
