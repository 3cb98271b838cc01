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

/// The URLs of `servers`.
fn urls(servers: &Servers) -> &[String] {
    match servers {
        Servers::Url(url) => std::slice::from_ref(url),
        Servers::Cluster(urls) | Servers::Sentinel { urls, .. } => urls,
    }
}

/// Whether `url` carries credentials (`scheme://user:password@...` or `scheme://user@...`).
fn has_userinfo(url: &str) -> bool {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split(['/', '?']).next().unwrap_or(rest);
    authority.contains('@')
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

/// The message about a URL the client refused (`detail`, the library's reason): a usage
/// error.
pub fn bad_url(url: &str, detail: &str) -> Failure {
    let detail = detail.strip_prefix("invalid argument: ").unwrap_or(detail);
    Failure::usage(format!(
        "bad URL `{}`: {detail}; expected {URL_FORMS}",
        redact(url)
    ))
}

/// Whether `e` comes from a [`redis::RedisError`] of `kind`.
fn redis_kind(e: &Error, kind: redis::ErrorKind) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = source {
        if let Some(redis) = err.downcast_ref::<redis::RedisError>() {
            if redis.kind() == kind {
                return true;
            }
        }
        source = err.source();
    }
    false
}

/// Whether `e` comes from a reply that is not in the Redis protocol (RESP): the port answers,
/// but not as Redis does (an HTTP server's `HTTP/1.1 ...` is `Parse error ... Unexpected 84`).
fn not_resp(e: &Error) -> bool {
    redis_kind(e, redis::ErrorKind::Parse)
}

/// How to give the servers' password, for messages about a login refused.
const PASSWORD_HINT: &str = "--askpass, $REDISCLI_AUTH, --password or the URL \
     (redis://[user]:password@host), and an ACL user's name with --username";

/// A library error as one line: connection trouble says which servers.
pub fn failure(e: Error, args: &Args) -> Failure {
    if not_resp(&e) {
        return Failure::new(format!(
            "{} answered, but this port does not speak the Redis protocol (RESP): is it the \
             right address?",
            servers_text(&args.servers)
        ));
    }
    if e.is_connection() || e.is_timeout() {
        return Failure::new(format!("cannot reach {}: {e}", servers_text(&args.servers)));
    }
    // A password (or user) the server refused at AUTH: the client reports no server reply.
    if redis_kind(&e, redis::ErrorKind::AuthenticationFailed) {
        let given =
            if args.password.is_some() || urls(&args.servers).iter().any(|u| has_userinfo(u)) {
                "refused the password given (a wrong password, or user): give the right one"
            } else {
                "refused to log in: give a password"
            };
        return Failure::new(format!(
            "{} {given} with {PASSWORD_HINT}",
            servers_text(&args.servers)
        ));
    }
    let text = e.to_string();
    // NOAUTH, or (a large command sent before AUTH) "unauthenticated multibulk length".
    let login = ["NOAUTH", "WRONGPASS", "unauthenticated", "invalid password"];
    if login.iter().any(|word| text.contains(word)) {
        return Failure::new(format!(
            "{} asks for a password ({text}): give it with {PASSWORD_HINT}",
            servers_text(&args.servers)
        ));
    }
    Failure::new(text)
}
