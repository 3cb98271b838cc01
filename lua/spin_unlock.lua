-- Release one hold of a spin lock. Same semantics as Redisson's RedissonSpinLock.unlockInnerAsync:
-- the lock hash of a reentrant lock, but nothing is published (spin waiters poll).
-- KEYS[1]  lock name (HASH: owner -> hold count)
-- ARGV[1]  lease in milliseconds, applied again when holds remain
-- ARGV[2]  owner id
-- ARGV[3]  optional: the owner's hold count expected before the release
-- What makes a call safe to lose is ARGV[3], as in lock_unlock.lua: a call that finds another
-- count changes nothing, so of a call whose reply was lost and what follows it (the call sent
-- again, a settle), whichever runs second finds the count the first left. No unlock latch.
-- Reply:   nil                 the owner holds no hold of this lock (nothing changed)
--          0                   one hold released, the owner still holds the lock
--          1                   last hold released: key deleted
--          error WRONGTYPE     the key exists and is not a hash, or the owner's hold count is not
--                              a number (nothing changed)
--          -1 - count          the owner's count is `count`, not ARGV[3]: nothing changed
local count = redis.call('hget', KEYS[1], ARGV[2]);
if ARGV[3] ~= nil and count ~= ARGV[3] then
    return -1 - (tonumber(count or 0) or 0);
end;
if count == false then
    return nil;
end;
if tonumber(count) == nil then
    return redis.error_reply('WRONGTYPE hold count is not a number');
end;
if tonumber(count) > 1 then
    redis.call('hincrby', KEYS[1], ARGV[2], -1);
    redis.call('pexpire', KEYS[1], ARGV[1]);
    return 0;
else
    redis.call('del', KEYS[1]);
    return 1;
end;
