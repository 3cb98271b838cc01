-- Helpers shared by the acquires of waiters with a priority on a plain lock and on the
-- semaphores (prepended by src/scripts.rs, after lua/clock.lua). The queue is ours: Redisson's
-- waiters, and ours without a priority, are not in it.
--
-- The queue "redlatch_priority:{name}" is a ZSET owner -> rank (ms, server clock): its join
-- time minus its priority times the aging step, fixed when it joins, lowest first. A waiter's
-- effective priority (priority + time waited / aging step) so rises as it waits, and a
-- newcomer gets ahead of it only by joining less than (its priority - ours) aging steps after
-- it. The places' ends "redlatch_priority_alive:{name}" are a ZSET owner -> ms (server
-- clock): a waiter renews its place at each attempt, and a place not renewed by its end is
-- dropped (its waiter crashed). Both keys expire once every waiter is gone.

-- Drops the places of waiters gone without leaving (their place ended before `now`).
local function priority_prune(queue, alive, now)
    local gone = redis.call('zrangebyscore', alive, '-inf', now);
    for _, owner in ipairs(gone) do
        redis.call('zrem', queue, owner);
        redis.call('zrem', alive, owner);
    end;
end;

-- Joins `owner` with `priority` (a waiter already queued keeps its rank) and renews its
-- place until now + `kept` ms.
local function priority_join(queue, alive, now, owner, priority, aging, kept)
    redis.call('zadd', queue, 'NX', now - tonumber(priority) * tonumber(aging), owner);
    redis.call('zadd', alive, now + tonumber(kept), owner);
    redis.call('pexpire', queue, kept);
    redis.call('pexpire', alive, kept);
end;

-- Takes `owner` out of the queue (its turn came).
local function priority_leave(queue, alive, owner)
    redis.call('zrem', queue, owner);
    redis.call('zrem', alive, owner);
end;

-- The waiter served first (nil if nobody is queued).
local function priority_head(queue)
    return redis.call('zrange', queue, 0, 0)[1];
end;

-- The ms until the place of `head` ends, at least 1: when a waiter behind it looks again
-- at the latest if nothing wakes it before.
local function priority_place_end(alive, head, now)
    local ends = tonumber(redis.call('zscore', alive, head)) or now;
    return math.max(ends - now, 1);
end;
