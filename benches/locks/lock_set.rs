//! `lock_set`: one thread takes a lock set of 10,000 names on one server and releases it,
//! then one of 100,000 names: the time of each acquire and release, and the server CPU each
//! costs (what the scripts do per name), besides the client CPU (a guard and a watchdog
//! entry per name).

use std::time::{Duration, Instant};

use super::{memory, server_cpu_us, Ctx, Json};

/// Sizes of the set, and how many times each is taken.
const SIZES: [(usize, usize); 2] = [(10_000, 5), (100_000, 2)];

pub(super) fn lock_set(ctx: &mut Ctx) -> Json {
    let client = ctx.client();
    let mut json = ctx.json("lock_set");
    let mut summary = Vec::new();
    for (size, rounds) in SIZES {
        let names: Vec<String> = (0..size).map(|i| format!("bench:set:{i}")).collect();
        let set = client.lock_set(&names);
        let (mut acquire, mut release) = (Duration::MAX, Duration::MAX);
        let (mut server, mut own) = (f64::MAX, f64::MAX);
        for _ in 0..rounds {
            let server0 = server_cpu_us(&mut ctx.raw);
            let cpu0 = memory::own_cpu_us();
            let start = Instant::now();
            let guard = set.lock().expect("lock set");
            let taken = start.elapsed();
            guard.unlock().expect("unlock set");
            acquire = acquire.min(taken);
            release = release.min(start.elapsed() - taken);
            own = own.min(memory::own_cpu_us() - cpu0);
            server = server.min(server_cpu_us(&mut ctx.raw) - server0);
        }
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        summary.push(format!(
            "{size} names: acquire {:.0} ms, release {:.0} ms, server CPU {:.0} ms, client \
             CPU {:.0} ms",
            ms(acquire),
            ms(release),
            server / 1e3,
            own / 1e3
        ));
        json = json
            .num(&format!("acquire_ms_{size}"), ms(acquire))
            .num(&format!("release_ms_{size}"), ms(release))
            .num(&format!("server_cpu_ms_{size}"), server / 1e3)
            .num(&format!("client_cpu_ms_{size}"), own / 1e3);
    }
    eprintln!("lock_set (best of rounds): {}", summary.join("; "));
    json
}
