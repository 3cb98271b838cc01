//! `redlatch doctor`: what in the deployment threatens locks ([`Client::check`]), one finding
//! a line (or a JSON object) with what to do.

use std::process::ExitCode;

use redlatch::Client;

use crate::args::{Args, FOUND};
use crate::render::escaped;
use crate::{failure, json_line, out, Outcome};

pub fn doctor(client: &Client, args: &Args) -> Outcome {
    let findings = client.check().map_err(|e| failure(e, args))?;
    for f in &findings {
        if args.json {
            out(&json_line(&serde_json::json!({
                "server": f.server,
                "risk": format!("{:?}", f.risk),
                "found": f.found,
                "advice": f.advice,
            }))?)?;
        } else {
            out(&format!(
                "{}: {:?}: {}\n  what to do: {}\n",
                escaped(&f.server),
                f.risk,
                escaped(&f.found),
                f.advice
            ))?;
        }
    }
    if findings.is_empty() {
        if !args.json {
            out("no threat to locks found\n")?;
        }
        return Ok(ExitCode::SUCCESS);
    }
    Ok(ExitCode::from(FOUND))
}
