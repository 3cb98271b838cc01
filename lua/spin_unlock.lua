-- Release one hold of a spin lock. Same semantics as Redisson's RedissonSpinLock.unlockInnerAsync:
-- the lock hash of a reentrant lock, but nothing is published (spin waiters poll).
-- KEYS[1]  lock name (HASH: owner -> hold count)
-- KEYS[2]  unlock latch "redisson_unlock_latch:{name}:<request id>": makes a retried call idempotent
-- ARGV[1]  lease in milliseconds, applied again when holds remain
-- ARGV[2]  owner id
-- ARGV[3]  latch time-to-live in milliseconds
-- Reply:   the latch value when this request already ran (a retry): 0 or 1 as below
--          nil                 the owner holds no hold of this lock (nothing changed)
--          0                   one hold released, the owner still holds the lock
--          1                   last hold released: key deleted
--          error WRONGTYPE     the key exists and is not a hash, or the owner's hold count is not
--                              a number (nothing changed)
local val = redis.call('get', KEYS[2]);
if val ~= false then
    return tonumber(val);
end;
local count = redis.call('hget', KEYS[1], ARGV[2]);
if count == false then
    return nil;
end;
if tonumber(count) == nil then
    return redis.error_reply('WRONGTYPE hold count is not a number');
end;
if tonumber(count) > 1 then
    redis.call('hincrby', KEYS[1], ARGV[2], -1);
    redis.call('pexpire', KEYS[1], ARGV[1]);
    redis.call('set', KEYS[2], 0, 'px', ARGV[3]);
    return 0;
else
    redis.call('del', KEYS[1]);
    redis.call('set', KEYS[2], 1, 'px', ARGV[3]);
    return 1;
end;
