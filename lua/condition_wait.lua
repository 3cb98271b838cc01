-- The first half of a condition wait: queue the waiter while its owner holds the lock, and
-- release the lock fully. A notification needs the lock, so none can come between the queueing
-- and the release: none is lost.
--
-- A kind whose last release is its hash deleted and '0' published on its channel (plain,
-- fenced, non-reentrant: `lock_unlock.lua`) is released here, as its unlock would (ARGV[5]).
-- For the others the owner's hold count is left at 1, and the kind's own unlock, sent next,
-- releases the lock with what its waiters (Redisson's included) expect.
-- KEYS[1]  lock name (HASH: field -> hold count)
-- KEYS[2]  the condition's waiters "redlatch_condition:{name}:<condition>" (ZSET: id -> deadline)
-- KEYS[3]  the condition's queue "redlatch_condition_queue:{name}:<condition>" (LIST of ids)
-- KEYS[4]  the lock's channel "redisson_lock__channel:{name}" (used with ARGV[5] only)
-- ARGV[1]  the owner's hash field in KEYS[1] (the owner id, or "<owner>:write")
-- ARGV[2]  the waiter id (unique per wait; ends in ":c<n>" or ":s<n>", see the helpers)
-- ARGV[3]  the waiter's lease in milliseconds (renewed while it waits)
-- ARGV[4]  a field of KEYS[1] whose presence refuses the wait, or "" for none (a writer's
--          own read holds: the write release would leave the lock in read mode, which
--          neither a notifier nor the waiter itself could then take for writing)
-- ARGV[5]  the publish command (PUBLISH or SPUBLISH) to release the lock here, or "" to leave
--          the owner one hold for the kind's own unlock
-- Reply:   nil                 the owner does not hold the lock (nothing changed)
--          -1                  refused for ARGV[4] (nothing changed)
--          count               the owner's hold count before the call; the waiter is queued
--                              last with the deadline now + ARGV[3], and the lock released
--                              (KEYS[1] deleted, '0' published on KEYS[4]) or its count 1
--          error WRONGTYPE     a key holds another type
local count = redis.call('hget', KEYS[1], ARGV[1]);
if count == false then
    return nil;
end;
if ARGV[4] ~= '' and redis.call('hexists', KEYS[1], ARGV[4]) == 1 then
    return -1;
end;
local now = clock_ms();
cond_prune(KEYS[2], KEYS[3], now);
if ARGV[5] ~= '' then
    redis.call('del', KEYS[1]);
    redis.call(ARGV[5], KEYS[4], '0');
elseif count ~= '1' then
    redis.call('hset', KEYS[1], ARGV[1], 1);
end;
redis.call('rpush', KEYS[3], ARGV[2]);
redis.call('zadd', KEYS[2], now + tonumber(ARGV[3]), ARGV[2]);
cond_keep(KEYS[2], 2 * tonumber(ARGV[3]));
cond_keep(KEYS[3], 2 * tonumber(ARGV[3]));
return tonumber(count);
