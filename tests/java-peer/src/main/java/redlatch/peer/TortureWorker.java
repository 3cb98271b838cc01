package redlatch.peer;

import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.FileWriter;
import java.io.IOException;
import java.io.InputStreamReader;
import java.lang.reflect.InvocationTargetException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;

import org.redisson.Redisson;
import org.redisson.api.RBucket;
import org.redisson.api.RLock;
import org.redisson.api.RRateLimiter;
import org.redisson.api.RScript;
import org.redisson.api.RateIntervalUnit;
import org.redisson.api.RateType;
import org.redisson.api.RedissonClient;
import org.redisson.client.codec.StringCodec;
import org.redisson.config.Config;

/**
 * A worker process of the torture run ({@code examples/torture}) on real Redisson: T threads
 * take the run's shared locks over and over, run the lost-update probe inside, and log every
 * critical section in the format {@code examples/torture/check.rs} reads, beside the Rust
 * workers and on the same locks.
 *
 * <p>Arguments (the runner passes them): {@code --proc P --threads T --locks L --kind
 * reentrant|fair|fenced|rate --lease-ms N --work-ms N --wait-ms N --rate N --interval-ms N
 * --seed N --url LOCK_SERVER --resource RESOURCE_SERVER --out LOG --fence-prelude
 * lua/fence_common.lua --fence-script lua/fenced_write.lua --fence-read-script
 * lua/fenced_read.lua --held-check on|off}: each fence script is sent with the prelude before
 * it, as {@code src/scripts.rs} makes them.
 *
 * <p>Kind {@code rate} (see {@code examples/torture/rate.rs}): each lock is an
 * {@link RRateLimiter} of {@code --rate} permits per {@code --interval-ms}, set with
 * {@code trySetRate(OVERALL, ..)}; a thread takes 1 to 3 permits of one at random, with
 * {@code acquire} (half the calls), {@code tryAcquire} the wait bound (a quarter), or
 * {@code tryAcquire} without a wait, tried again every millisecond until it takes (a quarter:
 * see {@link #rateCycle} for why), and logs each grant as an {@code M} line, a bounded wait
 * that ran out as a {@code T} line, and a call that found no rate (a kill lost it) as an
 * {@code N} line before it sets the rate again.
 *
 * <p>Protocol on stdin/stdout: once connected it logs {@code I P CLIENT_ID java} and prints
 * {@code ready}; it starts on a line {@code go UNTIL_NS} (CLOCK_MONOTONIC, which is
 * {@code System.nanoTime()} on Linux) and runs until then; it halts at once when stdin closes
 * (the runner is gone).
 *
 * <p>Redisson has no lost-lease callback. A section's outcome is {@code lost} when
 * {@code isHeldByCurrentThread()}, asked right after the section (with {@code --held-check on},
 * as the Rust worker reads its guard's lost flag there), says the hold is gone; {@code late}
 * when only the unlock said so (IllegalMonitorStateException).
 */
public final class TortureWorker {
    private static int proc;
    private static int threads = 4;
    private static int locks = 3;
    private static String kind = "reentrant";
    private static long leaseMs = 30000;
    private static long workMs = 2;
    private static long waitMs = 20000;
    private static long seed = 1;
    private static String url;
    private static String resourceUrl;
    private static String out;
    private static String fencePrelude = "";
    private static String fenceScript;
    private static String fenceReadScript;
    private static boolean heldCheck = true;
    private static long rate = 50;
    private static long intervalMs = 1000;

    private static RedissonClient client;
    private static RedissonClient resource;
    private static String clientId;
    private static BufferedWriter log;
    private static volatile long until;

