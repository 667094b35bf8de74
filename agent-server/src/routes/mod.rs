//! The routes of the API and how they are put together: each handler carries its
//! OpenAPI description (`utoipa::path`), and the router is built from those
//! descriptions, so a route cannot exist without being documented.

mod agents;
mod body;
mod decisions;
mod events;
mod health;
mod messages;
mod metrics;
mod sessions;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::StatusCode;
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::timeout::TimeoutLayer;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::auth::require_token;
use crate::limits::{MAX_BODY, refuse_oversized};
use crate::state::ServerState;
use crate::uniform::uniform_errors;

pub use self::body::JsonBody;

/// The longest a request may take to be answered (a stream's headers included,
/// not its events).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);

#[derive(OpenApi)]
#[openapi(
    info(
        title = "agent",
        description = "The HTTP API of the agent runtime: create sessions, follow their events live, decide waiting calls. Every route but /healthz needs `Authorization: Bearer TOKEN`."
    ),
    modifiers(&BearerAuth),
    security(("bearer" = []))
)]
struct ApiDoc;

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// The documented routes, and the document.
fn documented() -> (Router<ServerState>, utoipa::openapi::OpenApi) {
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .routes(routes!(sessions::create, sessions::list))
        .routes(routes!(sessions::get))
        .routes(routes!(agents::list))
        .routes(routes!(agents::get))
        .routes(routes!(events::events))
        .routes(routes!(decisions::approve))
        .routes(routes!(decisions::deny))
        .routes(routes!(decisions::cancel))
        .routes(routes!(decisions::pause))
        .routes(routes!(decisions::resume))
        .routes(routes!(decisions::fork))
        .routes(routes!(messages::send))
        .routes(routes!(metrics::metrics))
        .routes(routes!(health::healthz))
        .routes(routes!(openapi_json))
        .split_for_parts()
}

/// The OpenAPI 3.1 document of the API, generated from the handlers.
pub fn openapi() -> utoipa::openapi::OpenApi {
    documented().1
}

/// The API as an axum router, ready to serve or to mount in an application of
/// your own: every route, the web page at `/`, bearer-token auth (all but
/// `/healthz` and the page's files), the 1 MiB body
/// limit, the request timeout, and errors in one JSON shape.
pub fn router(state: ServerState) -> Router {
    let (routes, document) = documented();
    let document = Arc::new(document.to_json().unwrap_or_default());
    let tokens = state.tokens.clone();
    routes
        .merge(crate::ui::routes())
        .layer(axum::Extension(OpenApiDocument(document)))
        .with_state(state)
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .layer(RequestBodyLimitLayer::new(MAX_BODY))
        .layer(axum::middleware::from_fn(refuse_oversized))
        .layer(TimeoutLayer::with_status_code(
            StatusCode::SERVICE_UNAVAILABLE,
            REQUEST_TIMEOUT,
        ))
        .layer(axum::middleware::from_fn_with_state(tokens, require_token))
        .layer(axum::middleware::from_fn(uniform_errors))
}

/// The OpenAPI document served at `/v1/openapi.json`.
#[derive(Clone)]
struct OpenApiDocument(Arc<String>);

/// The OpenAPI 3.1 document of this API.
#[utoipa::path(
    get,
    path = "/v1/openapi.json",
    tag = "meta",
    responses((status = 200, description = "The OpenAPI document", content_type = "application/json"))
)]
async fn openapi_json(
    axum::Extension(OpenApiDocument(document)): axum::Extension<OpenApiDocument>,
) -> impl axum::response::IntoResponse {
    (
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        document.as_ref().clone(),
    )
}
