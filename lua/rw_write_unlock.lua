-- Release one write hold. Redisson's RedissonWriteLock.unlockInnerAsync (rw_common.lua is prepended).
-- KEYS[1]  lock name (HASH, see rw_read_acquire.lua)
-- KEYS[2]  channel "redisson_rwlock:{name}"
-- KEYS[3]  the lock's key prefix "{name}" (every owner's read-hold timeout keys start with it)
-- ARGV[1]  lease in milliseconds, applied again (at least) when write holds remain
-- ARGV[2]  the owner's writer field "<owner>:write"
-- ARGV[3]  publish command (PUBLISH, or SPUBLISH on a cluster with sharded pub/sub)
-- ARGV[4]  optional: the owner's write hold count expected before the release
-- What makes a call safe to lose is ARGV[4], as in lock_unlock.lua: a call that finds another
-- count changes nothing, so of a call whose reply was lost and what follows it (the call sent
-- again, a settle), whichever runs second finds the count the first left. No unlock latch is
-- read or written (Redisson 4.7's writes one per unlock; 3.17's none).
-- Reply:   nil                 the owner holds no write hold (nothing changed)
--          0                   one write hold released, the owner still writes
--          1                   the last write hold released and "1" published (wake all): the key
--                              is deleted, or, when the writer still holds read holds
--                              (downgrade), the mode is now "read" and blocked readers get in
--                              (Redisson publishes nothing in that case; its readers wait out a lease)
--          -1 - count          the owner's count is `count`, not ARGV[4]: nothing changed
--          error WRONGTYPE     the key is not a hash
local count = redis.call('hget', KEYS[1], ARGV[2]);
-- Counts compare as the strings HINCRBY and the client write.
if ARGV[4] ~= nil and count ~= ARGV[4] then
    return -1 - tonumber(count or 0);
end;
if count == false or redis.call('hget', KEYS[1], 'mode') ~= 'write' then
    return nil;
end;
if tonumber(count) > 1 then
    redis.call('hincrby', KEYS[1], ARGV[2], -1);
    local remaining = redis.call('pttl', KEYS[1]);
    redis.call('pexpire', KEYS[1], math.max(remaining, tonumber(ARGV[1])));
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
return 1;