    public static void main(String[] args) throws Exception {
        for (int i = 0; i + 1 < args.length; i += 2) {
            String v = args[i + 1];
            switch (args[i]) {
                case "--proc": proc = Integer.parseInt(v); break;
                case "--threads": threads = Integer.parseInt(v); break;
                case "--locks": locks = Integer.parseInt(v); break;
                case "--kind": kind = v; break;
                case "--lease-ms": leaseMs = Long.parseLong(v); break;
                case "--work-ms": workMs = Long.parseLong(v); break;
                case "--wait-ms": waitMs = Long.parseLong(v); break;
                case "--seed": seed = Long.parseUnsignedLong(v); break;
                case "--url": url = stripSlash(v); break;
                case "--resource": resourceUrl = stripSlash(v); break;
                case "--out": out = v; break;
                case "--fence-prelude": fencePrelude = readFile(v); break;
                case "--fence-script": fenceScript = readFile(v); break;
                case "--fence-read-script": fenceReadScript = readFile(v); break;
                case "--held-check": heldCheck = v.equals("on"); break;
                case "--rate": rate = Long.parseLong(v); break;
                case "--interval-ms": intervalMs = Long.parseLong(v); break;
                default: throw new IllegalArgumentException("unknown argument " + args[i]);
            }
        }
        if (!Arrays.asList("reentrant", "fair", "fenced", "rate").contains(kind)) {
            throw new IllegalArgumentException("Java workers run reentrant, fair, fenced and rate, not " + kind);
        }
        if (fenceScript != null && fenceReadScript != null) {
            fenceScript = fencePrelude + fenceScript;
            fenceReadScript = fencePrelude + fenceReadScript;
        } else if (kind.equals("fenced")) {
            throw new IllegalArgumentException("kind fenced needs --fence-script and --fence-read-script");
        }
        log = new BufferedWriter(new FileWriter(out, StandardCharsets.UTF_8));
        client = Redisson.create(config(url, leaseMs, threads + 4));
        resource = Redisson.create(config(resourceUrl, 30000, threads + 2));
        clientId = Versions.clientId(client);
        if (kind.equals("rate")) {
            for (int i = 0; i < locks; i++) {
                setRate("torture:lock:" + i);
            }
        }
        log("I\t" + proc + "\t" + clientId + "\tjava");
        System.out.println("ready");
        System.out.flush();

        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String go = in.readLine();
        if (go == null || !go.startsWith("go ")) {
            Runtime.getRuntime().halt(0);
        }
        until = Long.parseLong(go.substring(3).trim());
        // The runner's end: stdin closes (it exited, or was killed). Die with it.
        Thread watch = new Thread(() -> {
            try {
                while (in.readLine() != null) {
                    // nothing else is sent
                }
            } catch (IOException e) {
                // closed
            }
            flush();
            Runtime.getRuntime().halt(0);
        }, "stdin");
        watch.setDaemon(true);
        watch.start();

        List<Thread> workers = new ArrayList<>();
        final boolean[] failed = {false};
        for (int t = 0; t < threads; t++) {
            final int thread = t;
            Thread w = new Thread(() -> {
                try {
                    work(thread);
                } catch (Throwable e) {
                    e.printStackTrace();
                    synchronized (failed) {
                        failed[0] = true;
                    }
                }
            }, "worker-" + t);
            w.start();
            workers.add(w);
        }
        for (Thread w : workers) {
            w.join();
        }
        flush();
        // No Redisson shutdown: a worker's end is the process's end, as for the Rust workers.
        synchronized (failed) {
            Runtime.getRuntime().halt(failed[0] ? 1 : 0);
        }
    }

    private static Config config(String address, long watchdog, int pool) {
        Config c = new Config();
        c.setLockWatchdogTimeout(watchdog);
        c.setThreads(2);
        c.setNettyThreads(4);
        c.useSingleServer()
            .setAddress(address)
            .setConnectionMinimumIdleSize(2)
            .setConnectionPoolSize(pool);
        return c;
    }

    private static String stripSlash(String u) {
        return u.endsWith("/") ? u.substring(0, u.length() - 1) : u;
    }

    /** splitmix64, as the Rust worker's {@code Rng}. */
    private static final class Rng {
        private long state;

        Rng(long seed) {
            state = seed;
        }

        long next() {
            state += 0x9e3779b97f4a7c15L;
            long z = state;
            z = (z ^ (z >>> 30)) * 0xbf58476d1ce4e5b9L;
            z = (z ^ (z >>> 27)) * 0x94d049bb133111ebL;
            return z ^ (z >>> 31);
        }

        /** Uniform in {@code lo..=hi}. */
        long range(long lo, long hi) {
            return lo + Long.remainderUnsigned(next(), hi - lo + 1);
        }
    }

    private static void work(int thread) throws Exception {
        Rng rng = new Rng(seed * 1000 + thread);
        while (System.nanoTime() - until < 0) {
            String lock = "torture:lock:" + rng.range(0, locks - 1);
            if (kind.equals("rate")) {
                rateCycle(thread, lock, rng);
            } else {
                cycle(thread, lock, rng.range(0, workMs));
            }
            LockSupport.parkNanos(rng.range(0, 1000) * 1000);
        }
    }

    /** Sets a limiter's rate unless it is set (Redisson 3.17 and later all have this call). */
    @SuppressWarnings("deprecation")
    private static void setRate(String name) {
        client.getRateLimiter(name).trySetRate(RateType.OVERALL, rate, intervalMs, RateIntervalUnit.MILLISECONDS);
    }

