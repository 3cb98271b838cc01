package redlatch.peer;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

import org.redisson.Redisson;
import org.redisson.api.RBucket;
import org.redisson.api.RCountDownLatch;
import org.redisson.api.RLock;
import org.redisson.api.RPermitExpirableSemaphore;
import org.redisson.api.RRateLimiter;
import org.redisson.api.RateIntervalUnit;
import org.redisson.api.RateLimiterConfig;
import org.redisson.api.RateType;
import org.redisson.api.RSemaphore;
import org.redisson.api.RedissonClient;
import org.redisson.client.codec.StringCodec;
import org.redisson.config.Config;

/**
 * Redisson driven line by line, for redlatch's interop tests.
 *
 * <p>Arguments choose the topology and settings (see {@link #main}). Each line on stdin is
 * {@code ACTOR OP ARGS...}. An actor is a Java thread of its own, made on first use, that runs
 * its lines one after another, so a Redisson lock taken by actor {@code a} is held by a's
 * thread until {@code a} unlocks it. Each line gets one reply on stdout:
 * {@code ACTOR ok VALUE T0 T1} ({@code System.nanoTime()} before and after the call, which is
 * CLOCK_MONOTONIC on Linux; VALUE is {@code -} for none) or {@code ACTOR err TEXT}.
 * On start it prints {@code ready JAR CLIENT_ID}.
 */
public final class Peer {
    private static final PrintStream OUT = System.out;
    private static final List<RedissonClient> CLIENTS = new ArrayList<>();
    private static final Map<String, LinkedBlockingQueue<String[]>> ACTORS = new ConcurrentHashMap<>();

