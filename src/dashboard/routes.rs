//! The dashboard's routes: the Leptos pages (with the port and the brand
//! in their context), and the plain form posts beside them (sign in and
//! out, invitations, password resets, portal links), so everything works
//! with JavaScript off.

use std::sync::{Arc, OnceLock};

use app::{model::Brand, port::DashboardRef, shell, App};
use axum::{
    body::Body,
    extract::State,
    http::{Request, StatusCode},
    response::{Redirect, Response},
    routing::{get, post},
    Router,
};
use leptos::prelude::*;
use leptos_axum::{generate_route_list, AxumRouteListing, LeptosRoutes};

use super::{account_links, login, portal, protect, site_files::SiteFiles, Adapter};
use crate::context::AppState;

pub fn routes(
    state: &AppState,
    site: Arc<SiteFiles>,
    api_operations: Vec<(String, String, String)>,
) -> Router<AppState> {
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
            page_routes(),
            move || {
                provide_context(dashboard.clone());
                provide_context(brand.clone());
                protect::set_page_policy();
            },
            move || {
                provide_context(shell_brand.clone());
                shell(LeptosOptions::clone(&options))
            },
        )
        .fallback(move |State(state): State<AppState>, req: Request<Body>| {
            site_file_or_not_found(state, Arc::clone(&site), req)
        })
}

/// The pages' routes, found once per process: finding them renders the app
/// with every resource's loading held back, and that hold is one flag for
/// the whole process, so a page rendering in another server of the same
/// process meanwhile (the tests run many) waited forever on its data.
fn page_routes() -> Vec<AxumRouteListing> {
    static ROUTES: OnceLock<Vec<AxumRouteListing>> = OnceLock::new();
    ROUTES.get_or_init(|| generate_route_list(App)).clone()
}

/// The dashboard's built files, else the app's not-found page.
async fn site_file_or_not_found(
    state: AppState,
    site: Arc<SiteFiles>,
    req: Request<Body>,
) -> Response {
    if let Some(file) = site.respond(req.method(), req.uri().path(), req.headers()) {
        return file;
    }
    let options = state.leptos_options.clone();
    let brand: Brand = state.ctx.config.brand.clone();
    let page = leptos_axum::render_app_to_stream_with_context(
        move || {
            provide_context(state.clone());
            provide_context(brand.clone());
            protect::set_page_policy();
        },
        move || shell(LeptosOptions::clone(&options)),
    );
    let mut response = page(req).await;
    *response.status_mut() = StatusCode::NOT_FOUND;
    response
}
