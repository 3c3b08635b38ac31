//! The HTTP side of `purgatory ctl`: one request per connection to the admin API, the
//! status checked, and the JSON answer read into the type the caller asks for.
//!
//! It is a few lines over a plain `TcpStream` rather than an HTTP client crate: the admin
//! API is small and always answers with a complete body and `Connection: close`.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use anyhow::{bail, Context};
use serde::de::DeserializeOwned;
use serde::Deserialize;

/// Sends one HTTP/1.1 request and returns (status, body).
pub fn http(
    admin: &str,
    method: &str,
    path: &str,
    body: &str,
    token: Option<&str>,
) -> anyhow::Result<(u16, String)> {
    let mut stream = TcpStream::connect(admin)
        .with_context(|| format!("cannot reach the admin API at {admin}"))?;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {admin}\r\nConnection: close\r\n{auth}Content-Type: text/plain\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .context("malformed HTTP response")?;
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse::<u16>().ok())
        .context("malformed HTTP status line")?;
    Ok((status, body.to_string()))
}

/// The body of an admin API error: `{"error": "..."}`.
#[derive(Deserialize)]
struct ErrorBody {
    error: String,
}

/// Sends a request and returns the body of a successful answer. An answer of 400 or more
/// is an error carrying the broker's message (or the whole body, if it has none).
pub fn call(
    admin: &str,
    method: &str,
    path: &str,
    body: &str,
    token: Option<&str>,
) -> anyhow::Result<String> {
    let (status, body) = http(admin, method, path, body, token)?;
    if status >= 400 {
        let message = serde_json::from_str::<ErrorBody>(&body)
            .map(|e| e.error)
            .unwrap_or(body);
        bail!("HTTP {status}: {message}");
    }
    Ok(body)
}

/// [`call`], with the answer read as JSON into `T`. An answer that is not JSON, or lacks a
/// field `T` needs, is an error that names the call; fields `T` does not know are ignored.
pub fn call_json<T: DeserializeOwned>(
    admin: &str,
    method: &str,
    path: &str,
    body: &str,
    token: Option<&str>,
) -> anyhow::Result<T> {
    let answer = call(admin, method, path, body, token)?;
    parse(method, path, &answer)
}

/// Reads the answer to `method path` into `T`.
pub fn parse<T: DeserializeOwned>(method: &str, path: &str, answer: &str) -> anyhow::Result<T> {
    serde_json::from_str(answer).with_context(|| {
        format!("cannot read the admin API's answer to {method} {path} (is this a purgatory broker of the same version?)")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize)]
    struct Answer {
        now_ms: u64,
    }

    #[test]
    fn a_bad_answer_is_an_error_that_names_the_call() {
        let e = parse::<Answer>("GET", "/api/state", "<html>oops</html>").unwrap_err();
        let text = format!("{e:#}");
        assert!(text.contains("GET /api/state"), "{text}");
        let e = parse::<Answer>("GET", "/api/state", "{\"now\": 1}").unwrap_err();
        assert!(format!("{e:#}").contains("missing field `now_ms`"), "{e:#}");
    }

    #[test]
    fn unknown_fields_are_ignored() {
        let a: Answer = parse("GET", "/x", "{\"now_ms\": 7, \"new_field\": [1]}").expect("read");
        assert_eq!(a.now_ms, 7);
    }
}
