-- Delete a reentrant lock whoever holds it, and wake its waiters (RedissonLock.forceUnlockAsync).
-- KEYS[1]  lock name
-- KEYS[2]  lock channel
-- ARGV[1]  message to publish ("0")
-- ARGV[2]  publish command (PUBLISH or SPUBLISH)
-- Reply:   1                   the lock existed and was deleted, ARGV[1] published on KEYS[2]
--          0                   there was no lock
--          error WRONGTYPE     the key holds another type: it is left alone
local t = redis.call('type', KEYS[1]).ok;
if t ~= 'hash' and t ~= 'none' then
    return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value');
end;
if redis.call('del', KEYS[1]) == 1 then
    redis.call(ARGV[2], KEYS[2], ARGV[1]);
    return 1;
end;
return 0;
