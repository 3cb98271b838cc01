//! Errors as one line for stderr that says what was expected: a bad URL shows what a URL looks
//! like, a server that answers but not in the Redis protocol is called that, and connection
//! trouble names the servers.

use redlatch::Error;

use crate::args::{Args, Servers};
use crate::Failure;

/// What a URL looks like, for messages about one that is not.
pub const URL_FORMS: &str = "redis://[[user]:password@]host[:port][/db], or rediss://... for \
     TLS (Sentinel: --sentinel redis://host:26379 --master NAME; Cluster: --cluster URL,...)";

/// `user:secret@` taken out of a URL before it is printed.
pub fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            format!("{}***{}", &url[..scheme + 3], &url[at..])
        }
        _ => url.to_owned(),
    }
}

/// `host:port` of a URL, for messages (never its credentials).
fn address(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let rest = rest.rsplit_once('@').map_or(rest, |(_, r)| r);
    rest.split(['/', '?']).next().unwrap_or(rest).to_owned()
}

/// Which servers a connection error is about.
fn servers_text(servers: &Servers) -> String {
    let list = |urls: &[String]| {
        urls.iter()
            .map(|u| address(u))
            .collect::<Vec<_>>()
            .join(", ")
    };
    match servers {
        Servers::Url(url) => format!("redis at {}", address(url)),
        Servers::Cluster(urls) => format!("the cluster at {}", list(urls)),
        Servers::Sentinel { urls, master } => {
            format!("master `{master}` through the sentinels at {}", list(urls))
        }
    }
}

/// The message about a URL the client refused (`detail`, the library's reason).
pub fn bad_url(url: &str, detail: &str) -> Failure {
    let detail = detail.strip_prefix("invalid argument: ").unwrap_or(detail);
    Failure(format!(
        "bad URL `{}`: {detail}; expected {URL_FORMS}",
        redact(url)
    ))
}

/// Whether `e` comes from a reply that is not in the Redis protocol (RESP): the port answers,
/// but not as Redis does (an HTTP server's `HTTP/1.1 ...` is `Parse error ... Unexpected 84`).
fn not_resp(e: &Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = source {
        if let Some(redis) = err.downcast_ref::<redis::RedisError>() {
            if redis.kind() == redis::ErrorKind::Parse {
                return true;
            }
        }
        source = err.source();
    }
    false
}

/// A library error as one line: connection trouble says which servers.
pub fn failure(e: Error, args: &Args) -> Failure {
    if not_resp(&e) {
        return Failure(format!(
            "{} answered, but this port does not speak the Redis protocol (RESP): is it the \
             right address?",
            servers_text(&args.servers)
        ));
    }
    if e.is_connection() || e.is_timeout() {
        return Failure(format!("cannot reach {}: {e}", servers_text(&args.servers)));
    }
    let text = e.to_string();
    // NOAUTH, or (a large command sent before AUTH) "unauthenticated multibulk length".
    let login = ["NOAUTH", "WRONGPASS", "unauthenticated", "invalid password"];
    if login.iter().any(|word| text.contains(word)) {
        return Failure(format!(
            "{}: {text} (give the password with --askpass, $REDISCLI_AUTH or --password)",
            servers_text(&args.servers)
        ));
    }
    Failure(text)
}
