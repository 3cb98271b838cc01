-- Delete a spin lock whoever holds it, publishing nothing (RedissonSpinLock.forceUnlockAsync).
-- KEYS[1]  lock name
-- Reply:   1                   the lock existed and was deleted
--          0                   there was no lock
--          error WRONGTYPE     the key holds another type: it is left alone
local t = redis.call('type', KEYS[1]).ok;
if t ~= 'hash' and t ~= 'none' then
    return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value');
end;
return redis.call('del', KEYS[1]);
