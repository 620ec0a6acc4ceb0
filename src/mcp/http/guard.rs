//! The guard in front of everything (M1): the bearer token (compared in constant time), the
//! `Origin` of this port's loopback address, and `Host` in every form — missing, empty or
//! malformed is 400, a non-loopback name in the header or an absolute-form target is 403.

use super::*;

#[derive(Clone)]
pub(super) struct Guard {
    pub(super) token: Arc<str>,
    pub(super) origins: Arc<Vec<String>>,
    /// The bound port: a `Host` naming another port is not this server.
    pub(super) port: u16,
}

/// Why the request's authority is not this loopback server, if it is not (DNS rebinding, M1).
/// Both the `Host` header and, in the absolute form (`POST http://evil.example/mcp`), the
/// request target's authority must name a loopback host (`127.0.0.1`, `localhost`, `[::1]`)
/// with no port or `port`. 400: `Host` missing, empty or malformed; 403: a foreign name or
/// port.
pub(super) fn authority_refusal(
    uri: &axum::http::Uri,
    headers: &HeaderMap,
    port: u16,
) -> Option<(StatusCode, String)> {
    let expected = format!("send `Host: 127.0.0.1:{port}` (or localhost, [::1])");
    let own = |authority: &axum::http::uri::Authority| {
        matches!(authority.host(), "127.0.0.1" | "localhost" | "[::1]")
            && authority.port_u16().is_none_or(|p| p == port)
    };
    let mut hosts = headers.get_all(header::HOST).iter();
    let host = match (hosts.next(), hosts.next()) {
        (None, _) => {
            return Some((
                StatusCode::BAD_REQUEST,
                format!("missing Host header: {expected}"),
            ));
        }
        (Some(_), Some(_)) => {
            return Some((
                StatusCode::BAD_REQUEST,
                format!("more than one Host header: {expected}"),
            ));
        }
        (Some(h), None) => h,
    };
    let parsed = host
        .to_str()
        .ok()
        .filter(|h| !h.trim().is_empty())
        .and_then(|h| axum::http::uri::Authority::try_from(h.trim()).ok());
    let Some(authority) = parsed else {
        let shown = String::from_utf8_lossy(host.as_bytes()).into_owned();
        let what = if shown.trim().is_empty() {
            "empty".to_owned()
        } else {
            format!(
                "not a host[:port] (`{}`)",
                crate::display::visible_inline(&shown)
            )
        };
        return Some((
            StatusCode::BAD_REQUEST,
            format!("the Host header is {what}: {expected}"),
        ));
    };
    if !own(&authority) {
        return Some((
            StatusCode::FORBIDDEN,
            format!(
                "Host `{}` is not this loopback server: {expected}",
                crate::display::visible_inline(authority.as_str())
            ),
        ));
    }
    if let Some(target) = uri.authority()
        && (!own(target) || uri.scheme_str().is_some_and(|s| s != "http"))
    {
        return Some((
            StatusCode::FORBIDDEN,
            format!(
                "the request target `{}` names another server: send the origin form \
                 (`POST /mcp`) or `http://127.0.0.1:{port}/mcp`",
                crate::display::visible_inline(&uri.to_string())
            ),
        ));
    }
    None
}

/// Byte comparison whose time does not depend on where the first difference is (`subtle`).
pub(super) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    subtle::ConstantTimeEq::ct_eq(a, b).into()
}

/// Why a request was refused before reaching MCP, if it was: its authority
/// ([`authority_refusal`]), then its `Origin`, then its bearer token.
pub(super) fn refusal(
    guard: &Guard,
    uri: &axum::http::Uri,
    headers: &HeaderMap,
) -> Option<(StatusCode, String)> {
    if let Some(refused) = authority_refusal(uri, headers, guard.port) {
        return Some(refused);
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let ok = origin
            .to_str()
            .is_ok_and(|o| guard.origins.iter().any(|allowed| allowed == o));
        if !ok {
            return Some((
                StatusCode::FORBIDDEN,
                "Origin not allowed: only the loopback origin of this port may call patchdiff"
                    .to_owned(),
            ));
        }
    }
    // RFC 7235: the auth scheme is case-insensitive (`bearer`, `BEARER` are `Bearer`).
    let presented = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim_start().split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, token)| token);
    match presented {
        Some(t) if constant_time_eq(t.trim().as_bytes(), guard.token.as_bytes()) => None,
        Some(_) => Some((StatusCode::UNAUTHORIZED, "wrong bearer token".to_owned())),
        None => Some((
            StatusCode::UNAUTHORIZED,
            "missing bearer token: send `Authorization: Bearer <token>` (the token file the \
             console gave this process)"
                .to_owned(),
        )),
    }
}

pub(super) async fn guard_layer(
    State(guard): State<Guard>,
    request: Request,
    next: Next,
) -> Response {
    match refusal(&guard, request.uri(), request.headers()) {
        None => next.run(request).await,
        Some((status, message)) => {
            let mut response = (status, message).into_response();
            if status == StatusCode::UNAUTHORIZED {
                response
                    .headers_mut()
                    .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            }
            response
        }
    }
}
