-- Release one read hold. Redisson's RedissonReadLock.unlockInnerAsync (rw_common.lua is prepended).
-- KEYS[1]  lock name (HASH, see rw_read_acquire.lua)
-- KEYS[2]  channel "redisson_rwlock:{name}"
-- KEYS[3]  the owner's hold-timeout prefix "{name}:<owner>:rwlock_timeout"
-- KEYS[4]  the lock's key prefix "{name}" (every owner's timeout keys start with it)
-- ARGV[1]  owner id
-- ARGV[2]  publish command (PUBLISH, or SPUBLISH on a cluster with sharded pub/sub)
-- ARGV[3]  optional: the owner's read hold count expected before the release
-- What makes a call safe to lose is ARGV[3], as in lock_unlock.lua: a call that finds another
-- count changes nothing, so of a call whose reply was lost and what follows it (the call sent
-- again, a settle), whichever runs second finds the count the first left. No unlock latch is
-- read or written (Redisson 4.7's writes one per unlock; 3.17's none).
-- Reply:   nil                 the owner holds no read hold (nothing changed)
--          0                   released; holds remain (the owner's, other readers', or the writer's):
--                              in read mode the hash's expiry is cut to the longest live read hold,
--                              and if that moves it earlier by more than 100 ms "0" is published,
--                              so that a waiting writer re-reads the expiry it waits for
--          1                   the last live hold went: key deleted, "0" published (wake one: a writer)
--          2                   the owner's hold had expired already (its timeout key is gone): it
--                              was removed as above, but the caller's guard had lost it
--          -1 - count          the owner's count is `count`, not ARGV[3]: nothing changed
--          error WRONGTYPE     the key is not a hash
local mode = redis.call('hget', KEYS[1], 'mode');
local held = redis.call('hget', KEYS[1], ARGV[1]);
-- Counts compare as the strings HINCRBY and the client write.
if ARGV[3] ~= nil and held ~= ARGV[3] then
    return -1 - tonumber(held or 0);
end;
if mode == false or held == false then
    return nil;
end;
-- The newest hold goes: its timeout key (which DEL finds gone when its lease ran out), and
-- one count (the field itself for the last).
local expired = redis.call('del', KEYS[3] .. ':' .. held) == 0;
local function reply(n)
    if expired then
        n = 2;
    end;
    return n;
end;
if held == '1' then
    redis.call('hdel', KEYS[1], ARGV[1]);
else
    redis.call('hincrby', KEYS[1], ARGV[1], -1);
end;
if redis.call('hlen', KEYS[1]) > 1 then
    local longest = rw_longest_read_hold(KEYS[1], KEYS[4]);
    if mode == 'write' then
        -- The writer's lease stands; its own read holds may only lengthen it.
        if longest > redis.call('pttl', KEYS[1]) then
            redis.call('pexpire', KEYS[1], longest);
        end;
        return reply(0);
    end;
    if longest > 0 then
        local before = redis.call('pttl', KEYS[1]);
        redis.call('pexpire', KEYS[1], longest);
        if before - longest > 100 then
            redis.call(ARGV[2], KEYS[2], '0');
        end;
        return reply(0);
    end;
    -- Only expired holds remain (their readers died): the lock is free.
end;
redis.call('del', KEYS[1]);
redis.call(ARGV[2], KEYS[2], '0');
return reply(1);