    /**
     * One call of kind {@code rate}: 1 to 3 permits of {@code name}; one log line.
     *
     * <p>Redisson does not say when it admitted: its script scores the entry with this JVM's
     * {@code System.currentTimeMillis()}, read inside the call (by the attempt that took), and
     * judges every entry by that clock. The grant's time therefore lies between the two
     * readings around the call, which the line logs as its span; the checker counts a grant in
     * a window only where the whole span lies inside. On one machine this clock and the Redis
     * server's {@code TIME}, which the Rust workers log, are the same (CLOCK_REALTIME).
     *
     * <p>A blocked {@code acquire} spans its whole wait, often longer than an interval: its
     * grant is then counted in no window. A polled {@code tryAcquire(n)} is one script call
     * per try, so the span of the try that took is a round trip: those grants are placed
     * within a millisecond or two, and checked against the Rust workers' beside them.
     */
    private static void rateCycle(int thread, String name, Rng rng) throws Exception {
        long permits = rng.range(1, Math.min(3, rate));
        long how = rng.range(0, 3);
        String call = how < 2 ? "a" : how == 2 ? "w" : "p";
        RRateLimiter limiter = client.getRateLimiter(name);
        long start = System.nanoTime();
        long lo = System.currentTimeMillis();
        boolean taken;
        try {
            switch (call) {
                case "a":
                    limiter.acquire(permits);
                    taken = true;
                    break;
                case "w":
                    taken = limiter.tryAcquire(permits, waitMs, TimeUnit.MILLISECONDS);
                    break;
                default:
                    long giveUp = System.nanoTime() + waitMs * 1_000_000L;
                    while (true) {
                        lo = System.currentTimeMillis();
                        taken = limiter.tryAcquire(permits);
                        if (taken || System.nanoTime() - giveUp >= 0) {
                            break;
                        }
                        Thread.sleep(1);
                    }
            }
        } catch (Throwable e) {
            long end = System.nanoTime();
            if (rateNotSet(e)) {
                log("N\t" + proc + "\t" + thread + "\t" + name + "\t" + start + "\t" + end);
                try {
                    setRate(name);
                } catch (Throwable again) {
                    error(thread, name, "set", again);
                }
            } else {
                error(thread, name, "acquire", e);
                // A dead server fails at once: do not spin.
                Thread.sleep(20);
            }
            return;
        }
        long hi = System.currentTimeMillis();
        long end = System.nanoTime();
        if (!taken) {
            log("T\t" + proc + "\t" + thread + "\t" + name + "\t" + end);
            return;
        }
        log("M\t" + proc + "\t" + thread + "\t" + name + "\t" + permits + "\t" + lo + "\t" + hi + "\t" + start
            + "\t" + end + "\t" + call);
    }

    /** Whether Redisson's script refused for want of a config ("RateLimiter is not initialized"). */
    private static boolean rateNotSet(Throwable e) {
        for (Throwable c = e; c != null; c = c.getCause() == c ? null : c.getCause()) {
            String m = c.getMessage();
            if (m != null && m.contains("RateLimiter is not initialized")) {
                return true;
            }
        }
        return false;
    }

