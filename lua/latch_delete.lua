-- Delete a count-down latch, opening it, and wake its waiters (RedissonCountDownLatch.deleteAsync).
-- KEYS[1]  latch name (STRING: the count, decimal)
-- KEYS[2]  latch channel "redisson_countdownlatch__channel__{name}"
-- ARGV[1]  message to publish ("0": zero count, waiters re-check and return)
-- ARGV[2]  publish command (PUBLISH or SPUBLISH)
-- Reply:   1                   the latch existed and was deleted, ARGV[1] published on KEYS[2]
--          0                   there was no latch: nothing published
--          error WRONGTYPE     the key is not a STRING holding an integer: it is left alone
-- Redisson DELs any key; the type check is ours, so a foreign key is reported, not deleted.
local t = redis.call('type', KEYS[1]).ok;
if t == 'none' then
    return 0;
end;
if t ~= 'string' or not is_int(redis.call('get', KEYS[1])) then
    return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value');
end;
redis.call('del', KEYS[1]);
redis.call(ARGV[2], KEYS[2], ARGV[1]);
return 1;
