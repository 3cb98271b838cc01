//! `redlatch revoke NAME`: ask the holder of a plain or fenced lock to release it, or take it
//! from its holder with a grace (`--grace`) or at once (`--steal`), and let it go again.

use std::process::ExitCode;
use std::time::Duration;

use redlatch::inspect::Kind;
use redlatch::{Client, Lock, Preempt};

use crate::args::{Args, Revoke, OK};
use crate::render::escaped;
use crate::{failure, json_line, no, not_found, out, Failure, Outcome};

pub fn revoke(client: &Client, args: &Args, name: &str, how: &Revoke) -> Outcome {
    let Some(found) = client.inspect(name).map_err(|e| failure(e, args))? else {
        return not_found(name);
    };
    let lock = match found.kind {
        Kind::Reentrant => client.lock(name),
        Kind::Fenced => client.fenced_lock(name),
        kind => {
            return Err(Failure::usage(format!(
                "{name} is a {kind}: revoke takes back plain and fenced locks only"
            )))
        }
    };
    let reason = how.reason.clone().unwrap_or_default();
    let grace = match (how.steal, how.grace) {
        (true, _) => Some(Duration::ZERO),
        (false, grace) => grace,
    };
    match grace {
        None => ask(&lock, args, name, &reason),
        Some(grace) => {
            let preempt = Preempt::with_grace(grace)
                .reason(reason)
                .max_deferral(how.max_deferral.unwrap_or(Duration::ZERO));
            take(&lock, args, name, &preempt)
        }
    }
}

/// Who an operator's request names as the asker.
fn asker() -> String {
    let user = std::env::var("USER").unwrap_or_else(|_| "?".to_owned());
    format!("redlatch revoke ({user}, pid {})", std::process::id())
}

fn ask(lock: &Lock, args: &Args, name: &str, reason: &str) -> Outcome {
    let holder = lock
        .request_release_as(&asker(), reason)
        .map_err(|e| failure(e, args))?;
    if args.json {
        out(&json_line(&serde_json::json!({
            "name": name,
            "asked": holder,
            "forced": false,
        }))?)?;
        return Ok(ExitCode::from(if holder.is_some() {
            OK
        } else {
            crate::NO
        }));
    }
    match holder {
        Some(holder) => {
            out(&format!(
                "asked {} to release lock {} (told at its next renewal; nothing enforced)\n",
                escaped(&holder),
                escaped(name)
            ))?;
            Ok(ExitCode::from(OK))
        }
        None => no(&format!("lock {name} is not held: nobody to ask")),
    }
}

fn take(lock: &Lock, args: &Args, name: &str, how: &Preempt) -> Outcome {
    let guard = lock.preempt(how).map_err(|e| failure(e, args))?;
    let token = guard.token();
    // What the log says of this take: the hold released by force, if it was.
    let log = lock.revocations(10).map_err(|e| failure(e, args))?;
    let forced = log
        .iter()
        .rev()
        .find(|e| e.event == "forced" && e.by == guard.owner());
    let from = forced.map(|e| e.whom.clone());
    guard.unlock().map_err(|e| failure(e, args))?;
    if args.json {
        out(&json_line(&serde_json::json!({
            "name": name,
            "forced": from.is_some(),
            "from": from,
            "token": token,
        }))?)?;
    } else {
        match from {
            Some(from) => out(&format!(
                "took lock {} from {} by force at its deadline, and released it\n",
                escaped(name),
                escaped(&from)
            ))?,
            None => out(&format!(
                "took lock {} (its holder released it, or it was free), and released it\n",
                escaped(name)
            ))?,
        }
    }
    Ok(ExitCode::from(OK))
}
