package redlatch.peer;

import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;

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
