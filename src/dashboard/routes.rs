//! The dashboard's routes: the Leptos pages (with the port and the brand
//! in their context), and the plain form posts beside them (sign in and
//! out, invitations, password resets, portal links), so everything works
//! with JavaScript off.

use std::sync::Arc;

use app::{model::Brand, port::DashboardRef, shell, App};
use axum::{
    response::Redirect,
    routing::{get, post},
    Router,
};
use leptos::prelude::*;
use leptos_axum::{generate_route_list, LeptosRoutes};

use super::{account_links, login, portal, protect, Adapter};
use crate::context::AppState;

pub fn routes(state: &AppState, api_operations: Vec<(String, String, String)>) -> Router<AppState> {
    let dashboard: DashboardRef = Arc::new(Adapter::new(Arc::clone(&state.ctx), api_operations));
    let brand: Brand = state.ctx.config.brand.clone();
    let options = state.leptos_options.clone();
    let shell_brand = brand.clone();
    Router::new()
        .route("/", get(|| async { Redirect::to("/events") }))
        .route("/login", post(login::login))
        .route("/logout", post(login::logout))
        .route("/forgot-password", post(account_links::forgot_password))
        .route(
            "/reset-password/{token}",
            post(account_links::reset_password),
        )
        .route(
            "/invitations/{token}",
            post(account_links::accept_invitation),
        )
        .route("/portal/{token}", get(portal::open))
        .leptos_routes_with_context(
            state,
            generate_route_list(App),
            move || {
                provide_context(dashboard.clone());
                provide_context(brand.clone());
                protect::set_page_policy();
            },
            move || {
                provide_context(shell_brand.clone());
                shell(options.clone())
            },
        )
        .fallback(leptos_axum::file_and_error_handler::<AppState, _>(shell))
}
