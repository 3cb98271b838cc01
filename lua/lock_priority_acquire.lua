-- Acquire (or re-enter) a plain, non-reentrant or fenced lock as a waiter with a priority:
-- among the waiters that have one, the lowest rank goes first (the queue and its ranks: see
-- lua/priority_common.lua). Waiters without a priority, and Redisson's, are not in the
-- queue: they take a free lock as they always do.
-- KEYS[1]  lock name (HASH: owner -> hold count)
-- KEYS[2]  the queue "redlatch_priority:{name}" (ZSET owner -> rank, ms, server clock)
-- KEYS[3]  its places' ends "redlatch_priority_alive:{name}" (ZSET owner -> ms, server clock):
--          a waiter renews its place at each attempt; a place not renewed by then is dropped
-- KEYS[4]  optional: a fenced lock's token counter "redisson_lock_token:{name}"
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner id
-- ARGV[3]  priority (integer, 0 to 1,000,000)
-- ARGV[4]  aging step in ms (a waiter gains one priority per step waited)
-- ARGV[5]  "1" the caller waits if refused (it joins the queue, or keeps its place), "0" not
-- ARGV[6]  "1" reentrant, "0" not
-- ARGV[7]  how long in ms a place outlives its waiter's last attempt
-- Reply:   as lua/lock_acquire.lua (nil, {count}, {0}, or the PTTL), with {count, token} for
--          a fenced lock as lua/fenced_acquire.lua; when the lock is free but a waiter with
--          a lower rank is queued: the ms until that waiter's place ends (at least 1)
--          error WRONGTYPE  a key of the wrong type (checked before anything is written)
local now = clock_ms();
local bad, counter = nil, nil;
if KEYS[4] ~= nil then
    bad, counter = token_check(KEYS[4]);
    if bad then
        return bad;
    end;
end;
priority_prune(KEYS[2], KEYS[3], now);
local function join()
    if ARGV[5] == '1' then
        priority_join(KEYS[2], KEYS[3], now, ARGV[2], ARGV[3], ARGV[4], ARGV[7]);
    end;
end;
local function take()
    priority_leave(KEYS[2], KEYS[3], ARGV[2]);
    local count = redis.call('hincrby', KEYS[1], ARGV[2], 1);
    redis.call('pexpire', KEYS[1], ARGV[1]);
    if KEYS[4] ~= nil then
        return {count, token_next(KEYS[4], counter)};
    end;
    if count == 1 then
        return nil;
    end;
    return {count};
end;
local pttl = redis.call('pttl', KEYS[1]);
if pttl ~= -2 then
    if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
        join();
        return pttl;
    end;
    if ARGV[6] == '0' then
        return {0};
    end;
    return take();
end;
local head = priority_head(KEYS[2]);
if head == nil or head == ARGV[2] then
    return take();
end;
join();
return priority_place_end(KEYS[3], head, now);
