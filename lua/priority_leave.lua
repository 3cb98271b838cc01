-- A waiter with a priority on a semaphore gives up: it leaves the queue (see
-- lua/priority_common.lua), and if it was first and others wait while permits are available
-- (or may be: ARGV[3]), the count is published, as a release does, so that the next one looks
-- again now.
-- KEYS[1]  the queue "redlatch_priority:{name}" (ZSET owner -> rank)
-- KEYS[2]  its places' ends "redlatch_priority_alive:{name}" (ZSET owner -> ms)
-- KEYS[3]  the semaphore's count (STRING)
-- KEYS[4]  channel "redisson_sc:{name}"
-- ARGV[1]  the waiter's id
-- ARGV[2]  publish command (PUBLISH or SPUBLISH)
-- ARGV[3]  optional: "1" publish the count even when no permit is available (a
--          permit-expirable semaphore's, whose expired permits the next waiter's attempt
--          reclaims)
-- Reply:   1 the waiter was queued (and has left), 0 it was not
local first = redis.call('zrange', KEYS[1], 0, 0)[1] == ARGV[1];
if redis.call('zrem', KEYS[1], ARGV[1]) == 0 then
    redis.call('zrem', KEYS[2], ARGV[1]);
    return 0;
end;
redis.call('zrem', KEYS[2], ARGV[1]);
if first and redis.call('zcard', KEYS[1]) > 0 then
    local count = tonumber(redis.call('get', KEYS[3]));
    if count ~= nil and (count > 0 or ARGV[3] == '1') then
        redis.call(ARGV[2], KEYS[4], math.max(count, 0));
    end;
end;
return 1;
