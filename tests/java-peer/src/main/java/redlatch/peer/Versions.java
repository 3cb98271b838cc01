package redlatch.peer;

import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;

import org.redisson.api.RLock;
import org.redisson.api.RedissonClient;

/** What differs between the Redisson versions the peer is built against, reached by name. */
final class Versions {
    private Versions() {
    }

    /**
     * Calls the public method {@code name} of {@code target} that takes {@code args} (for
     * what only some Redisson versions have, such as {@code getFencedLock}); the method's own
     * exception is thrown as it is.
     */
    static Object invoke(Object target, String name, Object... args) throws Exception {
        for (Method m : target.getClass().getMethods()) {
            if (m.getName().equals(name) && m.getParameterCount() == args.length && accepts(m, args)) {
                try {
                    return m.invoke(target, args);
                } catch (InvocationTargetException e) {
                    Throwable cause = e.getCause();
                    if (cause instanceof Exception) {
                        throw (Exception) cause;
                    }
                    throw e;
                }
            }
        }
        throw new UnsupportedOperationException(name + " is not in this Redisson version");
    }

    private static boolean accepts(Method m, Object[] args) {
        Class<?>[] types = m.getParameterTypes();
        for (int i = 0; i < args.length; i++) {
            boolean boxedLong = types[i] == long.class && args[i] instanceof Long;
            if (!boxedLong && !types[i].isInstance(args[i])) {
                return false;
            }
        }
        return true;
    }

    /** A fair lock's thread wait where the config has no setting for it (before 4.x); 0: the default. */
    private static volatile long fairWait;

    /**
     * Sets a fair lock's thread wait: {@code Config.setFairLockWaitTimeout} where it exists
     * (4.x), else remembered for {@link #fairLock}, which passes it to the constructor.
     */
    static void setFairWait(Object config, long ms) throws Exception {
        try {
            invoke(config, "setFairLockWaitTimeout", ms);
        } catch (UnsupportedOperationException e) {
            fairWait = ms;
        }
    }

    /**
     * {@code getFairLock(name)}, or on a version whose config has no thread wait (3.x) with
     * the one {@link #setFairWait} was given: {@code new RedissonFairLock(executor, name, wait)}.
     */
    static RLock fairLock(RedissonClient c, String name) throws Exception {
        if (fairWait == 0) {
            return c.getFairLock(name);
        }
        Object executor = invoke(c, "getCommandExecutor");
        Class<?> fair = Class.forName("org.redisson.RedissonFairLock");
        for (java.lang.reflect.Constructor<?> k : fair.getConstructors()) {
            if (k.getParameterCount() == 3 && k.getParameterTypes()[2] == long.class) {
                return (RLock) k.newInstance(executor, name, fairWait);
            }
        }
        throw new UnsupportedOperationException("RedissonFairLock(executor, name, wait) is not in this Redisson version");
    }

    /** Redisson's id of this client: the first part of every owner it writes. */
    static String clientId(RedissonClient c) {
        for (String getter : new String[] {"getServiceManager", "getConnectionManager"}) {
            try {
                Object manager = c.getClass().getMethod(getter).invoke(c);
                return String.valueOf(manager.getClass().getMethod("getId").invoke(manager));
            } catch (ReflectiveOperationException e) {
                // not this version's way
            }
        }
        return "?";
    }
}
