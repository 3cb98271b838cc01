//! The `redlatch` binary reaches what the library reaches: TLS with a private CA and a
//! client certificate (`--tls-ca`, `--tls-cert`, `--tls-key`), and an ACL user
//! (`--username`, `--password`). Skipped, saying why, where redis-server has no TLS.

mod support;

use std::process::{Command, Stdio};

use redlatch::{Client, Config};
use support::binary::Need;
use support::tls::{ClientAuth, Pki, TlsServer};

/// `redlatch <args>`: its status, stdout and stderr.
fn redlatch<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_redlatch"))
        .args(args)
        .env_remove("REDIS_URL")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        out.status.code().expect("exited"),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn tls_with_a_client_certificate_and_an_acl_user() {
    require!(Need::Tls);
    let server = TlsServer::new(ClientAuth::Required);
    let pki = Pki::get();
    // An ACL user, made over the plain port.
    redis::cmd("ACL")
        .arg(&["SETUSER", "locks", "on", ">s3cret", "~*", "&*", "+@all"])
        .query::<()>(&mut server.server.conn())
        .unwrap();
    let config = Config::builder(server.url("127.0.0.1").as_str())
        .tls_root_certificates(pki.pem("ca.crt"))
        .tls_client_certificate(pki.pem("client.crt"), pki.pem("client.key"))
        .build()
        .unwrap();
    let holder = Client::new(config).unwrap();
    let _guard = holder.lock("tls:cli").lock().unwrap();

    let url = server.url("127.0.0.1");
    let (ca, cert, key) = (
        pki.path("ca.crt"),
        pki.path("client.crt"),
        pki.path("client.key"),
    );
    let (ca, cert, key) = (
        ca.to_str().unwrap(),
        cert.to_str().unwrap(),
        key.to_str().unwrap(),
    );
    let tls = [
        "--url",
        &url,
        "--tls-ca",
        ca,
        "--tls-cert",
        cert,
        "--tls-key",
        key,
    ];
    let with = |extra: &[&str]| -> Vec<String> {
        tls.iter().chain(extra).map(|s| s.to_string()).collect()
    };

    let (code, out, err) = redlatch(&with(&[
        "--username",
        "locks",
        "--password",
        "s3cret",
        "inspect",
        "tls:cli",
    ]));
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(&holder.id().to_string()), "{out}");
    assert!(
        out.contains(&format!("redlatch:{}", holder.id())),
        "traced over TLS: {out}"
    );

    // Without the client certificate, the server refuses the handshake.
    let (code, _, err) = redlatch(&["--url", &url, "--tls-ca", ca, "inspect", "tls:cli"]);
    assert_eq!(code, 4, "no answer: {err}");
    assert!(err.contains("cannot reach redis at 127.0.0.1:"), "{err}");
    // A wrong password, and a CA file that is not there: one clear line each.
    let (code, _, err) = redlatch(&with(&[
        "--username",
        "locks",
        "--password",
        "nope",
        "list",
    ]));
    assert_eq!(code, 4, "a login refused: {err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("redis at 127.0.0.1:") && err.contains("--password"),
        "the server, and how to give a password: {err}"
    );
    let (code, _, err) = redlatch(&["--url", &url, "--tls-ca", "/no/such/ca.pem", "list"]);
    assert_eq!(code, 2, "usage: {err}");
    assert!(
        err.starts_with("redlatch: cannot read /no/such/ca.pem"),
        "{err}"
    );
}
