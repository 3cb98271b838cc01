-- The gate of a permit-expirable semaphore acquire with a priority: runs before
-- lua/pes_acquire.lua (its KEYS[1..3] and ARGV[1..3+n] are that script's; lua/pes_check.lua
-- and lua/pes_common.lua ran first, defining `now` and `count`), and lets the caller on to
-- take its permits only when enough are available and no waiter ranked before it is queued
-- (the queue and its ranks: lua/priority_common.lua). A caller that waits joins the queue,
-- or renews its place; its id there is its first permit id. Redisson's waiters, and ours
-- without a priority, are not in the queue: they take what is available as they always do.
-- KEYS[4]  the queue "redlatch_priority:{name}" (ZSET waiter -> rank, ms, server clock)
-- KEYS[5]  its places' ends "redlatch_priority_alive:{name}" (ZSET waiter -> ms)
-- ARGV[4+n] priority (integer, 0 to 1,000,000)
-- ARGV[5+n] aging step in ms (a waiter gains one priority per step waited)
-- ARGV[6+n] "1" the caller waits if refused (it joins the queue, or keeps its place), "0" not
-- ARGV[7+n] how long in ms a place outlives its waiter's last attempt
-- Reply:   as lua/pes_acquire.lua; {0, count, ms} also when enough permits are available but
--          a waiter ranked before the caller is queued: ms until that waiter's place ends (at
--          least 1). A caller let through while others stay queued publishes what is left
--          on KEYS[3] (Redisson's message: the count; 0 too), which wakes them.
local n = tonumber(ARGV[3]);
local me = ARGV[4];
priority_prune(KEYS[4], KEYS[5], now);
if ARGV[6 + n] == '1' then
    priority_join(KEYS[4], KEYS[5], now, me, ARGV[4 + n], ARGV[5 + n], ARGV[7 + n]);
end;
if count >= n then
    local head = priority_head(KEYS[4]);
    if head ~= nil and head ~= me then
        return {0, count, priority_place_end(KEYS[5], head, now)};
    end;
    priority_leave(KEYS[4], KEYS[5], me);
    if redis.call('zcard', KEYS[4]) > 0 then
        -- Even none left: the next looks again now, and learns when a permit expires.
        redis.call(ARGV[1], KEYS[3], int(count - n));
    end;
end;
