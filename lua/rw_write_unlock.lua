-- Release one write hold. Redisson's RedissonWriteLock.unlockInnerAsync (rw_common.lua is prepended).
-- KEYS[1]  lock name (HASH, see rw_read_acquire.lua)
-- KEYS[2]  channel "redisson_rwlock:{name}"
-- KEYS[3]  the lock's key prefix "{name}" (every owner's read-hold timeout keys start with it)
-- KEYS[4]  unlock latch "redisson_unlock_latch:{name}:<request id>": makes a retried call idempotent
-- ARGV[1]  lease in milliseconds, applied again (at least) when write holds remain
-- ARGV[2]  the owner's writer field "<owner>:write"
-- ARGV[3]  publish command (PUBLISH, or SPUBLISH on a cluster with sharded pub/sub)
-- ARGV[4]  latch time-to-live in milliseconds
-- Reply:   the latch value when this request already ran (a retry): 0 or 1 as below
--          nil                 the owner holds no write hold (nothing changed)
--          0                   one write hold released, the owner still writes
--          1                   the last write hold released and "1" published (wake all): the key
--                              is deleted, or, when the writer still holds read holds
--                              (downgrade), the mode is now "read" and blocked readers get in
--                              (Redisson publishes nothing in that case; its readers wait out a lease)
--          error WRONGTYPE     the key is not a hash
local val = redis.call('get', KEYS[4]);
if val ~= false then
    return tonumber(val);
end;
if redis.call('hget', KEYS[1], 'mode') ~= 'write' then
    return nil;
end;
local count = redis.call('hget', KEYS[1], ARGV[2]);
if count == false then
    return nil;
end;
if tonumber(count) > 1 then
    redis.call('hincrby', KEYS[1], ARGV[2], -1);
    local remaining = redis.call('pttl', KEYS[1]);
    redis.call('pexpire', KEYS[1], math.max(remaining, tonumber(ARGV[1])));
    redis.call('set', KEYS[4], 0, 'px', ARGV[4]);
    return 0;
end;
redis.call('hdel', KEYS[1], ARGV[2]);
local longest = -2;
if redis.call('hlen', KEYS[1]) > 1 then
    longest = rw_longest_read_hold(KEYS[1], KEYS[3]);
end;
if longest > 0 then
    redis.call('hset', KEYS[1], 'mode', 'read');
    redis.call('pexpire', KEYS[1], longest);
else
    redis.call('del', KEYS[1]);
end;
redis.call(ARGV[3], KEYS[2], '1');
redis.call('set', KEYS[4], 1, 'px', ARGV[4]);
return 1;
