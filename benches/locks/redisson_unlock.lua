-- The reference, not used by redlatch: Redisson's unlock, call for call as
-- RedissonLock.unlockInnerAsync sends it (redisson/src/main/java/org/redisson/RedissonLock.java,
-- lines 347 to 371, at 6686397 of August 2026): an unlock latch read first and written last.
-- KEYS[1]  lock name
-- KEYS[2]  lock channel
-- KEYS[3]  unlock latch, one per request
-- ARGV[1]  message ("0"), ARGV[2] lease, ARGV[3] owner, ARGV[4] publish command,
--          ARGV[5] latch time-to-live in milliseconds
-- Reply:   the latch's value on a retry; nil when not held; 0 still held; 1 released
local val = redis.call('get', KEYS[3]);
if val ~= false then
    return tonumber(val);
end;
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
    return nil;
end;
local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1);
if counter > 0 then
    redis.call('pexpire', KEYS[1], ARGV[2]);
    redis.call('set', KEYS[3], 0, 'px', ARGV[5]);
    return 0;
end;
redis.call('del', KEYS[1]);
redis.call(ARGV[4], KEYS[2], ARGV[1]);
redis.call('set', KEYS[3], 1, 'px', ARGV[5]);
return 1;
