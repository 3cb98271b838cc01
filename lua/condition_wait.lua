-- The first half of a condition wait: queue the waiter while its owner holds the lock, and
-- leave the owner's hold count at 1, so that the kind's own unlock (sent next, which publishes
-- what Redisson's waiters expect) releases the lock fully. A notification needs the lock, so
-- none can be sent between this call and the release: none is lost.
-- KEYS[1]  lock name (HASH: field -> hold count)
-- KEYS[2]  the condition's waiters "redlatch_condition:{name}:<condition>" (ZSET: id -> deadline)
-- KEYS[3]  the condition's queue "redlatch_condition_queue:{name}:<condition>" (LIST of ids)
-- ARGV[1]  the owner's hash field in KEYS[1] (the owner id, or "<owner>:write")
-- ARGV[2]  the waiter id (unique per wait; ends in ":c<n>" or ":s<n>", see the helpers)
-- ARGV[3]  the waiter's lease in milliseconds (renewed while it waits)
-- ARGV[4]  optional: a field of KEYS[1] whose presence refuses the wait (a writer's own read
--          holds: the write release would leave the lock in read mode, which neither a
--          notifier nor the waiter itself could then take for writing)
-- Reply:   nil                 the owner does not hold the lock (nothing changed)
--          -1                  refused for ARGV[4] (nothing changed)
--          count               the owner's hold count before the call; it is 1 now, and the
--                              waiter is queued last with the deadline now + ARGV[3]
--          error WRONGTYPE     a key holds another type
local count = redis.call('hget', KEYS[1], ARGV[1]);
if count == false then
    return nil;
end;
if ARGV[4] ~= nil and redis.call('hexists', KEYS[1], ARGV[4]) == 1 then
    return -1;
end;
local now = cond_now();
cond_prune(KEYS[2], KEYS[3], now);
if count ~= '1' then
    redis.call('hset', KEYS[1], ARGV[1], 1);
end;
redis.call('rpush', KEYS[3], ARGV[2]);
redis.call('zadd', KEYS[2], now + tonumber(ARGV[3]), ARGV[2]);
cond_keep(KEYS[2], 2 * tonumber(ARGV[3]));
cond_keep(KEYS[3], 2 * tonumber(ARGV[3]));
return tonumber(count);
