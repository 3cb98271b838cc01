-- Helpers shared by the condition scripts: prepended to each condition_*.lua (see src/scripts.rs).
--
-- A condition of a lock is two keys in the lock's slot (ours, not Redisson's): a ZSET of its
-- waiters, each scored by its deadline in ms on the server's clock (TIME), or -1 once a
-- notification has picked it and until it takes it; and a LIST of the waiters not yet picked,
-- in arrival order. A waiter whose deadline passed is presumed dead (its client renews the
-- deadline every third of a lease while it waits) and is skipped. Both keys expire two leases
-- after their last write, so what dead waiters leave goes away by itself.

local function cond_now()
    local t = redis.call('time');
    return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000);
end;

-- Keeps `key` for at least `ms` more (never shortens a longer expiry).
local function cond_keep(key, ms)
    local pttl = redis.call('pttl', key);
    if pttl ~= -2 and pttl < ms then
        redis.call('pexpire', key, ms);
    end;
end;

-- Picks the longest-waiting live waiter of the queue, if any: scores it -1 and publishes '1'
-- on its own channel (`prefix:<id>`). Dead waiters met on the way are dropped. Returns true
-- if one was picked.
local function cond_pick(waiters, queue, now, publish, prefix)
    while true do
        local id = redis.call('lpop', queue);
        if id == false then
            return false;
        end;
        local deadline = tonumber(redis.call('zscore', waiters, id));
        if deadline ~= nil and deadline > now then
            redis.call('zadd', waiters, -1, id);
            redis.call(publish, prefix .. ':' .. id, '1');
            return true;
        elseif deadline ~= nil and deadline >= 0 then
            redis.call('zrem', waiters, id);
        end;
    end;
end;