    /**
     * {@code --single URL} (repeatable: one client per server, for MultiLock and RedLock),
     * {@code --cluster URL...}, {@code --sentinel MASTER URL...}; {@code --watchdog MS},
     * {@code --prefix P} (a NameMapper), {@code --sharded auto|on|off}, {@code --fair-wait MS}
     * (a fair lock's thread wait), {@code --codec string} (StringCodec instead of the default
     * Kryo5Codec: what a group lock hashes its values with).
     */
    public static void main(String[] args) throws Exception {
        long watchdog = 0;
        long fairWait = 0;
        String prefix = null;
        String sharded = null;
        boolean stringCodec = false;
        List<Config> configs = new ArrayList<>();
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--single": {
                    Config c = new Config();
                    c.useSingleServer().setAddress(args[++i]);
                    configs.add(c);
                    break;
                }
                case "--cluster": {
                    Config c = new Config();
                    List<String> urls = new ArrayList<>();
                    while (i + 1 < args.length && !args[i + 1].startsWith("--")) {
                        urls.add(args[++i]);
                    }
                    c.useClusterServers().addNodeAddress(urls.toArray(new String[0]));
                    configs.add(c);
                    break;
                }
                case "--sentinel": {
                    Config c = new Config();
                    String master = args[++i];
                    List<String> urls = new ArrayList<>();
                    while (i + 1 < args.length && !args[i + 1].startsWith("--")) {
                        urls.add(args[++i]);
                    }
                    c.useSentinelServers().setMasterName(master)
                        .addSentinelAddress(urls.toArray(new String[0]))
                        .setCheckSentinelsList(false);
                    configs.add(c);
                    break;
                }
                case "--watchdog":
                    watchdog = Long.parseLong(args[++i]);
                    break;
                case "--fair-wait":
                    fairWait = Long.parseLong(args[++i]);
                    break;
                case "--prefix":
                    prefix = args[++i];
                    break;
                case "--sharded":
                    sharded = args[++i];
                    break;
                case "--codec":
                    stringCodec = "string".equals(args[++i]);
                    break;
                default:
                    throw new IllegalArgumentException("unknown argument " + args[i]);
            }
        }
        for (Config c : configs) {
            if (watchdog > 0) {
                c.setLockWatchdogTimeout(watchdog);
            }
            if (stringCodec) {
                c.setCodec(StringCodec.INSTANCE);
            }
            if (fairWait > 0) {
                Versions.setFairWait(c, fairWait);
            }
            if (prefix != null) {
                setNameMapper(c, prefix);
            }
            if (sharded != null && c.isClusterConfig()) {
                setSharded(c, sharded);
            }
            CLIENTS.add(Redisson.create(c));
        }
        String jar = Redisson.class.getProtectionDomain().getCodeSource().getLocation().getPath();
        reply("ready " + jar.substring(jar.lastIndexOf('/') + 1) + " " + Versions.clientId(CLIENTS.get(0)));
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        String line;
        while ((line = in.readLine()) != null) {
            String[] words = line.trim().split("\\s+");
            if (words.length < 2) {
                continue;
            }
            ACTORS.computeIfAbsent(words[0], Peer::startActor).add(words);
        }
        // stdin closed: the test is over. Exit without unlocking, as a process that dies would.
        Runtime.getRuntime().halt(0);
    }

    private static LinkedBlockingQueue<String[]> startActor(String name) {
        LinkedBlockingQueue<String[]> queue = new LinkedBlockingQueue<>();
        Thread t = new Thread(() -> {
            while (true) {
                String[] words;
                try {
                    words = queue.take();
                } catch (InterruptedException e) {
                    return;
                }
                long t0 = System.nanoTime();
                try {
                    Object value = run(words);
                    long t1 = System.nanoTime();
                    reply(name + " ok " + (value == null ? "-" : value) + " " + t0 + " " + t1);
                } catch (Throwable e) {
                    Throwable cause = e;
                    while (cause instanceof InvocationTargetException && cause.getCause() != null) {
                        cause = cause.getCause();
                    }
                    String text = cause.getClass().getSimpleName() + ": " + cause.getMessage();
                    reply(name + " err " + text.replace('\n', ' '));
                }
            }
        }, "actor-" + name);
        t.setDaemon(true);
        t.start();
        return queue;
    }

    private static synchronized void reply(String line) {
        OUT.println(line);
        OUT.flush();
    }

    private static RedissonClient client() {
        return CLIENTS.get(0);
    }

    /** One line's work, on its actor's thread. */
    private static Object run(String[] w) throws Exception {
        String op = w[1];
        switch (op) {
            case "tid":
                return Thread.currentThread().getId();
            case "lock": {
                RLock l = lock(w[2], w[3]);
                if (w.length > 4) {
                    l.lock(Long.parseLong(w[4]), TimeUnit.MILLISECONDS);
                } else {
                    l.lock();
                }
                return null;
            }
            case "trylock": {
                RLock l = lock(w[2], w[3]);
                long wait = Long.parseLong(w[4]);
                if (w.length > 5) {
                    return l.tryLock(wait, Long.parseLong(w[5]), TimeUnit.MILLISECONDS);
                }
                return l.tryLock(wait, TimeUnit.MILLISECONDS);
            }
            case "unlock":
                lock(w[2], w[3]).unlock();
                return null;
            case "force":
                return lock(w[2], w[3]).forceUnlock();
            case "locked":
                return lock(w[2], w[3]).isLocked();
            case "held":
                return lock(w[2], w[3]).isHeldByCurrentThread();
            case "heldby":
                return lock(w[2], w[3]).isHeldByThread(Long.parseLong(w[4]));
            case "count":
                return lock(w[2], w[3]).getHoldCount();
            case "ttl":
                return lock(w[2], w[3]).remainTimeToLive();
            case "token": {
                // RFencedLock.lockAndGetToken(), or with a wait: tryLockAndGetToken(wait, unit).
                Object fenced = Versions.invoke(client(), "getFencedLock", w[2]);
                if (w.length > 3) {
                    return Versions.invoke(fenced, "tryLockAndGetToken", Long.parseLong(w[3]), TimeUnit.MILLISECONDS);
                }
                return Versions.invoke(fenced, "lockAndGetToken");
            }
            case "incr": {
                // N times: lock, read the counter, write it plus one, unlock (a lost update
                // shows as a count short of the total).
                RLock l = lock(w[2], w[3]);
                RBucket<String> counter = client().getBucket(w[4], StringCodec.INSTANCE);
                int n = Integer.parseInt(w[5]);
                for (int i = 0; i < n; i++) {
                    l.lock();
                    try {
                        String v = counter.get();
                        counter.set(Long.toString((v == null ? 0 : Long.parseLong(v)) + 1));
                    } finally {
                        l.unlock();
                    }
                }
                return n;
            }
            case "sem":
                return semaphore(w[2], client().getSemaphore(w[3]), w);
            case "pes":
                return expirable(w[2], client().getPermitExpirableSemaphore(w[3]), w);
            case "latch":
                return latch(w[2], client().getCountDownLatch(w[3]), w);
            case "rate":
                return rate(w[2], client().getRateLimiter(w[3]), w);
            default:
                throw new IllegalArgumentException("unknown op " + op);
        }
    }

    /**
     * The lock of a kind: lock, fair, read, write, fenced, nrlock, nrfair, spin, multi, red, or
     * group (named {@code GROUP=V1,V2...}: {@code getMultiLock(GROUP, [V1, V2...])}, the values
     * Strings written by the client's codec; Redisson 3.38.0 and later).
     */
    private static RLock lock(String kind, String name) throws Exception {
        RedissonClient c = client();
        switch (kind) {
            case "lock":
                return c.getLock(name);
            case "fair":
                return Versions.fairLock(c, name);
            case "read":
                return c.getReadWriteLock(name).readLock();
            case "write":
                return c.getReadWriteLock(name).writeLock();
            case "spin":
                return c.getSpinLock(name);
            case "fenced":
                return (RLock) Versions.invoke(c, "getFencedLock", name);
            case "nrlock":
                return (RLock) Versions.invoke(c, "getNonReentrantLock", name);
            case "nrfair":
                return (RLock) Versions.invoke(c, "getNonReentrantFairLock", name);
            case "multi":
                return c.getMultiLock(perServer(name));
            case "red":
                return c.getRedLock(perServer(name));
            case "group": {
                int at = name.indexOf('=');
                List<Object> values = new ArrayList<>(Arrays.asList(name.substring(at + 1).split(",")));
                return (RLock) Versions.invoke(c, "getMultiLock", name.substring(0, at), values);
            }
            default:
                throw new IllegalArgumentException("unknown lock kind " + kind);
        }
    }

    private static RLock[] perServer(String name) {
        RLock[] locks = new RLock[CLIENTS.size()];
        for (int i = 0; i < locks.length; i++) {
            locks[i] = CLIENTS.get(i).getLock(name);
        }
        return locks;
    }

    private static Object semaphore(String op, RSemaphore s, String[] w) throws Exception {
        switch (op) {
            case "trysetpermits":
                return s.trySetPermits(Integer.parseInt(w[4]));
            case "acquire":
                s.acquire(Integer.parseInt(w[4]));
                return null;
            case "tryacquire":
                return s.tryAcquire(Integer.parseInt(w[4]), Long.parseLong(w[5]), TimeUnit.MILLISECONDS);
            case "release":
                s.release(Integer.parseInt(w[4]));
                return null;
            case "available":
                return s.availablePermits();
            default:
                throw new IllegalArgumentException("unknown sem op " + op);
        }
    }

    private static Object expirable(String op, RPermitExpirableSemaphore s, String[] w) throws Exception {
        switch (op) {
            case "trysetpermits":
                return s.trySetPermits(Integer.parseInt(w[4]));
            case "acquire":
                return s.acquire(Long.parseLong(w[4]), TimeUnit.MILLISECONDS);
            case "tryacquire":
                return s.tryAcquire(Long.parseLong(w[4]), Long.parseLong(w[5]), TimeUnit.MILLISECONDS);
            case "release":
                s.release(w[4]);
                return null;
            case "available":
                return s.availablePermits();
            case "updatelease":
                return s.updateLeaseTime(w[4], Long.parseLong(w[5]), TimeUnit.MILLISECONDS);
            case "lease":
                // getLeaseTime (newer versions): ms left, -1 for none (Redisson's words).
                return Versions.invoke(s, "getLeaseTime", w[4]);
            default:
                throw new IllegalArgumentException("unknown pes op " + op);
        }
    }

    /**
     * A rate limiter: trysetrate/setrate TYPE RATE INTERVAL_MS (TYPE OVERALL or PER_CLIENT),
     * tryacquire N [WAIT_MS], acquire N, available, config ("TYPE/RATE/INTERVAL_MS", or "-"
     * where none), release N (Redisson 3.52 and later).
     */
    private static Object rate(String op, RRateLimiter r, String[] w) throws Exception {
        switch (op) {
            case "trysetrate":
                return r.trySetRate(RateType.valueOf(w[4]), Long.parseLong(w[5]), Long.parseLong(w[6]),
                        RateIntervalUnit.MILLISECONDS);
            case "setrate":
                r.setRate(RateType.valueOf(w[4]), Long.parseLong(w[5]), Long.parseLong(w[6]),
                        RateIntervalUnit.MILLISECONDS);
                return null;
            case "tryacquire":
                if (w.length > 5) {
                    return r.tryAcquire(Long.parseLong(w[4]), Long.parseLong(w[5]), TimeUnit.MILLISECONDS);
                }
                return r.tryAcquire(Long.parseLong(w[4]));
            case "acquire":
                r.acquire(Long.parseLong(w[4]));
                return null;
            case "available":
                return r.availablePermits();
            case "config": {
                RateLimiterConfig c = r.getConfig();
                if (c == null || c.getRate() == null || c.getRate() == 0) {
                    return "-";
                }
                return c.getRateType() + "/" + c.getRate() + "/" + c.getRateInterval();
            }
            case "release":
                Versions.invoke(r, "release", Long.parseLong(w[4]));
                return null;
            default:
                throw new IllegalArgumentException("unknown rate op " + op);
        }
    }

    private static Object latch(String op, RCountDownLatch l, String[] w) throws Exception {
        switch (op) {
            case "trysetcount":
                return l.trySetCount(Long.parseLong(w[4]));
            case "countdown":
                l.countDown();
                return null;
            case "await":
                return l.await(Long.parseLong(w[4]), TimeUnit.MILLISECONDS);
            case "count":
                return l.getCount();
            default:
                throw new IllegalArgumentException("unknown latch op " + op);
        }
    }

    /** A NameMapper that adds a prefix, on whichever package this version keeps it in. */
    private static void setNameMapper(Config c, String prefix) throws Exception {
        Class<?> type;
        try {
            type = Class.forName("org.redisson.config.NameMapper");
        } catch (ClassNotFoundException e) {
            type = Class.forName("org.redisson.api.NameMapper");
        }
        Object mapper = Proxy.newProxyInstance(type.getClassLoader(), new Class<?>[] {type}, (p, m, a) -> {
            switch (m.getName()) {
                case "map":
                    return prefix + a[0];
                case "unmap":
                    return ((String) a[0]).substring(prefix.length());
                case "hashCode":
                    return System.identityHashCode(p);
                case "equals":
                    return p == a[0];
                default:
                    return "NameMapper(" + prefix + ")";
            }
        });
        Object server = c.isClusterConfig() ? c.useClusterServers() : c.useSingleServer();
        server.getClass().getMethod("setNameMapper", type).invoke(server, mapper);
    }

    private static void setSharded(Config c, String mode) throws Exception {
        Class<?> type = Class.forName("org.redisson.config.ShardedSubscriptionMode");
        Object value = type.getMethod("valueOf", String.class).invoke(null, mode.toUpperCase());
        Object cluster = c.useClusterServers();
        cluster.getClass().getMethod("setShardedSubscriptionMode", type).invoke(cluster, value);
    }
}
