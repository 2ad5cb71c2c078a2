//! The HTTP face of an instance: the limited routes, `/healthz` and `/metrics`.

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::json;

use crate::decision::Decision;
use crate::headers;
use crate::limiter::Limiter;
use crate::metrics::Metrics;

/// The longest caller key accepted; longer ones are refused rather than stored.
pub const MAX_CALLER_LEN: usize = 256;

const PROBLEM_JSON: &str = "application/problem+json";
/// draft-ietf-httpapi-ratelimit-headers-11's problem type for a refusal by a quota.
const QUOTA_EXCEEDED: &str = "https://iana.org/assignments/http-problem-types#quota-exceeded";
static SOURCE: HeaderName = HeaderName::from_static("failmode-source");
static RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");
static RATELIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");

/// What the handlers share.
#[derive(Debug)]
pub struct App {
    pub limiter: Limiter,
    pub metrics: Arc<Metrics>,
    pub caller_header: HeaderName,
    pub instance_id: String,
}

pub fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics))
        .fallback(limited)
        .with_state(app)
}

/// Never touches Redis: an instance whose store is down is degraded, not dead.
async fn healthz(State(app): State<Arc<App>>) -> Response {
    let body = json!({
        "status": "ok",
        "instance": app.instance_id,
        "breaker": app.limiter.breaker_state().as_gauge(),
        "live_instances": app.limiter.live_instances(),
    });
    json_response(StatusCode::OK, "application/json", &body)
}

async fn metrics(State(app): State<Arc<App>>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        app.metrics.encode(),
    )
        .into_response()
}

fn json_response(
    status: StatusCode,
    content_type: &'static str,
    body: &serde_json::Value,
) -> Response {
    let mut response = Response::new(Body::from(body.to_string()));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

fn problem(status: StatusCode, title: &str, detail: String) -> Response {
    json_response(
        status,
        PROBLEM_JSON,
        &json!({ "type": "about:blank", "title": title, "status": status.as_u16(), "detail": detail }),
    )
}

fn header_value(s: &str) -> HeaderValue {
    HeaderValue::from_str(s).unwrap_or_else(|_| HeaderValue::from_static("\"invalid\""))
}

/// The caller key of a request, or why there is none: each refusal says what is wrong with
/// the header, since "missing" for a key that is there sends its owner looking elsewhere.
fn caller_key<'h>(
    name: &HeaderName,
    headers: &'h HeaderMap,
) -> Result<&'h str, (&'static str, String)> {
    let Some(value) = headers.get(name) else {
        return Err((
            "Missing caller key",
            format!(
                "requests must name their caller in a {name} header; this limiter never falls \
                 back to the client address"
            ),
        ));
    };
    let Ok(caller) = value.to_str() else {
        return Err((
            "Caller key not visible ASCII",
            format!(
                "the {name} header holds bytes outside visible ASCII (UTF-8 text or control \
                 characters); percent-encode the key"
            ),
        ));
    };
    if caller.is_empty() {
        return Err((
            "Empty caller key",
            format!("the {name} header is empty; it must name the caller"),
        ));
    }
    if caller.len() > MAX_CALLER_LEN {
        return Err((
            "Caller key too long",
            format!(
                "the {name} header is {} bytes; at most {MAX_CALLER_LEN} are accepted",
                caller.len()
            ),
        ));
    }
    Ok(caller)
}

async fn limited(State(app): State<Arc<App>>, uri: Uri, headers: HeaderMap) -> Response {
    let Some(index) = app.limiter.route_index(uri.path()) else {
        return problem(
            StatusCode::NOT_FOUND,
            "No such route",
            format!("{} is not a route of this limiter", uri.path()),
        );
    };
    let caller = match caller_key(&app.caller_header, &headers) {
        Ok(caller) => caller,
        Err((title, detail)) => return problem(StatusCode::BAD_REQUEST, title, detail),
    };
    let decision = app.limiter.decide(index, caller).await;
    let route = app.limiter.route(index);
    let policy_header = header_value(&headers::policy(&route.name, route.limit, route.window));
    let source = HeaderValue::from_static(decision.source().label());
    let mut response = match decision {
        Decision::Admitted {
            source,
            remaining,
            more_in,
        } => {
            let mut r = json_response(
                StatusCode::OK,
                "application/json",
                &json!({ "admitted": true, "caller": caller, "route": route.name, "instance": app.instance_id, "source": source.label() }),
            );
            if let Some(remaining) = remaining {
                r.headers_mut().insert(&RATELIMIT_POLICY, policy_header);
                r.headers_mut().insert(
                    &RATELIMIT,
                    header_value(&headers::ratelimit(&route.name, remaining, more_in)),
                );
            }
            r
        }
        Decision::Limited {
            source,
            retry_after,
        } => {
            let seconds = headers::whole_seconds(retry_after);
            let mut r = json_response(
                StatusCode::TOO_MANY_REQUESTS,
                PROBLEM_JSON,
                &json!({
                    "type": QUOTA_EXCEEDED,
                    "title": "Request cannot be satisfied as assigned quota has been exceeded",
                    "status": 429,
                    "violated-policies": [route.name],
                    "policy": route.name,
                    "failure_policy": route.policy.name(),
                    "source": source.label(),
                    "retry_after_seconds": seconds,
                }),
            );
            let h = r.headers_mut();
            h.insert(&RATELIMIT_POLICY, policy_header);
            h.insert(
                &RATELIMIT,
                header_value(&headers::ratelimit(&route.name, 0, retry_after)),
            );
            h.insert(header::RETRY_AFTER, HeaderValue::from(seconds));
            r
        }
        Decision::Unavailable {
            status,
            retry_after,
        } => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let mut r = json_response(
                status,
                PROBLEM_JSON,
                &json!({
                    "type": "about:blank",
                    "title": "Rate limiter unavailable",
                    "status": status.as_u16(),
                    "detail": "the rate limit store is unavailable and this route fails closed",
                    "policy": route.name,
                    "failure_policy": route.policy.name(),
                }),
            );
            if let Some(after) = retry_after {
                r.headers_mut().insert(
                    header::RETRY_AFTER,
                    HeaderValue::from(headers::whole_seconds(after)),
                );
            }
            r
        }
    };
    response.headers_mut().insert(&SOURCE, source);
    response
}
