-- The gate of a semaphore acquire with a priority: runs before lua/semaphore_acquire.lua (its
-- KEYS[1..3] and ARGV[1..2] are that script's), and lets the caller on to take its permits only
-- when enough are available and no waiter ranked before it is queued (the queue and its
-- ranks: lua/priority_common.lua). A caller that waits joins the queue, or renews its place.
-- Redisson's waiters, and ours without a priority, are not in the queue: they take what is
-- available as they always do.
-- KEYS[4]  the queue "redlatch_priority:{name}" (ZSET owner -> rank, ms, server clock)
-- KEYS[5]  its places' ends "redlatch_priority_alive:{name}" (ZSET owner -> ms, server clock)
-- KEYS[6]  channel "redisson_sc:{name}"
-- ARGV[3]  the waiter's id (one acquire call's, the same at each of its attempts)
-- ARGV[4]  priority (integer, 0 to 1,000,000)
-- ARGV[5]  aging step in ms (a waiter gains one priority per step waited)
-- ARGV[6]  "1" the caller waits if refused (it joins the queue, or keeps its place), "0" not
-- ARGV[7]  how long in ms a place outlives its waiter's last attempt
-- ARGV[8]  publish command (PUBLISH or SPUBLISH)
-- Reply:   as lua/semaphore_acquire.lua, or {0, available, 1, ms} when enough permits are
--          available but a waiter ranked before the caller is queued: the ms until that
--          waiter's place ends (at least 1). A caller let through while others stay queued
--          and permits are left publishes what is left on KEYS[6] (Redisson's message: the
--          count), which wakes them.
local value = redis.call('get', KEYS[1]);
local available = 0;
if value ~= false then
    available = tonumber(value);
end;
-- A count that is no integer: lua/semaphore_acquire.lua refuses it, and nothing is written.
if available ~= nil then
    local now = clock_ms();
    priority_prune(KEYS[4], KEYS[5], now);
    if ARGV[6] == '1' then
        priority_join(KEYS[4], KEYS[5], now, ARGV[3], ARGV[4], ARGV[5], ARGV[7]);
    end;
    local wanted = tonumber(ARGV[1]);
    if available >= wanted then
        local head = priority_head(KEYS[4]);
        if head ~= nil and head ~= ARGV[3] then
            return {0, available, 1, priority_place_end(KEYS[5], head, now)};
        end;
        priority_leave(KEYS[4], KEYS[5], ARGV[3]);
        if available > wanted and redis.call('zcard', KEYS[4]) > 0 then
            redis.call(ARGV[8], KEYS[6], available - wanted);
        end;
    end;
end;