    /** Lock, probe (read the counter, pause, write it + 1), unlock; one log line. */
    private static void cycle(int thread, String name, long pauseMs) throws Exception {
        RLock lock;
        Long token = null;
        boolean acquired;
        try {
            switch (kind) {
                case "reentrant":
                    lock = client.getLock(name);
                    acquired = lock.tryLock(waitMs, TimeUnit.MILLISECONDS);
                    break;
                case "fair":
                    lock = client.getFairLock(name);
                    acquired = lock.tryLock(waitMs, TimeUnit.MILLISECONDS);
                    break;
                default: {
                    // RFencedLock (Redisson 3.26 and later): by name, so that the peer still
                    // compiles against the older versions the interop tests build.
                    Object fenced = Versions.invoke(client, "getFencedLock", name);
                    lock = (RLock) fenced;
                    token = (Long) Versions.invoke(fenced, "tryLockAndGetToken", waitMs, TimeUnit.MILLISECONDS);
                    acquired = token != null;
                }
            }
        } catch (Throwable e) {
            error(thread, name, "lock", e);
            // A dead server fails at once: do not spin.
            Thread.sleep(20);
            return;
        }
        if (!acquired) {
            log("T\t" + proc + "\t" + thread + "\t" + name + "\t" + System.nanoTime());
            return;
        }
        long enter = System.nanoTime();
        String write;
        long wstart = 0;
        long wend = 0;
        try {
            String key = name + ":counter";
            if (token != null) {
                // A read for update (FencedResource::read_for_update): fenced, and it claims
                // the value for this token, so that no staler holder writes before ours.
                String holder = clientId + ":" + Thread.currentThread().getId();
                RScript script = resource.getScript(StringCodec.INSTANCE);
                long rstart = System.nanoTime();
                List<Object> read = script.eval(key, RScript.Mode.READ_WRITE, fenceReadScript,
                    LIST, Arrays.<Object>asList(key, fence(key)), Long.toString(token), holder);
                if (((Number) read.get(0)).longValue() != 1) {
                    // Refused: the read is the probe's fenced call that the fence turned away.
                    write = "rej";
                    wstart = rstart;
                    wend = System.nanoTime();
                } else {
                    Object v = read.size() > 1 ? read.get(1) : null;
                    long value = v == null ? 0 : Long.parseLong(v.toString());
                    Thread.sleep(pauseMs);
                    wstart = System.nanoTime();
                    List<Object> reply = script.eval(key, RScript.Mode.READ_WRITE, fenceScript,
                        LIST, Arrays.<Object>asList(key, fence(key), receipt(key)),
                        Long.toString(token), holder, "set", Long.toString(value + 1),
                        RECEIPT_TTL_MS);
                    wend = System.nanoTime();
                    write = ((Number) reply.get(0)).longValue() == 1 ? "acc" : "rej";
                }
            } else {
                RBucket<String> bucket = resource.getBucket(key, StringCodec.INSTANCE);
                String v = bucket.get();
                long value = v == null ? 0 : Long.parseLong(v);
                Thread.sleep(pauseMs);
                wstart = System.nanoTime();
                bucket.set(Long.toString(value + 1));
                wend = System.nanoTime();
                write = "acc";
            }
        } catch (Throwable e) {
            error(thread, name, "probe", e);
            write = "err";
            wstart = 0;
            wend = 0;
        }
        long exit = System.nanoTime();
        boolean lostAtExit = false;
        if (heldCheck) {
            try {
                lostAtExit = !lock.isHeldByCurrentThread();
            } catch (Throwable e) {
                // No answer: not told; the unlock decides.
            }
        }
        String released;
        try {
            lock.unlock();
            released = "ok";
        } catch (IllegalMonitorStateException e) {
            released = "late";
        } catch (Throwable e) {
            if (cause(e) instanceof IllegalMonitorStateException) {
                released = "late";
            } else {
                error(thread, name, "unlock", e);
                released = "err";
            }
        }
        String outcome = lostAtExit ? "lost" : released;
        log("S\t" + proc + "\t" + thread + "\t" + name + "\t" + (token == null ? "-" : token.toString())
            + "\t" + enter + "\t" + exit + "\t" + outcome + "\t" + write + "\t" + wstart + "\t" + wend);
    }

    /** The list reply type: {@code LIST} in Redisson 4, {@code MULTI} before. */
    private static final RScript.ReturnType LIST = listType();

    private static RScript.ReturnType listType() {
        for (RScript.ReturnType t : RScript.ReturnType.values()) {
            if (t.name().equals("LIST") || t.name().equals("MULTI")) {
                return t;
            }
        }
        throw new IllegalStateException("no list reply type in this Redisson version");
    }

    private static String readFile(String path) throws java.io.IOException {
        return new String(Files.readAllBytes(Paths.get(path)), StandardCharsets.UTF_8);
    }

    /** How long a fenced write's receipt is kept, ms (as redlatch's RECEIPT_TTL). */
    private static final String RECEIPT_TTL_MS = "20000";
    private static final AtomicLong RECEIPTS = new AtomicLong();

    /** A new receipt of a fenced write of {@code key}, as redlatch's FencedResource names them. */
    private static String receipt(String key) {
        String tagged = key.contains("{") ? key : "{" + key + "}";
        return "redisson_unlock_latch:" + tagged + ":" + clientId + "-" + RECEIPTS.incrementAndGet();
    }

    /** The fence of a fenced value, as redlatch's FencedResource names it. */
    private static String fence(String key) {
        return key.contains("{") ? "redlatch_fence:" + key : "redlatch_fence:{" + key + "}";
    }

    private static Throwable cause(Throwable e) {
        Throwable c = e;
        while ((c instanceof InvocationTargetException || c.getClass().getName().endsWith("CompletionException"))
            && c.getCause() != null) {
            c = c.getCause();
        }
        return c;
    }

    private static void error(int thread, String name, String phase, Throwable e) {
        StringBuilder text = new StringBuilder();
        for (Throwable c = cause(e); c != null; c = c.getCause() == c ? null : c.getCause()) {
            text.append(text.length() == 0 ? "" : " / caused by ");
            text.append(c.getClass().getSimpleName()).append(": ").append(c.getMessage());
        }
        String msg = text.toString().replace('\t', ' ').replace('\n', ' ');
        log("E\t" + proc + "\t" + thread + "\t" + name + "\t" + System.nanoTime() + "\t" + phase + "\t" + msg);
    }

    private static synchronized void log(String line) {
        try {
            log.write(line);
            log.write('\n');
            log.flush();
        } catch (IOException e) {
            throw new RuntimeException("cannot write the log", e);
        }
    }

    private static synchronized void flush() {
        try {
            log.flush();
        } catch (IOException e) {
            // nothing more to do
        }
    }

}
