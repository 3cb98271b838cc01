-- Helpers shared by the condition scripts: prepended to each condition_*.lua (see src/scripts.rs).
--
-- A condition of a lock is two keys in the lock's slot (ours, not Redisson's): a ZSET of its
-- waiters, and a LIST of the waiters not yet picked, in arrival order. A waiter's score is
-- its deadline in ms on the server's clock (TIME): positive while it waits, negated once a
-- notification has picked it and until it takes the notification. Its client renews the
-- deadline every third of a lease while it waits, so a deadline that passed means a dead
-- waiter: one still waiting is skipped, and a notification that picked one is passed on to
-- the next live waiter (by whichever script meets it first: a wait, a notify, a renewal), so
-- that a waiter that dies holds no notification longer than a lease. Both keys expire two
-- leases after their last write, so what dead waiters leave goes away by itself.
--
-- A waiter id ends in `:c<n>` (its client listens with SUBSCRIBE) or `:s<n>` (SSUBSCRIBE): a
-- notification is published the way its waiter listens. Its channel is the waiters' key with
-- the prefix `redlatch_condition__channel` for `redlatch_condition`, then `:<id>`.

-- Keeps `key` for at least `ms` more (never shortens a longer expiry).
local function cond_keep(key, ms)
    local pttl = redis.call('pttl', key);
    if pttl ~= -2 and pttl < ms then
        redis.call('pexpire', key, ms);
    end;
end;

-- Picks the longest-waiting live waiter of the queue, if any: negates its deadline and
-- publishes '1' on its own channel. Dead waiters met on the way are dropped. Returns true if
-- one was picked.
local function cond_pick(waiters, queue, now)
    local channel = 'redlatch_condition__channel' .. string.sub(waiters, 19) .. ':';
    while true do
        local id = redis.call('lpop', queue);
        if id == false then
            return false;
        end;
        local deadline = tonumber(redis.call('zscore', waiters, id));
        if deadline ~= nil and deadline > now then
            redis.call('zadd', waiters, -deadline, id);
            local publish = 'publish';
            if string.match(id, ':s%d+$') then
                publish = 'spublish';
            end;
            redis.call(publish, channel .. id, '1');
            return true;
        elseif deadline ~= nil then
            redis.call('zrem', waiters, id);
        end;
    end;
end;

-- Drops dead waiters: one that waited leaves the queue too; a notification that picked one
-- goes to the next live waiter.
local function cond_prune(waiters, queue, now)
    local dead = redis.call('zrangebyscore', waiters, 0, now);
    for _, id in ipairs(dead) do
        redis.call('zrem', waiters, id);
        redis.call('lrem', queue, 1, id);
    end;
    local unclaimed = redis.call('zrangebyscore', waiters, -now, '(0');
    for _, id in ipairs(unclaimed) do
        redis.call('zrem', waiters, id);
        cond_pick(waiters, queue, now);
    end;
end;
