-- Release one read hold. Redisson's RedissonReadLock.unlockInnerAsync (rw_common.lua is prepended).
-- KEYS[1]  lock name (HASH, see rw_read_acquire.lua)
-- KEYS[2]  channel "redisson_rwlock:{name}"
-- KEYS[3]  the owner's hold-timeout prefix "{name}:<owner>:rwlock_timeout"
-- KEYS[4]  the lock's key prefix "{name}" (every owner's timeout keys start with it)
-- KEYS[5]  unlock latch "redisson_unlock_latch:{name}:<request id>": makes a retried call idempotent
-- ARGV[1]  owner id
-- ARGV[2]  publish command (PUBLISH, or SPUBLISH on a cluster with sharded pub/sub)
-- ARGV[3]  latch time-to-live in milliseconds
-- Reply:   the latch value when this request already ran (a retry): 0 or 1 as below
--          nil                 the owner holds no read hold (nothing changed)
--          0                   released; holds remain (the owner's, other readers', or the writer's):
--                              the hash's expiry is cut to the longest live read hold in read mode
--          1                   the last live hold went: key deleted, "0" published (wake one: a writer)
--          error WRONGTYPE     the key is not a hash
local val = redis.call('get', KEYS[5]);
if val ~= false then
    return tonumber(val);
end;
local mode = redis.call('hget', KEYS[1], 'mode');
if mode == false or redis.call('hexists', KEYS[1], ARGV[1]) == 0 then
    return nil;
end;
local left = redis.call('hincrby', KEYS[1], ARGV[1], -1);
if left == 0 then
    redis.call('hdel', KEYS[1], ARGV[1]);
end;
redis.call('del', KEYS[3] .. ':' .. (left + 1));
if redis.call('hlen', KEYS[1]) > 1 then
    local longest = rw_longest_read_hold(KEYS[1], KEYS[4]);
    if mode == 'write' then
        -- The writer's lease stands; its own read holds may only lengthen it.
        if longest > redis.call('pttl', KEYS[1]) then
            redis.call('pexpire', KEYS[1], longest);
        end;
        redis.call('set', KEYS[5], 0, 'px', ARGV[3]);
        return 0;
    end;
    if longest > 0 then
        redis.call('pexpire', KEYS[1], longest);
        redis.call('set', KEYS[5], 0, 'px', ARGV[3]);
        return 0;
    end;
    -- Only expired holds remain (their readers died): the lock is free.
end;
redis.call('del', KEYS[1]);
redis.call(ARGV[2], KEYS[2], '0');
redis.call('set', KEYS[5], 1, 'px', ARGV[3]);
return 1;
